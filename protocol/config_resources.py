"""Numbers the config APIs carry: resource types and where a config value came from.

Shared by the broker's handlers and configuration, and by the client and tools, so both sides
of DescribeConfigs and AlterConfigs agree on Kafka's numbering.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    # ConfigResource.Type.GROUP (KIP-848/932): a group's configs. The ACL resource type of a
    # group is GROUP (3); the config APIs number groups 32.
    GROUP_CONFIG = 32


class ConfigSource(enum.IntEnum):
    """DescribeConfigs `config_source` as Kafka numbers it on the wire, with the Java names."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    DYNAMIC_CLIENT_METRICS_CONFIG = 7
    DYNAMIC_GROUP_CONFIG = 8

    @classmethod
    def of(cls, value: int) -> "ConfigSource":
        """A peer's value; one we do not know reads as UNKNOWN instead of failing."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True)
class ConfigSynonym:
    """One place a config value could have come from, as DescribeConfigs lists synonyms."""

    name: str
    value: str | None
    source: ConfigSource
