"""Broker configuration: Kafka's `server.properties` keys, defaults, validation and precedence.

`BROKER_CONFIG_KEYS` is the one table of keys this broker knows. Names, types, defaults and
validators are Kafka's (3.x, the last line with ZooKeeper mode) unless the doc says otherwise; the
doc strings are ours. A few keys are accepted only so that Kafka's own configuration files load
without noise (thread counts, KRaft controller settings); their docs say so.

Differences from Kafka, on purpose:
- `node.id` / `broker.id` default to 0, not "must be set", so a broker starts with no file.
- `listeners` defaults to `PLAINTEXT://127.0.0.1:9092` rather than all interfaces, so a broker
  started for a test or a laptop is not reachable from the network.
- Every broker key is read-only in DescribeConfigs: there is no dynamic broker configuration.

As in Kafka, unknown keys are reported (`BrokerConfig.warnings`, and logged), never fatal: a
typo costs a warning, and files written for another Kafka version still load.
"""
from __future__ import annotations

import logging
import os
import re
from types import MappingProxyType
from typing import Generic, Iterator, Mapping, NamedTuple, TypeVar, cast, overload

from pybroker.config.definitions import (
    INT32_MAX, INT64_MAX, ConfigEntry, ConfigError, ConfigKey, ConfigSource, ConfigType,
    Importance, ListOf, NonEmptyUniqueList, OneOf, Validator, at_least, between,
    kafka_synonym_order, to_config_string,
)
from pybroker.config.properties import load_properties

logger = logging.getLogger("pybroker.config")

_B, _S, _I, _SH, _L, _D, _LS = (
    ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.SHORT, ConfigType.LONG,
    ConfigType.DOUBLE, ConfigType.LIST)
_HIGH: Importance = "high"
_MEDIUM: Importance = "medium"
_LOW: Importance = "low"

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")
_HOUR_MS = 60 * 60 * 1000
_MINUTE_MS = 60 * 1000


def _k(name: str, type_: ConfigType, default: object, validator: Validator | None,
       importance: Importance, doc: str) -> ConfigKey:
    return ConfigKey(name, type_, default, validator, importance, doc)


BROKER_CONFIG_KEYS: tuple[ConfigKey, ...] = (
    # --- identity and cluster -------------------------------------------------------------------
    _k("node.id", _I, 0, at_least(0), _HIGH,
       "This broker's id in the cluster. Same setting as broker.id (either name works; if both "
       "are given they must agree). pybroker defaults to 0; Kafka requires it."),
    _k("broker.id", _I, 0, at_least(0), _HIGH,
       "The ZooKeeper-era name of node.id, kept so older configuration files work."),
    _k("process.roles", _LS, (), ListOf(("broker", "controller"), unique=True), _HIGH,
       "KRaft roles of this node. Accepted so Kafka's files load; pybroker is always a broker "
       "and never runs a KRaft controller."),
    _k("cluster.id", _S, None, None, _LOW,
       "A fixed cluster id to use instead of a generated one. Kafka keeps the id in "
       "meta.properties beside the data rather than in this file."),
    _k("broker.rack", _S, None, None, _MEDIUM,
       "Rack or zone label of this broker, reported to clients for rack-aware placement."),
    _k("zookeeper.connect", _S, None, None, _HIGH,
       "ZooKeeper connection string, host:port[,host:port...][/chroot]. Unset: a single broker "
       "keeps its metadata in local files. Set: several brokers coordinate through ZooKeeper."),
    _k("zookeeper.connection.timeout.ms", _I, None, None, _HIGH,
       "How long to wait for ZooKeeper at start. Unset: zookeeper.session.timeout.ms."),
    _k("zookeeper.session.timeout.ms", _I, 18000, None, _HIGH,
       "ZooKeeper session timeout: a broker silent this long loses its registration."),
    _k("controller.quorum.voters", _LS, (), None, _HIGH,
       "KRaft controller voters. Accepted for compatibility; unused."),
    _k("controller.quorum.bootstrap.servers", _LS, (), None, _HIGH,
       "KRaft controller bootstrap addresses. Accepted for compatibility; unused."),
    _k("controller.listener.names", _S, None, None, _HIGH,
       "Listener names used by KRaft controllers. pybroker leaves them out of the addresses it "
       "advertises to clients."),
    # --- network --------------------------------------------------------------------------------
    _k("listeners", _LS, ("PLAINTEXT://127.0.0.1:9092",), NonEmptyUniqueList(), _HIGH,
       "Where to accept connections: comma-separated NAME://host:port. An empty host binds all "
       "interfaces and port 0 picks a free port. pybroker defaults to 127.0.0.1 (Kafka binds "
       "all interfaces) so a new broker is not exposed to the network."),
    _k("advertised.listeners", _LS, None, NonEmptyUniqueList(), _HIGH,
       "Addresses handed to clients in Metadata when they differ from the bound ones (NAT, "
       "containers). Unset: listeners. 0.0.0.0 is refused: no client can connect to it."),
    _k("listener.security.protocol.map", _S,
       "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT", None, _LOW,
       "Security protocol of each listener name, as NAME:PROTOCOL pairs."),
    _k("inter.broker.listener.name", _S, None, None, _MEDIUM,
       "Listener brokers use to reach each other; must be an advertised listener. Only one of "
       "this and security.inter.broker.protocol may be set."),
    _k("security.inter.broker.protocol", _S, "PLAINTEXT", OneOf(SECURITY_PROTOCOLS), _MEDIUM,
       "Protocol brokers use to reach each other, when inter.broker.listener.name is unset."),
    _k("num.network.threads", _I, 3, at_least(1), _HIGH,
       "Kafka's network thread count. Accepted; pybroker serves each connection as a task."),
    _k("num.io.threads", _I, 8, at_least(1), _HIGH,
       "Kafka's request handler thread count. Accepted; unused."),
    _k("background.threads", _I, 10, at_least(1), _HIGH,
       "Kafka's background thread count. Accepted; unused."),
    # Kafka's default for both is 102400. pybroker's is -1: fixed 100 KB buffers cost 20-30 %
    # of large-record produce and consume throughput here against Linux's autotuning (more
    # partial writes, each a wait on the event loop). A configured value is applied as Kafka
    # applies it (Kafka's own server.properties sets 102400).
    _k("socket.send.buffer.bytes", _I, -1, None, _HIGH,
       "SO_SNDBUF of client connections; -1 (pybroker's default; Kafka's is 102400) keeps "
       "the operating system's autotuning."),
    _k("socket.receive.buffer.bytes", _I, -1, None, _HIGH,
       "SO_RCVBUF of client connections, set on the listening socket; -1 (pybroker's "
       "default; Kafka's is 102400) keeps the operating system's autotuning."),
    _k("socket.request.max.bytes", _I, 104857600, at_least(1), _HIGH,
       "Largest request accepted. A larger frame is refused from its length prefix, before "
       "any of it is buffered."),
    _k("socket.listen.backlog.size", _I, 1024, at_least(1), _MEDIUM,
       "Length of the queue of connections not yet accepted, per listening socket (capped by "
       "net.core.somaxconn). pybroker's default is 1024, Kafka's 50: Kafka accepts on a "
       "thread of its own, pybroker between requests, and 1,000 clients connecting at once "
       "overflowed a queue of 50 (each dropped SYN costs its client a 1 s retransmit)."),
    _k("connections.max.idle.ms", _L, 600000, None, _MEDIUM,
       "Close a client connection that has sent nothing for this long."),
    _k("max.connections", _I, INT32_MAX, at_least(0), _MEDIUM,
       "Most client connections open at once; new ones wait beyond it."),
    _k("max.connections.per.ip", _I, INT32_MAX, at_least(0), _MEDIUM,
       "Most client connections open at once from one address."),
    _k("queued.max.requests", _I, 500, at_least(1), _HIGH,
       "Kafka's request queue bound. Accepted; pybroker handles one request per connection at "
       "a time, so connections are their own back-pressure."),
    # --- logs -----------------------------------------------------------------------------------
    _k("num.partitions", _I, 1, at_least(1), _MEDIUM,
       "Partitions of a topic created without an explicit count (auto-created, or -1)."),
    _k("log.dir", _LS, ("/tmp/kafka-logs",), NonEmptyUniqueList(), _HIGH,
       "Data directory, used only when log.dirs is unset."),
    _k("log.dirs", _LS, None, NonEmptyUniqueList(), _HIGH,
       "Comma-separated data directories, partitions spread over them. Wins over log.dir."),
    _k("log.segment.bytes", _I, 1073741824, at_least(14), _HIGH,
       "Start a new segment file when the active one would grow past this size."),
    _k("log.roll.ms", _L, None, at_least(1), _HIGH,
       "Start a new segment once the active one is this old, full or not. Unset: "
       "log.roll.hours."),
    _k("log.roll.hours", _I, 168, at_least(1), _HIGH,
       "log.roll.ms in hours; used when log.roll.ms is unset."),
    _k("log.roll.jitter.ms", _L, None, at_least(0), _HIGH,
       "Random time taken off the roll age so that partitions do not all roll together. "
       "Unset: log.roll.jitter.hours."),
    _k("log.roll.jitter.hours", _I, 0, at_least(0), _HIGH,
       "log.roll.jitter.ms in hours; used when log.roll.jitter.ms is unset."),
    _k("log.retention.ms", _L, None, None, _HIGH,
       "Delete segments whose newest record is older than this; -1 (any negative) keeps data "
       "forever. Wins over log.retention.minutes and log.retention.hours."),
    _k("log.retention.minutes", _I, None, None, _HIGH,
       "Retention in minutes; used when log.retention.ms is unset. Wins over hours."),
    _k("log.retention.hours", _I, 168, None, _HIGH,
       "Retention in hours; used when neither log.retention.ms nor .minutes is set."),
    _k("log.retention.bytes", _L, -1, None, _HIGH,
       "Delete the oldest segments while a partition is larger than this; -1: no size limit."),
    _k("log.retention.check.interval.ms", _L, 300000, at_least(1), _MEDIUM,
       "How often the broker looks for segments that retention allows it to delete."),
    _k("log.cleanup.policy", _LS, ("delete",), ListOf(CLEANUP_POLICIES), _MEDIUM,
       "What happens to old segments: delete them, compact them (keep the newest record of "
       "each key), or both (compact,delete)."),
    _k("log.index.size.max.bytes", _I, 10485760, at_least(4), _MEDIUM,
       "Size each offset index file is preallocated to; a segment rolls when its index is full."),
    _k("log.index.interval.bytes", _I, 4096, at_least(0), _MEDIUM,
       "Bytes of log between two entries of the sparse offset and time indexes."),
    _k("log.flush.interval.messages", _L, INT64_MAX, at_least(1), _HIGH,
       "fsync a partition after this many appended messages. Default: never by count."),
    _k("log.flush.interval.ms", _L, None, at_least(0), _HIGH,
       "fsync a partition once its oldest unflushed write is this old. Unset: "
       "log.flush.scheduler.interval.ms."),
    _k("log.flush.scheduler.interval.ms", _L, INT64_MAX, at_least(0), _HIGH,
       "How often the flusher looks for partitions due a flush; also log.flush.interval.ms's "
       "fallback."),
    _k("log.flush.offset.checkpoint.interval.ms", _I, 60000, at_least(0), _HIGH,
       "How often each partition's recovery point (last flushed offset) is checkpointed."),
    _k("log.flush.start.offset.checkpoint.interval.ms", _I, 60000, at_least(0), _HIGH,
       "How often each partition's log start offset is checkpointed."),
    _k("log.segment.delete.delay.ms", _L, 60000, at_least(0), _HIGH,
       "Time between a segment leaving the log and its files being deleted, so that reads "
       "already under way can finish."),
    _k("log.preallocate", _B, False, None, _MEDIUM,
       "Kafka creates segment files at their full size up front (for Windows file systems). "
       "Accepted; pybroker's segment files grow as they are written."),
    _k("num.recovery.threads.per.data.dir", _I, 1, at_least(1), _HIGH,
       "Kafka's log recovery thread count. Accepted; unused."),
    _k("log.message.timestamp.type", _S, "CreateTime", OneOf(TIMESTAMP_TYPES), _MEDIUM,
       "Record timestamps kept: the producer's (CreateTime) or the broker's clock at append "
       "(LogAppendTime)."),
    _k("log.message.timestamp.before.max.ms", _L, INT64_MAX, at_least(0), _MEDIUM,
       "With CreateTime, refuse a batch whose timestamp is further than this in the past."),
    _k("log.message.timestamp.after.max.ms", _L, INT64_MAX, at_least(0), _MEDIUM,
       "With CreateTime, refuse a batch whose timestamp is further than this in the future."),
    _k("log.message.downconversion.enable", _B, True, None, _LOW,
       "Whether a fetch by an old client (message format v0/v1) may be served by converting "
       "batches down to its format. Accepted; unused: Fetch is served from v4, whose clients "
       "read magic-2 batches, so nothing is ever converted (as in Kafka 4)."),
    _k("auto.create.topics.enable", _B, True, None, _HIGH,
       "Create a topic with default settings when a Metadata request that allows it names an "
       "unknown topic."),
    _k("delete.topic.enable", _B, True, None, _HIGH,
       "Allow DeleteTopics; when false it fails with TOPIC_DELETION_DISABLED."),
    _k("min.insync.replicas", _I, 1, at_least(1), _HIGH,
       "With acks=all, how many in-sync replicas must hold a write before it is acknowledged."),
    _k("compression.type", _S, "producer", OneOf(COMPRESSION_TYPES), _HIGH,
       "Compression kept on disk: producer keeps the producer's; a codec name recompresses; "
       "uncompressed stores plain records."),
    _k("message.max.bytes", _I, 1048588, at_least(0), _HIGH,
       "Largest record batch accepted, after compression."),
    # --- log cleaner (compaction) ---------------------------------------------------------------
    _k("log.cleaner.enable", _B, True, None, _MEDIUM,
       "Run the log cleaner, which compacts topics whose cleanup.policy includes compact."),
    _k("log.cleaner.threads", _I, 1, at_least(0), _MEDIUM,
       "Number of logs cleaned at the same time."),
    _k("log.cleaner.backoff.ms", _L, 15000, at_least(0), _MEDIUM,
       "How long the cleaner sleeps when no log needs cleaning."),
    _k("log.cleaner.dedupe.buffer.size", _L, 134217728, None, _MEDIUM,
       "Memory for the key → offset map built while cleaning, over all cleaner threads."),
    _k("log.cleaner.io.buffer.size", _I, 524288, at_least(0), _MEDIUM,
       "Read and write buffer memory of the cleaner, over all cleaner threads."),
    _k("log.cleaner.delete.retention.ms", _L, 86400000, at_least(0), _MEDIUM,
       "How long delete markers (tombstones) stay in a compacted log, so that a consumer "
       "catching up still sees the deletion."),
    _k("log.cleaner.min.cleanable.ratio", _D, 0.5, between(0, 1), _MEDIUM,
       "Compact a log only when at least this fraction of it has not been compacted yet."),
    _k("log.cleaner.min.compaction.lag.ms", _L, 0, at_least(0), _MEDIUM,
       "A record stays uncompacted at least this long."),
    _k("log.cleaner.max.compaction.lag.ms", _L, INT64_MAX, at_least(1), _MEDIUM,
       "A record becomes eligible for compaction at the latest after this long."),
    # --- replication ----------------------------------------------------------------------------
    _k("default.replication.factor", _I, 1, at_least(1), _MEDIUM,
       "Replicas of a topic created without an explicit factor (auto-created, or -1)."),
    _k("replica.fetch.max.bytes", _I, 1048576, at_least(0), _MEDIUM,
       "Bytes a follower asks for per partition in one fetch (a larger first batch still "
       "comes through)."),
    _k("replica.fetch.wait.max.ms", _I, 500, None, _MEDIUM,
       "How long a follower's fetch waits at the leader for new data."),
    _k("replica.fetch.min.bytes", _I, 1, None, _MEDIUM,
       "Bytes a follower's fetch waits for before returning early."),
    _k("replica.lag.time.max.ms", _L, 30000, None, _HIGH,
       "A follower that has not caught up within this long leaves the in-sync replicas."),
    _k("replica.socket.timeout.ms", _I, 30000, None, _HIGH,
       "Network timeout of a follower's requests to the leader."),
    _k("replica.high.watermark.checkpoint.interval.ms", _L, 5000, None, _HIGH,
       "How often high watermarks are checkpointed to disk."),
    _k("num.replica.fetchers", _I, 1, None, _HIGH,
       "Fetcher tasks per source broker used by followers."),
    _k("unclean.leader.election.enable", _B, False, None, _HIGH,
       "Allow a replica outside the in-sync set to become leader, losing acknowledged writes, "
       "rather than leave a partition offline."),
    _k("auto.leader.rebalance.enable", _B, True, None, _HIGH,
       "Move leadership back to preferred replicas in the background."),
    _k("fetch.max.bytes", _I, 57671680, at_least(1024), _MEDIUM,
       "Upper bound on one Fetch response, whatever the client asks for."),
    # --- consumer groups and committed offsets --------------------------------------------------
    _k("group.initial.rebalance.delay.ms", _I, 3000, None, _MEDIUM,
       "How long a new group waits for more members before its first rebalance."),
    _k("group.min.session.timeout.ms", _I, 6000, None, _MEDIUM,
       "Shortest session timeout a group member may ask for."),
    _k("group.max.session.timeout.ms", _I, 1800000, None, _MEDIUM,
       "Longest session timeout a group member may ask for."),
    _k("group.max.size", _I, INT32_MAX, at_least(1), _MEDIUM,
       "Most members one consumer group may have."),
    _k("offsets.topic.num.partitions", _I, 50, at_least(1), _HIGH,
       "Partitions of __consumer_offsets; fixed once the topic exists."),
    _k("offsets.topic.replication.factor", _SH, 3, at_least(1), _HIGH,
       "Replicas of __consumer_offsets. The topic is not created until this many brokers "
       "exist, so a single broker needs 1."),
    _k("offsets.topic.segment.bytes", _I, 104857600, at_least(1), _HIGH,
       "Segment size of __consumer_offsets, kept small so it compacts and loads fast."),
    _k("offsets.retention.minutes", _I, 10080, at_least(1), _HIGH,
       "How long committed offsets of an empty group (or an unsubscribed topic) are kept."),
    _k("offsets.retention.check.interval.ms", _L, 600000, at_least(1), _HIGH,
       "How often expired committed offsets are looked for."),
    _k("offsets.commit.timeout.ms", _I, 5000, at_least(1), _HIGH,
       "How long an offset commit may wait for __consumer_offsets replicas."),
    _k("offset.metadata.max.bytes", _I, 4096, None, _HIGH,
       "Largest metadata string accepted with a committed offset."),
    # --- transactions and producer state --------------------------------------------------------
    _k("transaction.state.log.num.partitions", _I, 50, at_least(1), _HIGH,
       "Partitions of __transaction_state; fixed once the topic exists."),
    _k("transaction.state.log.replication.factor", _SH, 3, at_least(1), _HIGH,
       "Replicas of __transaction_state; a single broker needs 1."),
    _k("transaction.state.log.min.isr", _I, 2, at_least(1), _HIGH,
       "min.insync.replicas of __transaction_state; a single broker needs 1."),
    _k("transaction.state.log.segment.bytes", _I, 104857600, at_least(1), _HIGH,
       "Segment size of __transaction_state."),
    _k("transactional.id.expiration.ms", _I, 604800000, at_least(1), _HIGH,
       "Forget a transactional id that has not been used for this long."),
    _k("transaction.max.timeout.ms", _I, 900000, at_least(1), _HIGH,
       "Longest transaction timeout a producer may ask for."),
    _k("transaction.abort.timed.out.transaction.cleanup.interval.ms", _I, 10000, at_least(1),
       _LOW, "How often timed-out transactions are looked for and aborted."),
    _k("producer.id.expiration.ms", _I, 86400000, at_least(1), _LOW,
       "Forget an idempotent producer's sequence state after this long without writes."),
    _k("share.coordinator.state.topic.replication.factor", _SH, 3, at_least(1), _LOW,
       "Kafka 4 share groups. Accepted so Kafka 4's server.properties loads; unused."),
    _k("share.coordinator.state.topic.min.isr", _SH, 2, at_least(1), _LOW,
       "Kafka 4 share groups. Accepted so Kafka 4's server.properties loads; unused."),
)

BROKER_CONFIG_DEFS: Mapping[str, ConfigKey] = MappingProxyType(
    {key.name: key for key in BROKER_CONFIG_KEYS})

# Topic config → the broker keys that supply its default, first set wins, with the factor that
# turns the broker unit into the topic's (hours → ms). Kafka's ServerTopicConfigSynonyms.
ALL_TOPIC_CONFIG_SYNONYMS: Mapping[str, tuple[tuple[str, int], ...]] = MappingProxyType({
    "cleanup.policy": (("log.cleanup.policy", 1),),
    "compression.type": (("compression.type", 1),),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms", 1),),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms", 1),),
    "flush.messages": (("log.flush.interval.messages", 1),),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
    "index.interval.bytes": (("log.index.interval.bytes", 1),),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms", 1),),
    "max.message.bytes": (("message.max.bytes", 1),),
    "message.downconversion.enable": (("log.message.downconversion.enable", 1),),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms", 1),),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms", 1),),
    "message.timestamp.type": (("log.message.timestamp.type", 1),),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio", 1),),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms", 1),),
    "min.insync.replicas": (("min.insync.replicas", 1),),
    "preallocate": (("log.preallocate", 1),),
    "retention.bytes": (("log.retention.bytes", 1),),
    "retention.ms": (("log.retention.ms", 1), ("log.retention.minutes", _MINUTE_MS),
                     ("log.retention.hours", _HOUR_MS)),
    "segment.bytes": (("log.segment.bytes", 1),),
    "segment.index.bytes": (("log.index.size.max.bytes", 1),),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOUR_MS)),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", _HOUR_MS)),
    "unclean.leader.election.enable": (("unclean.leader.election.enable", 1),),
})

# Broker keys that stand for one another in DescribeConfigs (Kafka's
# DynamicBrokerConfig.brokerConfigSynonyms). Note the flush pair is one-way, as in Kafka.
_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
BROKER_SYNONYM_GROUPS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    **{name: group for group in _GROUPS for name in group},
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
})


class Listener(NamedTuple):
    """One `NAME://host:port` endpoint. An empty host means every interface."""

    name: str
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


_LISTENER = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")

T = TypeVar("T")


class _Key(Generic[T]):
    """A typed, read-only attribute of BrokerConfig backed by one key's parsed value."""

    def __init__(self, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> _Key[T]: ...
    @overload
    def __get__(self, obj: BrokerConfig, owner: type) -> T: ...
    def __get__(self, obj: BrokerConfig | None, owner: type) -> T | _Key[T]:
        if obj is None:
            return self
        return cast(T, obj[self.name])


class BrokerConfig(Mapping[str, object]):
    """A broker's parsed, validated configuration; read-only.

    As a mapping it gives each known key's own parsed value (`config["log.retention.ms"]` is
    None when unset). The attributes give what the broker should act on, with Kafka's
    precedence applied (`config.log_retention_ms` follows ms → minutes → hours). Raises
    ConfigError on the first invalid value; unknown keys only add to `warnings`.
    """

    __slots__ = ("_values", "originals", "explicit", "warnings", "listeners",
                 "advertised_listeners", "listener_security_protocol_map", "log_dirs",
                 "inter_broker_listener_name", "controller_listener_names", "_frozen")

    def __init__(self, props: Mapping[str, str]) -> None:
        values: dict[str, object] = {}
        for key in BROKER_CONFIG_KEYS:
            values[key.name] = key.parse(props[key.name]) if key.name in props else key.default
        warnings = tuple(_unknown_key_warning(name) for name in props
                         if name not in BROKER_CONFIG_DEFS)
        for message in warnings:
            logger.warning("%s", message)
        self._values = values
        self.originals: Mapping[str, str] = MappingProxyType(dict(props))
        self.explicit: frozenset[str] = frozenset(props)
        self.warnings: tuple[str, ...] = warnings
        self._resolve_node_id()
        self.log_dirs: tuple[str, ...] = cast(
            "tuple[str, ...]", values["log.dirs"] if values["log.dirs"] is not None
            else values["log.dir"])
        self._resolve_listeners()
        self._frozen = True

    def __setattr__(self, name: str, value: object) -> None:
        if getattr(self, "_frozen", False):
            raise AttributeError("BrokerConfig is read-only")
        object.__setattr__(self, name, value)

    # Mapping protocol: known keys only; unknown ones are in `originals`.
    def __getitem__(self, name: str) -> object:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        given = ", ".join(f"{k}={v!r}" for k, v in self.originals.items())
        return f"BrokerConfig({given})"

    def source(self, name: str) -> str:
        """`STATIC_BROKER_CONFIG` when set in the file or overrides, else `DEFAULT_CONFIG`."""
        if name not in self._values and name not in self.originals:
            raise KeyError(name)
        return ("STATIC_BROKER_CONFIG" if name in self.explicit else "DEFAULT_CONFIG")

    def topic_default(self, topic_config: str) -> object:
        """The value a topic gets for `topic_config` when it has no override of its own.

        Walks Kafka's synonym chain (e.g. log.retention.ms, .minutes, .hours) and returns the
        first value present, converted to the topic's unit; None for a topic config with no
        broker-level synonym.
        """
        for broker_name, factor in ALL_TOPIC_CONFIG_SYNONYMS.get(topic_config, ()):
            value = self._values[broker_name]
            if value is None:
                continue
            if factor != 1:
                value = cast(int, value) * factor
            if topic_config == "retention.ms" and cast(int, value) < 0:
                value = -1  # Kafka treats any negative retention as "forever"
            return value
        return None

    # --- typed attributes: the keys the rest of the broker reads ------------------------------
    node_id = _Key[int]("node.id")
    broker_id = _Key[int]("broker.id")
    process_roles = _Key["tuple[str, ...]"]("process.roles")
    cluster_id = _Key["str | None"]("cluster.id")
    broker_rack = _Key["str | None"]("broker.rack")
    zookeeper_connect = _Key["str | None"]("zookeeper.connect")
    zookeeper_session_timeout_ms = _Key[int]("zookeeper.session.timeout.ms")
    socket_send_buffer_bytes = _Key[int]("socket.send.buffer.bytes")
    socket_receive_buffer_bytes = _Key[int]("socket.receive.buffer.bytes")
    socket_request_max_bytes = _Key[int]("socket.request.max.bytes")
    socket_listen_backlog_size = _Key[int]("socket.listen.backlog.size")
    connections_max_idle_ms = _Key[int]("connections.max.idle.ms")
    max_connections = _Key[int]("max.connections")
    max_connections_per_ip = _Key[int]("max.connections.per.ip")
    num_partitions = _Key[int]("num.partitions")
    default_replication_factor = _Key[int]("default.replication.factor")
    auto_create_topics_enable = _Key[bool]("auto.create.topics.enable")
    delete_topic_enable = _Key[bool]("delete.topic.enable")
    log_segment_bytes = _Key[int]("log.segment.bytes")
    log_retention_bytes = _Key[int]("log.retention.bytes")
    log_retention_check_interval_ms = _Key[int]("log.retention.check.interval.ms")
    log_index_interval_bytes = _Key[int]("log.index.interval.bytes")
    log_index_size_max_bytes = _Key[int]("log.index.size.max.bytes")
    log_flush_interval_messages = _Key[int]("log.flush.interval.messages")
    log_flush_scheduler_interval_ms = _Key[int]("log.flush.scheduler.interval.ms")
    log_flush_offset_checkpoint_interval_ms = _Key[int]("log.flush.offset.checkpoint.interval.ms")
    log_flush_start_offset_checkpoint_interval_ms = _Key[int](
        "log.flush.start.offset.checkpoint.interval.ms")
    log_segment_delete_delay_ms = _Key[int]("log.segment.delete.delay.ms")
    log_message_timestamp_type = _Key[str]("log.message.timestamp.type")
    log_cleaner_enable = _Key[bool]("log.cleaner.enable")
    log_cleaner_threads = _Key[int]("log.cleaner.threads")
    log_cleaner_backoff_ms = _Key[int]("log.cleaner.backoff.ms")
    log_cleaner_delete_retention_ms = _Key[int]("log.cleaner.delete.retention.ms")
    log_cleaner_min_cleanable_ratio = _Key[float]("log.cleaner.min.cleanable.ratio")
    log_cleaner_min_compaction_lag_ms = _Key[int]("log.cleaner.min.compaction.lag.ms")
    message_max_bytes = _Key[int]("message.max.bytes")
    compression_type = _Key[str]("compression.type")
    min_insync_replicas = _Key[int]("min.insync.replicas")
    unclean_leader_election_enable = _Key[bool]("unclean.leader.election.enable")
    replica_fetch_max_bytes = _Key[int]("replica.fetch.max.bytes")
    replica_lag_time_max_ms = _Key[int]("replica.lag.time.max.ms")
    fetch_max_bytes = _Key[int]("fetch.max.bytes")
    group_initial_rebalance_delay_ms = _Key[int]("group.initial.rebalance.delay.ms")
    group_min_session_timeout_ms = _Key[int]("group.min.session.timeout.ms")
    group_max_session_timeout_ms = _Key[int]("group.max.session.timeout.ms")
    group_max_size = _Key[int]("group.max.size")
    offsets_topic_num_partitions = _Key[int]("offsets.topic.num.partitions")
    offsets_topic_replication_factor = _Key[int]("offsets.topic.replication.factor")
    offsets_topic_segment_bytes = _Key[int]("offsets.topic.segment.bytes")
    offsets_retention_minutes = _Key[int]("offsets.retention.minutes")
    offsets_retention_check_interval_ms = _Key[int]("offsets.retention.check.interval.ms")
    offsets_commit_timeout_ms = _Key[int]("offsets.commit.timeout.ms")
    offset_metadata_max_bytes = _Key[int]("offset.metadata.max.bytes")
    transaction_state_log_num_partitions = _Key[int]("transaction.state.log.num.partitions")
    transaction_state_log_replication_factor = _Key[int](
        "transaction.state.log.replication.factor")
    transaction_state_log_min_isr = _Key[int]("transaction.state.log.min.isr")
    transaction_state_log_segment_bytes = _Key[int]("transaction.state.log.segment.bytes")
    transactional_id_expiration_ms = _Key[int]("transactional.id.expiration.ms")
    transaction_max_timeout_ms = _Key[int]("transaction.max.timeout.ms")
    producer_id_expiration_ms = _Key[int]("producer.id.expiration.ms")

    # --- values with Kafka's precedence applied -----------------------------------------------
    @property
    def log_cleanup_policy(self) -> frozenset[str]:
        return frozenset(cast("tuple[str, ...]", self._values["log.cleanup.policy"]))

    @property
    def log_retention_ms(self) -> int:
        """log.retention.ms, else .minutes, else .hours, in ms; -1 means keep forever."""
        return cast(int, self.topic_default("retention.ms"))

    @property
    def log_roll_ms(self) -> int:
        return cast(int, self.topic_default("segment.ms"))

    @property
    def log_roll_jitter_ms(self) -> int:
        return cast(int, self.topic_default("segment.jitter.ms"))

    @property
    def log_flush_interval_ms(self) -> int:
        """log.flush.interval.ms, else log.flush.scheduler.interval.ms."""
        return cast(int, self.topic_default("flush.ms"))

    @property
    def broker_listeners(self) -> tuple[Listener, ...]:
        """The listeners to serve clients on: all of `listeners` but KRaft controller ones."""
        return tuple(item for item in self.listeners
                     if item.name not in self.controller_listener_names)

    # --- cross-key rules ------------------------------------------------------------------------
    def _resolve_node_id(self) -> None:
        """node.id and broker.id are one setting under two names; either may be given."""
        values = self._values
        if "node.id" in self.explicit and "broker.id" in self.explicit:
            if values["node.id"] != values["broker.id"]:
                raise ConfigError("broker.id", values["broker.id"],
                                  f"must equal node.id ({values['node.id']}) when both are set")
        elif "broker.id" in self.explicit:
            values["node.id"] = values["broker.id"]
        else:
            values["broker.id"] = values["node.id"]

    def _resolve_listeners(self) -> None:
        values = self._values
        names_raw = cast("str | None", values["controller.listener.names"]) or ""
        self.controller_listener_names: tuple[str, ...] = tuple(
            name.strip().upper() for name in names_raw.split(",") if name.strip())
        self.listener_security_protocol_map: Mapping[str, str] = MappingProxyType(
            self._protocol_map())
        listeners = self._parse_listeners("listeners")
        names = [item.name for item in listeners]
        if len(set(names)) != len(names):
            raise ConfigError("listeners", ",".join(cast("tuple[str, ...]", values["listeners"])),
                              "Each listener must have a different name")
        ports = [item.port for item in listeners if item.port != 0]
        if len(set(ports)) != len(ports):
            raise ConfigError("listeners", ",".join(cast("tuple[str, ...]", values["listeners"])),
                              "Each listener must have a different port")
        self.listeners: tuple[Listener, ...] = listeners
        advertised = (self._parse_listeners("advertised.listeners")
                      if values["advertised.listeners"] is not None else listeners)
        raw_advertised = ",".join(item.url for item in advertised)
        for item in advertised:
            if item.name not in names:
                raise ConfigError("advertised.listeners", raw_advertised,
                                  f"Listener {item.name} is not one of the names in listeners")
            if item.host == "0.0.0.0":
                raise ConfigError("advertised.listeners", raw_advertised,
                                  "Cannot advertise the non-routable address 0.0.0.0; "
                                  "set advertised.listeners to a reachable host")
        self.advertised_listeners: tuple[Listener, ...] = tuple(
            item for item in advertised if item.name not in self.controller_listener_names)
        self.inter_broker_listener_name: str = self._inter_broker_listener_name()

    def _protocol_map(self) -> dict[str, str]:
        raw = cast(str, self._values["listener.security.protocol.map"])
        mapping: dict[str, str] = {}
        for entry in (part.strip() for part in raw.split(",") if part.strip()):
            name, _, protocol = entry.partition(":")
            protocol = protocol.strip().upper()
            if not name.strip() or protocol not in SECURITY_PROTOCOLS:
                raise ConfigError("listener.security.protocol.map", raw,
                                  f"Entry '{entry}' is not NAME:PROTOCOL with a protocol among "
                                  f"{', '.join(SECURITY_PROTOCOLS)}")
            mapping[name.strip().upper()] = protocol
        if "listener.security.protocol.map" not in self.explicit:
            for name in self.controller_listener_names:  # Kafka's KRaft convenience
                mapping.setdefault(name, "PLAINTEXT")
        return mapping

    def _parse_listeners(self, key: str) -> tuple[Listener, ...]:
        result = []
        for text in cast("tuple[str, ...]", self._values[key]):
            match = _LISTENER.fullmatch(text)
            if match is None:
                raise ConfigError(key, text, "Expected NAME://host:port")
            name, host, port = match.group(1).upper(), match.group(2), int(match.group(3))
            if not 0 <= port <= 65535:
                raise ConfigError(key, text, "Port must be between 0 and 65535")
            if name not in self.listener_security_protocol_map:
                raise ConfigError(key, text, f"No security protocol defined for listener {name} "
                                             "(see listener.security.protocol.map)")
            result.append(Listener(name, host, port))
        return tuple(result)

    def _inter_broker_listener_name(self) -> str:
        if "inter.broker.listener.name" not in self.explicit:
            return cast(str, self._values["security.inter.broker.protocol"])
        name = cast(str, self._values["inter.broker.listener.name"]).upper()
        if "security.inter.broker.protocol" in self.explicit:
            raise ConfigError("inter.broker.listener.name", name,
                              "Only one of inter.broker.listener.name and "
                              "security.inter.broker.protocol may be set")
        if name not in {item.name for item in self.advertised_listeners}:
            raise ConfigError("inter.broker.listener.name", name,
                              "Must be the name of one of the advertised listeners")
        return name


def _unknown_key_warning(name: str) -> str:
    hint = ""
    chain = ALL_TOPIC_CONFIG_SYNONYMS.get(name)
    if chain and chain[0][0] != name:
        hint = f" ({name} is a topic config; the broker-wide default is {chain[0][0]})"
    return f"Unknown configuration '{name}' was supplied and is ignored{hint}"


def load_broker_config(path: str | os.PathLike[str] | None = None,
                       overrides: Mapping[str, object] | None = None) -> BrokerConfig:
    """Read `path` (if any), apply `overrides` on top, parse and validate.

    Overrides are what `--override key=value` and embedding code pass; they count as static
    configuration, like the file. Raises OSError if the file cannot be read and ConfigError for
    the first invalid value.
    """
    props: dict[str, str] = dict(load_properties(path)) if path is not None else {}
    for name, value in (overrides or {}).items():
        props[name] = (("true" if value else "false") if isinstance(value, bool) else str(value))
    return BrokerConfig(props)


def describe_broker_config(broker: BrokerConfig) -> Iterator[ConfigEntry]:
    """DescribeConfigs rows for resource type BROKER, in name order.

    Every entry is read-only: pybroker has no dynamic broker configuration, so unlike Kafka it
    never offers a key as alterable. Keys the broker does not know but was given are listed too
    (type UNKNOWN), as Kafka lists them.
    """
    static = dict(broker.originals)
    defaults = {key.name: to_config_string(key.default) for key in BROKER_CONFIG_KEYS}
    for name in sorted(set(broker) | set(broker.originals)):
        key = BROKER_CONFIG_DEFS.get(name)
        group = BROKER_SYNONYM_GROUPS.get(name, (name,))
        synonyms = tuple(kafka_synonym_order(name, group, static, defaults))
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        value = to_config_string(broker[name]) if key is not None else static[name]
        yield ConfigEntry(
            name=name, value=value, source=source,
            is_default=source is ConfigSource.DEFAULT_CONFIG, read_only=True,
            is_sensitive=key.sensitive if key is not None else False, synonyms=synonyms,
            config_type=key.type if key is not None else ConfigType.UNKNOWN,
            documentation=key.doc if key is not None else "")
