"""Per-topic configuration: Kafka's topic config names, their broker-level defaults, validation.

A topic's effective setting is its own override if it has one, else the broker's synonym (with
Kafka's chains: `retention.ms` ← log.retention.ms ← .minutes ← .hours), else the topic key's
own default. Overrides arrive from CreateTopics and AlterConfigs as strings; a bad name or
value is a ConfigError, which handlers answer with INVALID_CONFIG and `str(error)`.

`describe_topic_config` produces DescribeConfigs rows with Kafka's sources and synonym order,
including its quirks, so `kafka-configs --describe` prints what it would print against Kafka.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Iterator, Mapping, cast

from protocol.records.batch import Compression
from pybroker.config.broker import BrokerConfig
from pybroker.config.broker_keys import (
    ALL_TOPIC_CONFIG_SYNONYMS, BROKER_SYNONYM_GROUPS, CLEANUP_POLICIES,
    COMPRESSION_TYPES, TIMESTAMP_TYPES,
)
from pybroker.config.definitions import (
    INT64_MAX, ConfigEntry, ConfigError, ConfigKey, ConfigSource, ConfigSynonym, ConfigType,
    KeyState, ListOf, OneOf, ThrottledReplicas, Validator, at_least, between, kafka_synonym_order,
    to_config_string,
)

_B, _S, _I, _L, _D, _LS = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT,
                           ConfigType.LONG, ConfigType.DOUBLE, ConfigType.LIST)


def _t(name: str, type_: ConfigType, default: object, validator: Validator | None,
       doc: str, *, inert: str | None = None, na: bool = False) -> ConfigKey:
    """One row; `inert` and `na` as in the broker table (see KeyState)."""
    state = (KeyState.INERT if inert else KeyState.NOT_APPLICABLE if na
             else KeyState.HONOURED)
    return ConfigKey(name, type_, default, validator, "medium", doc, state=state,
                     feature=inert)


TOPIC_CONFIG_KEYS: tuple[ConfigKey, ...] = (
    _t("cleanup.policy", _LS, ("delete",), ListOf(CLEANUP_POLICIES),
       "delete: drop old segments by retention. compact: keep the newest record of each key. "
       "Both may be given: compact,delete."),
    _t("compression.type", _S, "producer", OneOf(COMPRESSION_TYPES),
       "Compression kept on disk: producer keeps what the producer sent; a codec name "
       "recompresses; uncompressed stores plain records."),
    _t("delete.retention.ms", _L, 86400000, at_least(0),
       "How long delete markers stay in a compacted topic, so consumers catching up see them."),
    _t("file.delete.delay.ms", _L, 60000, at_least(0),
       "Time between a segment leaving the log and its files being deleted."),
    _t("flush.messages", _L, INT64_MAX, at_least(1),
       "fsync after this many messages. Default: leave it to the operating system."),
    _t("flush.ms", _L, INT64_MAX, at_least(0),
       "fsync once the oldest unflushed write is this old. Default: leave it to the OS."),
    _t("follower.replication.throttled.replicas", _LS, (), ThrottledReplicas(),
       "Replicas (partition:broker, or * for all) whose fetching as followers is held to "
       "their broker's follower.replication.throttled.rate while out of sync."),
    _t("index.interval.bytes", _I, 4096, at_least(0),
       "Bytes of log between two entries of the sparse offset and time indexes."),
    _t("leader.replication.throttled.replicas", _LS, (), ThrottledReplicas(),
       "Replicas (partition:broker, or * for all) whose answers to out-of-sync followers are "
       "held to their broker's leader.replication.throttled.rate."),
    _t("max.compaction.lag.ms", _L, INT64_MAX, at_least(1),
       "A record becomes eligible for compaction at the latest after this long."),
    _t("max.message.bytes", _I, 1048588, at_least(0),
       "Largest record batch accepted for this topic, after compression."),
    _t("message.downconversion.enable", _B, True, None,
       "Whether fetches by old clients may be served by converting batches to their format. "
       "Accepted; unused: Fetch is served from v4 (magic-2 batches only), as in Kafka 4.", na=True),
    _t("message.timestamp.after.max.ms", _L, 3_600_000, at_least(0),
       "With CreateTime, refuse batches timestamped further than this in the future."),
    _t("message.timestamp.before.max.ms", _L, INT64_MAX, at_least(0),
       "With CreateTime, refuse batches timestamped further than this in the past."),
    _t("message.timestamp.type", _S, "CreateTime", OneOf(TIMESTAMP_TYPES),
       "Keep the producer's timestamp (CreateTime) or stamp the append time (LogAppendTime)."),
    _t("min.cleanable.dirty.ratio", _D, 0.5, between(0, 1),
       "Compact only when at least this fraction of the log has not been compacted."),
    _t("min.compaction.lag.ms", _L, 0, at_least(0),
       "A record stays uncompacted at least this long."),
    _t("min.insync.replicas", _I, 1, at_least(1),
       "With acks=all, in-sync replicas that must hold a write before it is acknowledged."),
    _t("preallocate", _B, False, None,
       "Kafka creates segment files at their full size up front. Accepted; pybroker's "
       "segment files grow as they are written.", na=True),
    _t("retention.bytes", _L, -1, None,
       "Delete the oldest segments while a partition is larger than this; -1: no limit."),
    _t("retention.ms", _L, 604800000, at_least(-1),
       "Delete segments whose newest record is older than this; -1 keeps data forever."),
    _t("segment.bytes", _I, 1073741824, at_least(14),
       "Start a new segment file when the active one would grow past this size."),
    _t("segment.index.bytes", _I, 10485760, at_least(4),
       "Preallocated size of each segment's offset index."),
    _t("segment.jitter.ms", _L, 0, at_least(0),
       "Random time taken off segment.ms so that partitions do not all roll together."),
    _t("segment.ms", _L, 604800000, at_least(1),
       "Start a new segment once the active one is this old, so retention can act on it."),
    _t("unclean.leader.election.enable", _B, False, None,
       "Allow an out-of-sync replica to become leader, losing acknowledged writes (read by the "
       "controller over the broker's unclean.leader.election.enable)."),
)

TOPIC_CONFIG_DEFS: Mapping[str, ConfigKey] = MappingProxyType(
    {key.name: key for key in TOPIC_CONFIG_KEYS})

# Topic config → its first-choice broker key (Kafka's TOPIC_CONFIG_SYNONYMS).
TOPIC_CONFIG_SYNONYMS: Mapping[str, str] = MappingProxyType(
    {topic: chain[0][0] for topic, chain in ALL_TOPIC_CONFIG_SYNONYMS.items()})


@dataclass(frozen=True)
class TopicConfig:
    """A topic's effective settings; attribute names are the Kafka names with `_` for `.`.

    `overrides` keeps the topic's own settings as given (what is persisted and described as
    DYNAMIC_TOPIC_CONFIG); everything else came from the broker.
    """

    cleanup_policy: frozenset[str]
    compression_type: str
    delete_retention_ms: int
    file_delete_delay_ms: int
    flush_messages: int
    flush_ms: int
    follower_replication_throttled_replicas: tuple[str, ...]
    index_interval_bytes: int
    leader_replication_throttled_replicas: tuple[str, ...]
    max_compaction_lag_ms: int
    max_message_bytes: int
    message_downconversion_enable: bool
    message_timestamp_after_max_ms: int
    message_timestamp_before_max_ms: int
    message_timestamp_type: str
    min_cleanable_dirty_ratio: float
    min_compaction_lag_ms: int
    min_insync_replicas: int
    preallocate: bool
    retention_bytes: int
    retention_ms: int
    segment_bytes: int
    segment_index_bytes: int
    segment_jitter_ms: int
    segment_ms: int
    unclean_leader_election_enable: bool
    overrides: Mapping[str, str] = field(default_factory=dict, hash=False)

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def stored_compression(self) -> Compression | None:
        """The codec compression.type stores batches with; None for "producer" (as sent)."""
        if self.compression_type == "producer":
            return None
        if self.compression_type == "uncompressed":
            return Compression.NONE
        return Compression[self.compression_type.upper()]

    @property
    def max_segment_ms(self) -> int:
        """Roll age that also honours max.compaction.lag.ms on compacted topics, as Kafka."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    def get(self, name: str) -> object:
        """The effective value of a topic config by its Kafka name; KeyError if unknown."""
        if name not in TOPIC_CONFIG_DEFS:
            raise KeyError(name)
        return getattr(self, name.replace(".", "_"))


def validate_topic_configs(configs: Mapping[str, str | None]) -> None:
    """Check names and values of topic overrides, as CreateTopics and AlterConfigs must.

    Raises ConfigError for an unknown name, a missing value, a value that does not parse or
    validate, or min.compaction.lag.ms above max.compaction.lag.ms.
    """
    parsed = _parse_overrides(configs)
    lags = {name: parsed.get(name, TOPIC_CONFIG_DEFS[name].default)
            for name in ("min.compaction.lag.ms", "max.compaction.lag.ms")}
    _check_compaction_lags(lags)


def inert_topic_config_warnings(configs: Mapping[str, str | None]) -> list[str]:
    """One line for each override that has no effect yet (an INERT topic key), to be logged
    when a topic is created or altered with it, as the broker's inert keys are at start."""
    keys = (TOPIC_CONFIG_DEFS.get(name) for name in configs)
    return [warning for key in keys if key is not None
            for warning in (key.inert_warning(),) if warning is not None]


def resolve_topic_config(broker: BrokerConfig, overrides: Mapping[str, str]) -> TopicConfig:
    """A topic's effective settings from its overrides and the broker's configuration."""
    values = _effective_values(broker, overrides)
    fields = {name.replace(".", "_"): value for name, value in values.items()}
    fields["cleanup_policy"] = frozenset(cast("tuple[str, ...]", values["cleanup.policy"]))
    # The fields are the topic keys by name, their values typed by each key's declaration,
    # which mypy cannot match to TopicConfig's fields through a dict.
    return TopicConfig(**fields, overrides=MappingProxyType(dict(overrides)))  # type: ignore[arg-type]


def describe_topic_config(broker: BrokerConfig, overrides: Mapping[str, str], *,
                          trim_synonyms: bool = True) -> Iterator[ConfigEntry]:
    """DescribeConfigs rows for resource type TOPIC, one per topic config, in name order.

    Synonyms come in Kafka's order: the topic's own override (DYNAMIC_TOPIC_CONFIG) if any,
    then the broker's dynamic configs (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG),
    broker keys set in the file (STATIC_BROKER_CONFIG), then broker defaults (DEFAULT_CONFIG), trimmed as Kafka trims them (see `kafka_synonym_order`). The entry's
    source is that of its first synonym, DEFAULT_CONFIG when there is none. CreateTopics
    answers with `trim_synonyms=False`, as Kafka's controller does.
    """
    values = _effective_values(broker, overrides)
    layers = broker.layers()
    for key in sorted(TOPIC_CONFIG_KEYS, key=lambda item: item.name):
        value = to_config_string(values[key.name])
        synonyms: list[ConfigSynonym] = []
        if key.name in overrides:
            synonyms.append(ConfigSynonym(key.name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        primary = TOPIC_CONFIG_SYNONYMS.get(key.name)
        if primary is not None:
            group = BROKER_SYNONYM_GROUPS.get(primary, (primary,))
            synonyms += kafka_synonym_order(primary, group, layers, trim=trim_synonyms)
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        yield ConfigEntry(
            name=key.name, value=value, source=source,
            is_default=source is ConfigSource.DEFAULT_CONFIG, read_only=False,
            is_sensitive=key.sensitive, synonyms=tuple(synonyms), config_type=key.type,
            documentation=key.doc)


def _parse_overrides(configs: Mapping[str, str | None]) -> dict[str, object]:
    parsed: dict[str, object] = {}
    for name, raw in configs.items():
        key = TOPIC_CONFIG_DEFS.get(name)
        if key is None:
            raise ConfigError(name, raw, "Unknown topic config name",
                              message=f"Unknown topic config name: {name}")
        if raw is None:
            raise ConfigError(name, raw, "Null value not supported for topic configs",
                              message=f"Null value not supported for topic configs: {name}")
        parsed[name] = key.parse(raw)
    return parsed


def _effective_values(broker: BrokerConfig, overrides: Mapping[str, str]) -> dict[str, object]:
    parsed = _parse_overrides(overrides)
    values: dict[str, object] = {}
    for key in TOPIC_CONFIG_KEYS:
        if key.name in parsed:
            values[key.name] = parsed[key.name]
        else:
            inherited = broker.topic_default(key.name)
            values[key.name] = key.default if inherited is None else inherited
    _check_compaction_lags(values)
    return values


def _check_compaction_lags(values: Mapping[str, object]) -> None:
    low = cast(int, values["min.compaction.lag.ms"])
    high = cast(int, values["max.compaction.lag.ms"])
    if low > high:
        raise ConfigError(
            "min.compaction.lag.ms", low, "must not exceed max.compaction.lag.ms",
            message=f"conflict topic config setting min.compaction.lag.ms ({low}) > "
                    f"max.compaction.lag.ms ({high})")
