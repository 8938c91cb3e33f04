"""A group's own configs (KIP-848, KIP-932): the GROUP config resource (type 32), Kafka 4.1's
GroupConfig.

Theory of operation. An admin sets a group's overrides with IncrementalAlterConfigs (or
AlterConfigs) on resource type 32 and reads them back with DescribeConfigs; the store keeps
them beside the broker's dynamic configs (the metadata file on one broker, /config/groups/<g>
in ZooKeeper), whether the group exists or not, as Kafka keeps them. Each key stands for a
broker key (`consumer.session.timeout.ms` for `group.consumer.session.timeout.ms`), whose
value a group without the override runs with; a timeout override must lie within the
broker's min./max. bounds for it (config/group_bounds.py). The coordinators read the
overrides where they use the value: a session timeout at the next heartbeat (so a member's
running session keeps the deadline it had), a heartbeat interval in the next response, a lock
duration at the next acquisition, `share.auto.offset.reset` when a share-partition is first
initialised.

Kafka 4.1's streams.* keys are refused (pybroker serves no streams groups: setting them would
be a silent no-op), and so is `share.isolation.level=read_committed`: pybroker's ShareFetch
reads uncommitted records only.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import cast

from pybroker.config.broker import BrokerConfig
from pybroker.config.definitions import (
    ConfigEntry, ConfigError, ConfigKey, ConfigSource, ConfigSynonym, ConfigType, OneOf,
    ShareOffsetReset, at_least, iso_duration_ms, to_config_string,
)

_I, _S = ConfigType.INT, ConfigType.STRING


# Kafka's GroupConfig, in its order (the order DescribeConfigs lists them).
GROUP_CONFIG_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("consumer.session.timeout.ms", _I, 45000, at_least(1), "medium",
              "How long a member of this consumer group may go without a heartbeat before it "
              "is fenced; within group.consumer.min./max.session.timeout.ms."),
    ConfigKey("consumer.heartbeat.interval.ms", _I, 5000, at_least(1), "medium",
              "The heartbeat interval this consumer group's members are told to keep; within "
              "group.consumer.min./max.heartbeat.interval.ms."),
    ConfigKey("share.session.timeout.ms", _I, 45000, at_least(1), "medium",
              "How long a member of this share group may go without a heartbeat before it is "
              "removed; within group.share.min./max.session.timeout.ms."),
    ConfigKey("share.heartbeat.interval.ms", _I, 5000, at_least(1), "medium",
              "The heartbeat interval this share group's members are told to keep; within "
              "group.share.min./max.heartbeat.interval.ms."),
    ConfigKey("share.record.lock.duration.ms", _I, 30000, at_least(1000), "medium",
              "How long a member of this share group holds the records it acquired; within "
              "group.share.min./max.record.lock.duration.ms."),
    ConfigKey("share.auto.offset.reset", _S, "latest", ShareOffsetReset(), "medium",
              "Where a share-partition of this group starts when the group has no state for "
              "it: latest (the high watermark), earliest (the log start offset), or "
              "by_duration:<ISO-8601 duration> (the first record at most that old)."),
    ConfigKey("share.isolation.level", _S, "read_uncommitted",
              OneOf(("read_committed", "read_uncommitted")), "medium",
              "How this share group reads transactional records. pybroker serves "
              "read_uncommitted only; read_committed is refused."),
)
GROUP_CONFIG_DEFS: Mapping[str, ConfigKey] = {key.name: key for key in GROUP_CONFIG_KEYS}

# The broker key each group key overrides (Kafka's GroupCoordinatorConfig.extractGroupConfigMap
# and ShareGroupConfig.extractShareGroupConfigMap), and the bounds it must keep.
BROKER_SYNONYMS = {
    "consumer.session.timeout.ms": "group.consumer.session.timeout.ms",
    "consumer.heartbeat.interval.ms": "group.consumer.heartbeat.interval.ms",
    "share.session.timeout.ms": "group.share.session.timeout.ms",
    "share.heartbeat.interval.ms": "group.share.heartbeat.interval.ms",
    "share.record.lock.duration.ms": "group.share.record.lock.duration.ms",
}
_BOUNDS = {name: (broker.replace(".session.", ".min.session.")
                  .replace(".heartbeat.", ".min.heartbeat.").replace(".record.", ".min.record."),
                  broker.replace(".session.", ".max.session.")
                  .replace(".heartbeat.", ".max.heartbeat.").replace(".record.", ".max.record."))
           for name, broker in BROKER_SYNONYMS.items()}
# Kafka 4.1's GroupConfig keys for streams groups (KIP-1071), which pybroker does not serve.
STREAMS_KEYS = frozenset({"streams.session.timeout.ms", "streams.heartbeat.interval.ms",
                          "streams.num.standby.replicas"})


def check_group_configs(configs: Mapping[str, str | None], broker: BrokerConfig) -> None:
    """Kafka's GroupConfig.validateNames then validate over a group's whole new set of
    overrides: names, values, then each timeout within the broker's bounds, in Kafka's words
    (answered INVALID_CONFIG); plus pybroker's refusals (module docstring)."""
    for name in configs:
        if name in STREAMS_KEYS:
            raise ConfigError(name, configs[name], "", message=(
                f"{name} configures streams groups (KIP-1071), which pybroker does not "
                "serve"))
        if name not in GROUP_CONFIG_DEFS:
            raise ConfigError(name, configs[name], "",
                              message=f"Unknown group config name: {name}")
    parsed = {}
    for name, raw in configs.items():
        if raw is None:
            raise ConfigError(name, raw, "", message=(
                f"Null value not supported for group configs: {name}"))
        parsed[name] = GROUP_CONFIG_DEFS[name].parse(raw)
    if parsed.get("share.isolation.level") == "read_committed":
        raise ConfigError("share.isolation.level", "read_committed",
                          "pybroker's share groups read uncommitted records only")
    for name, value in parsed.items():
        if name in _BOUNDS:
            low, high = _BOUNDS[name]
            if cast(int, value) < cast(int, broker[low]):
                raise ConfigError(name, value, "", message=(
                    f"{name} must be greater than or equal to {low}"))
            if cast(int, value) > cast(int, broker[high]):
                raise ConfigError(name, value, "", message=(
                    f"{name} must be less than or equal to {high}"))


@dataclass(frozen=True)
class GroupSettings:
    """What one group runs with: its overrides over the broker's values."""

    consumer_session_timeout_ms: int
    consumer_heartbeat_interval_ms: int
    share_session_timeout_ms: int
    share_heartbeat_interval_ms: int
    share_record_lock_duration_ms: int
    share_auto_offset_reset: str

    def share_reset_duration_ms(self) -> int | None:
        """by_duration's duration, or None for latest and earliest."""
        if not self.share_auto_offset_reset.startswith("by_duration:"):
            return None
        return iso_duration_ms(self.share_auto_offset_reset[len("by_duration:"):])


def group_settings(broker: BrokerConfig, overrides: Mapping[str, str]) -> GroupSettings:
    """The group's values. An override that no longer fits (the broker's bounds moved since it
    was stored, as a restart with new bounds can do) gives way to the broker's value."""
    values: dict[str, object] = {}
    for key in GROUP_CONFIG_KEYS:
        synonym = BROKER_SYNONYMS.get(key.name)
        values[key.name] = broker[synonym] if synonym else key.default
        raw = overrides.get(key.name)
        if raw is not None:
            try:
                check_group_configs({key.name: raw}, broker)
            except ConfigError:
                continue
            values[key.name] = key.parse(raw)
    return GroupSettings(
        consumer_session_timeout_ms=cast(int, values["consumer.session.timeout.ms"]),
        consumer_heartbeat_interval_ms=cast(int, values["consumer.heartbeat.interval.ms"]),
        share_session_timeout_ms=cast(int, values["share.session.timeout.ms"]),
        share_heartbeat_interval_ms=cast(int, values["share.heartbeat.interval.ms"]),
        share_record_lock_duration_ms=cast(int, values["share.record.lock.duration.ms"]),
        share_auto_offset_reset=cast(str, values["share.auto.offset.reset"]))


def describe_group_config(broker: BrokerConfig, overrides: Mapping[str, str]
                          ) -> Iterator[ConfigEntry]:
    """DescribeConfigs rows for resource type GROUP (Kafka's ConfigHelper.
    createGroupConfigEntry): every key, its override first (DYNAMIC_GROUP_CONFIG), then its
    broker key where it has one (from the layer that sets it, else DEFAULT_CONFIG), or a
    DEFAULT_CONFIG synonym under its own name; the entry's source is its first synonym's."""
    layers = broker.layers()
    for key in GROUP_CONFIG_KEYS:
        synonyms: list[ConfigSynonym] = []
        if key.name in overrides:
            synonyms.append(ConfigSynonym(key.name, overrides[key.name],
                                          ConfigSource.DYNAMIC_GROUP_CONFIG))
        synonym = BROKER_SYNONYMS.get(key.name)
        if synonym is None:
            synonyms.append(ConfigSynonym(key.name, to_config_string(key.default),
                                          ConfigSource.DEFAULT_CONFIG))
        else:
            source = next((s for s, layer in layers[:3] if synonym in layer),
                          ConfigSource.DEFAULT_CONFIG)
            synonyms.append(ConfigSynonym(synonym, to_config_string(broker[synonym]), source))
        first = synonyms[0]
        yield ConfigEntry(
            name=key.name, value=first.value, source=first.source,
            is_default=first.source is ConfigSource.DEFAULT_CONFIG, read_only=False,
            is_sensitive=False, synonyms=tuple(synonyms), config_type=key.type,
            documentation=key.doc)
