"""Broker and topic configuration with Kafka's names, defaults, validation and precedence.

- `properties`: reading Java `.properties` files (`server.properties`).
- `definitions`: how a key is typed, parsed and validated; ConfigError; DescribeConfigs types.
- `broker_keys`: the broker key table and its synonym tables, declared once.
- `broker`: `BrokerConfig` (precedence, cross-key rules), `load_broker_config`, describe.
- `topic`: topic config keys, synonyms to broker keys, `TopicConfig`, validation, describe.

No trio here: configuration is read before the event loop starts and by the tools.
"""
from pybroker.config.broker import (
    BrokerConfig, Listener, describe_broker_config, load_broker_config,
)
from pybroker.config.broker_keys import (
    ALL_TOPIC_CONFIG_SYNONYMS, BROKER_CONFIG_DEFS, BROKER_CONFIG_KEYS, BROKER_SYNONYM_GROUPS,
)
from pybroker.config.definitions import (
    FEATURES, ConfigEntry, ConfigError, ConfigKey, ConfigSource, ConfigSynonym, ConfigType,
    KeyState,
)
from pybroker.config.properties import load_properties, parse_properties
from pybroker.config.topic import (
    TOPIC_CONFIG_DEFS, TOPIC_CONFIG_KEYS, TOPIC_CONFIG_SYNONYMS, TopicConfig,
    describe_topic_config, inert_topic_config_warnings, resolve_topic_config,
    validate_topic_configs,
)

__all__ = [
    "ALL_TOPIC_CONFIG_SYNONYMS", "BROKER_CONFIG_DEFS", "BROKER_CONFIG_KEYS",
    "BROKER_SYNONYM_GROUPS", "BrokerConfig", "ConfigEntry", "ConfigError", "ConfigKey",
    "ConfigSource", "ConfigSynonym", "ConfigType", "FEATURES", "KeyState", "Listener",
    "TOPIC_CONFIG_DEFS", "TOPIC_CONFIG_KEYS", "TOPIC_CONFIG_SYNONYMS", "TopicConfig",
    "describe_broker_config", "describe_topic_config", "inert_topic_config_warnings",
    "load_broker_config", "load_properties", "parse_properties", "resolve_topic_config",
    "validate_topic_configs",
]
