"""Broker configuration: Kafka's `server.properties` keys, defaults, validation and precedence.

One module on purpose (about 620 lines): `BrokerConfig`, with a typed field per key the code
reads, and Kafka's precedence and cross-key rules.

The keys themselves (names, types, defaults, validators, docs) are declared once in
`broker_keys.BROKER_CONFIG_KEYS`; this module turns a file's properties into a `BrokerConfig`
with Kafka's precedence and cross-key rules, and describes it for DescribeConfigs.

Dynamic broker configs (KIP-226) are two more layers over the file's (`BrokerConfig.
with_dynamic`, `config/dynamic.py`): the broker's values are those of the layers stacked, and
DescribeConfigs names the layer each value comes from.

As in Kafka, unknown keys are reported (`BrokerConfig.warnings`, and logged), never fatal: a
typo costs a warning, and files written for another Kafka version still load. No known key is
a silent promise either: each is honoured, inert until a named feature lands (setting it is
reported the same way), not applicable, or deprecated (Kafka 0.8's port and host.name: honoured,
reported the same way), with the reason in its doc (`KeyState`; the table
in docs/CONFIG.md is generated from broker_keys).
"""
from __future__ import annotations

import logging
import os
import re
from types import MappingProxyType
from typing import Generic, Iterator, Mapping, NamedTuple, TypeVar, cast, overload

from pybroker.config.broker_keys import (
    ALL_TOPIC_CONFIG_SYNONYMS, BROKER_CONFIG_DEFS, BROKER_CONFIG_KEYS, BROKER_SYNONYM_GROUPS,
    LISTENER_KEYS, SECURITY_PROTOCOLS,
)
from pybroker.config.definitions import (
    ConfigEntry, ConfigError, ConfigKey, ConfigSource, ConfigSynonym, ConfigType, KeyState,
    kafka_synonym_order, to_config_string,
)
from pybroker.config.dynamic import effective_props, is_dynamic
from pybroker.config.group_bounds import assignor_names, check_group_bounds
from pybroker.config.properties import load_properties
from pybroker.config.sasl import SaslListenerConfig, listener_key, sasl_listener_config

logger = logging.getLogger("pybroker.config")


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

    `dynamic_default` and `dynamic_broker` are the dynamic layers (KIP-226) over `props`:
    `originals` is what the broker runs with, all layers stacked; `static_configs` the file's
    alone. Warnings are logged by the first build only (`quiet` for the rebuilds).
    """

    __slots__ = ("_values", "originals", "explicit", "warnings", "listeners",
                 "advertised_listeners", "listener_security_protocol_map", "log_dirs",
                 "inter_broker_listener_name", "controller_listener_names", "http_listeners",
                 "_listener_values", "sasl_listeners", "static_configs",
                 "dynamic_default_configs", "dynamic_broker_configs", "_frozen")

    def __init__(self, props: Mapping[str, str], *,
                 dynamic_default: Mapping[str, str] | None = None,
                 dynamic_broker: Mapping[str, str] | None = None, quiet: bool = False) -> None:
        static_configs = MappingProxyType(dict(props))
        dynamic_default = MappingProxyType(dict(dynamic_default or {}))
        dynamic_broker = MappingProxyType(dict(dynamic_broker or {}))
        if dynamic_default or dynamic_broker:
            props = effective_props(props, dynamic_default, dynamic_broker)
        values: dict[str, object] = {}
        for key in BROKER_CONFIG_KEYS:
            values[key.name] = key.parse(props[key.name]) if key.name in props else key.default
        # listener.name.<listener>.<key>: parsed as <key>, kept apart per listener.
        listener_values: dict[str, dict[str, object]] = {}
        for name, raw in props.items():
            prefixed = _listener_prefixed(name)
            if prefixed is not None:
                listener, key = prefixed
                listener_values.setdefault(listener, {})[key.name] = key.parse(raw)
        # An INERT key always has its warning: the filter below keeps only those.
        warnings = tuple(_unknown_key_warning(name) if key is None
                         else cast(str, key.inert_warning())
                         for name in props
                         for key in (_key_of(name),)
                         if (key is None and not listener_key(name))
                         or (key is not None and key.state is KeyState.INERT))
        for message in () if quiet else warnings:
            logger.warning("%s", message)
        self._values = values
        self.static_configs: Mapping[str, str] = static_configs
        self.dynamic_default_configs: Mapping[str, str] = dynamic_default
        self.dynamic_broker_configs: Mapping[str, str] = dynamic_broker
        self._listener_values = listener_values
        self.originals: Mapping[str, str] = MappingProxyType(dict(props))
        self.explicit: frozenset[str] = frozenset(props)
        self.warnings: tuple[str, ...] = warnings
        self._resolve_node_id()
        check_group_bounds(values)
        self.log_dirs: tuple[str, ...] = cast(
            "tuple[str, ...]", values["log.dirs"] if values["log.dirs"] is not None
            else values["log.dir"])
        deprecated = self._shadowed_log_dir() + self._legacy_listener_keys()
        for message in () if quiet else deprecated:
            logger.warning("%s", message)
        self.warnings += deprecated
        self._resolve_listeners()
        self.http_listeners: tuple[Listener, ...] = self._parse_http_listeners()
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
        given = ", ".join(f"{k}={'[hidden]' if is_sensitive(k) else repr(v)}"
                          for k, v in self.originals.items())
        return f"BrokerConfig({given})"

    def for_listener(self, listener: str, name: str) -> object:
        """`name`'s value on `listener`: its listener.name.<listener>.<name> override, else
        the broker-wide value (Kafka's per-listener security settings)."""
        own = self._listener_values.get(listener.upper(), {})
        return own[name] if name in own else self._values[name]

    def source(self, name: str) -> str:
        """The layer `name`'s value comes from: `DYNAMIC_BROKER_CONFIG`,
        `DYNAMIC_DEFAULT_BROKER_CONFIG`, `STATIC_BROKER_CONFIG` (the file or overrides), else
        `DEFAULT_CONFIG`."""
        if name not in self._values and name not in self.originals:
            raise KeyError(name)
        for source, layer in self.layers()[:3]:
            if name in layer:
                return source.name
        return "DEFAULT_CONFIG"

    def layers(self) -> tuple[tuple[ConfigSource, Mapping[str, str | None]], ...]:
        """Each layer of the configuration with its DescribeConfigs source, highest first."""
        return ((ConfigSource.DYNAMIC_BROKER_CONFIG, self.dynamic_broker_configs),
                (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, self.dynamic_default_configs),
                (ConfigSource.STATIC_BROKER_CONFIG, self.static_configs),
                (ConfigSource.DEFAULT_CONFIG, _DEFAULTS))

    def with_dynamic(self, default: Mapping[str, str], broker: Mapping[str, str]
                     ) -> BrokerConfig:
        """This broker's configuration with these dynamic layers (replacing any it had);
        ConfigError when the stack does not hold together."""
        return BrokerConfig(self.static_configs, dynamic_default=default, dynamic_broker=broker,
                            quiet=True)

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
    num_cores = _Key[int]("num.cores")
    zookeeper_session_timeout_ms = _Key[int]("zookeeper.session.timeout.ms")
    zookeeper_connection_timeout_ms = _Key["int | None"]("zookeeper.connection.timeout.ms")
    controlled_shutdown_enable = _Key[bool]("controlled.shutdown.enable")
    controlled_shutdown_max_retries = _Key[int]("controlled.shutdown.max.retries")
    controlled_shutdown_retry_backoff_ms = _Key[int]("controlled.shutdown.retry.backoff.ms")
    auto_leader_rebalance_enable = _Key[bool]("auto.leader.rebalance.enable")
    leader_imbalance_per_broker_percentage = _Key[int]("leader.imbalance.per.broker.percentage")
    leader_imbalance_check_interval_seconds = _Key[int]("leader.imbalance.check.interval.seconds")
    authorizer_class_name = _Key[str]("authorizer.class.name")
    super_users = _Key["str | None"]("super.users")
    allow_everyone_if_no_acl_found = _Key[bool]("allow.everyone.if.no.acl.found")
    sasl_mechanism_inter_broker_protocol = _Key[str]("sasl.mechanism.inter.broker.protocol")
    sasl_jaas_config = _Key["str | None"]("sasl.jaas.config")
    http_request_timeout_ms = _Key[int]("http.request.timeout.ms")
    http_status_sample_interval_ms = _Key[int]("http.status.sample.interval.ms")
    socket_send_buffer_bytes = _Key[int]("socket.send.buffer.bytes")
    socket_receive_buffer_bytes = _Key[int]("socket.receive.buffer.bytes")
    socket_request_max_bytes = _Key[int]("socket.request.max.bytes")
    queued_max_request_bytes = _Key[int]("queued.max.request.bytes")
    quota_window_num = _Key[int]("quota.window.num")
    quota_window_size_seconds = _Key[int]("quota.window.size.seconds")
    controller_quota_window_num = _Key[int]("controller.quota.window.num")
    controller_quota_window_size_seconds = _Key[int]("controller.quota.window.size.seconds")
    socket_listen_backlog_size = _Key[int]("socket.listen.backlog.size")
    connections_max_idle_ms = _Key[int]("connections.max.idle.ms")
    max_connections = _Key[int]("max.connections")
    max_connections_per_ip = _Key[int]("max.connections.per.ip")
    log_format = _Key[str]("log.format")
    request_log_enable = _Key[bool]("request.log.enable")
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
    replica_high_watermark_checkpoint_interval_ms = _Key[int](
        "replica.high.watermark.checkpoint.interval.ms")
    log_segment_delete_delay_ms = _Key[int]("log.segment.delete.delay.ms")
    log_message_timestamp_type = _Key[str]("log.message.timestamp.type")
    log_cleaner_enable = _Key[bool]("log.cleaner.enable")
    log_cleaner_threads = _Key[int]("log.cleaner.threads")
    log_cleaner_backoff_ms = _Key[int]("log.cleaner.backoff.ms")
    log_cleaner_dedupe_buffer_size = _Key[int]("log.cleaner.dedupe.buffer.size")
    log_cleaner_io_buffer_size = _Key[int]("log.cleaner.io.buffer.size")
    log_cleaner_delete_retention_ms = _Key[int]("log.cleaner.delete.retention.ms")
    log_cleaner_min_cleanable_ratio = _Key[float]("log.cleaner.min.cleanable.ratio")
    log_cleaner_min_compaction_lag_ms = _Key[int]("log.cleaner.min.compaction.lag.ms")
    message_max_bytes = _Key[int]("message.max.bytes")
    compression_type = _Key[str]("compression.type")
    min_insync_replicas = _Key[int]("min.insync.replicas")
    unclean_leader_election_enable = _Key[bool]("unclean.leader.election.enable")
    replica_fetch_max_bytes = _Key[int]("replica.fetch.max.bytes")
    replica_fetch_wait_max_ms = _Key[int]("replica.fetch.wait.max.ms")
    replica_fetch_min_bytes = _Key[int]("replica.fetch.min.bytes")
    replica_fetch_response_max_bytes = _Key[int]("replica.fetch.response.max.bytes")
    replica_fetch_backoff_ms = _Key[int]("replica.fetch.backoff.ms")
    replica_socket_timeout_ms = _Key[int]("replica.socket.timeout.ms")
    replica_lag_time_max_ms = _Key[int]("replica.lag.time.max.ms")
    leader_replication_throttled_rate = _Key[int]("leader.replication.throttled.rate")
    follower_replication_throttled_rate = _Key[int]("follower.replication.throttled.rate")
    replication_quota_window_num = _Key[int]("replication.quota.window.num")
    replication_quota_window_size_seconds = _Key[int]("replication.quota.window.size.seconds")
    replica_selector_class = _Key["str | None"]("replica.selector.class")
    fetch_max_bytes = _Key[int]("fetch.max.bytes")
    max_incremental_fetch_session_cache_slots = _Key[int](
        "max.incremental.fetch.session.cache.slots")
    group_initial_rebalance_delay_ms = _Key[int]("group.initial.rebalance.delay.ms")
    group_min_session_timeout_ms = _Key[int]("group.min.session.timeout.ms")
    group_max_session_timeout_ms = _Key[int]("group.max.session.timeout.ms")
    group_max_size = _Key[int]("group.max.size")
    group_consumer_session_timeout_ms = _Key[int]("group.consumer.session.timeout.ms")
    group_consumer_heartbeat_interval_ms = _Key[int]("group.consumer.heartbeat.interval.ms")
    group_consumer_min_session_timeout_ms = _Key[int]("group.consumer.min.session.timeout.ms")
    group_consumer_max_session_timeout_ms = _Key[int]("group.consumer.max.session.timeout.ms")
    group_consumer_min_heartbeat_interval_ms = _Key[int](
        "group.consumer.min.heartbeat.interval.ms")
    group_consumer_max_heartbeat_interval_ms = _Key[int](
        "group.consumer.max.heartbeat.interval.ms")
    group_consumer_max_size = _Key[int]("group.consumer.max.size")
    group_consumer_migration_policy = _Key[str]("group.consumer.migration.policy")
    group_share_enable = _Key[bool]("group.share.enable")
    group_share_record_lock_duration_ms = _Key[int]("group.share.record.lock.duration.ms")
    group_share_delivery_count_limit = _Key[int]("group.share.delivery.count.limit")
    group_share_partition_max_record_locks = _Key[int]("group.share.partition.max.record.locks")
    group_share_max_share_sessions = _Key[int]("group.share.max.share.sessions")
    group_share_max_size = _Key[int]("group.share.max.size")
    group_share_session_timeout_ms = _Key[int]("group.share.session.timeout.ms")
    group_share_heartbeat_interval_ms = _Key[int]("group.share.heartbeat.interval.ms")
    group_share_min_session_timeout_ms = _Key[int]("group.share.min.session.timeout.ms")
    group_share_max_session_timeout_ms = _Key[int]("group.share.max.session.timeout.ms")
    group_share_min_heartbeat_interval_ms = _Key[int]("group.share.min.heartbeat.interval.ms")
    group_share_max_heartbeat_interval_ms = _Key[int]("group.share.max.heartbeat.interval.ms")
    group_share_min_record_lock_duration_ms = _Key[int](
        "group.share.min.record.lock.duration.ms")
    group_share_max_record_lock_duration_ms = _Key[int](
        "group.share.max.record.lock.duration.ms")
    share_coordinator_state_topic_num_partitions = _Key[int](
        "share.coordinator.state.topic.num.partitions")
    share_coordinator_state_topic_replication_factor = _Key[int](
        "share.coordinator.state.topic.replication.factor")
    share_coordinator_state_topic_min_isr = _Key[int]("share.coordinator.state.topic.min.isr")
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
    transaction_abort_timed_out_transaction_cleanup_interval_ms = _Key[int](
        "transaction.abort.timed.out.transaction.cleanup.interval.ms")
    producer_id_expiration_ms = _Key[int]("producer.id.expiration.ms")

    # --- values with Kafka's precedence applied -----------------------------------------------
    @property
    def group_consumer_assignors(self) -> tuple[str, ...]:
        """The consumer-group assignors by the names members ask for, the default first."""
        return assignor_names(cast("tuple[str, ...]", self._values["group.consumer.assignors"]))

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

    def _shadowed_log_dir(self) -> tuple[str, ...]:
        """log.dirs wins over log.dir, as in Kafka, which says nothing: a copy of a file that
        sets log.dirs, with log.dir edited as Kafka's quickstart tells, would otherwise share
        the first broker's data directory without a word."""
        if not {"log.dir", "log.dirs"} <= self.explicit:
            return ()
        return (f"Configuration 'log.dir' ({self.originals['log.dir']}) is ignored: log.dirs "
                f"is set and wins ({self.originals['log.dirs']})",)

    def _legacy_listener_keys(self) -> tuple[str, ...]:
        """Kafka 0.8's port, host.name, advertised.host.name and advertised.port, read as
        Kafka 2.x read them: with listeners unset, the one listener is
        PLAINTEXT://host.name:port; with advertised.listeners unset, the PLAINTEXT listener is
        advertised at advertised.host.name:advertised.port (each defaulting to the listener's
        own). Today's key wins when set too. Returns one warning per old key given, naming the
        key to use (Kafka 3.0 removed the old ones: a file relying on them does not load there).
        """
        values, explicit = self._values, self.explicit
        warnings = []
        bind = [name for name in ("port", "host.name") if name in explicit]
        if bind and "listeners" in explicit:
            winner = ",".join(cast("tuple[str, ...]", values["listeners"]))
            warnings += [f"Configuration '{name}' ({self.originals[name]}) is ignored: "
                         f"listeners is set and wins ({winner}); {name} is deprecated"
                         for name in bind]
        elif bind:
            url = Listener("PLAINTEXT", cast(str, values["host.name"]),
                           cast(int, values["port"])).url
            values["listeners"] = (url,)
            warnings += [f"Configuration '{name}' is deprecated: use listeners={url}"
                         for name in bind]
        advertise = [name for name in ("advertised.host.name", "advertised.port")
                     if name in explicit]
        if advertise and "advertised.listeners" in explicit:
            winner = ",".join(cast("tuple[str, ...]", values["advertised.listeners"]))
            warnings += [f"Configuration '{name}' ({self.originals[name]}) is ignored: "
                         f"advertised.listeners is set and wins ({winner}); {name} is "
                         "deprecated" for name in advertise]
        elif advertise:
            plaintext = next((match for match in map(_LISTENER.fullmatch, cast(
                "tuple[str, ...]", values["listeners"])) if match and
                match.group(1).upper() == "PLAINTEXT"), None)
            if plaintext is None:
                raise ConfigError(advertise[0], values[advertise[0]],
                                  "There is no PLAINTEXT listener to advertise")
            host, port = values["advertised.host.name"], values["advertised.port"]
            url = Listener("PLAINTEXT", plaintext.group(2) if host is None else cast(str, host),
                           int(plaintext.group(3)) if port is None else cast(int, port)).url
            values["advertised.listeners"] = (url,)
            warnings += [f"Configuration '{name}' is deprecated: use advertised.listeners={url}"
                         for name in advertise]
        return tuple(warnings)

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
        self._refuse_unserved_listeners()
        self.inter_broker_listener_name: str = self._inter_broker_listener_name()

    def _refuse_unserved_listeners(self) -> None:
        """Refuse the client listeners this broker cannot serve as configured.

        Every security protocol is served: PLAINTEXT, SSL (pybroker/security/tls_context.py),
        SASL_PLAINTEXT and SASL_SSL (pybroker/security/sasl); a SASL listener's settings are resolved
        here (`sasl_listeners`), so what Kafka refuses at start is refused too.
        """
        raw = ",".join(cast("tuple[str, ...]", self._values["listeners"]))
        served = self.broker_listeners
        self.sasl_listeners: dict[str, SaslListenerConfig] = {}
        for item in served:
            protocol = self.listener_security_protocol_map[item.name]
            if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
                raise ConfigError("listeners", raw,
                                  f"Listener {item.name} uses security protocol {protocol}, "
                                  "which Kafka does not have")
        for item in served:
            if self.listener_security_protocol_map[item.name] in ("SASL_PLAINTEXT", "SASL_SSL"):
                self.sasl_listeners[item.name] = sasl_listener_config(
                    self._values, self.originals, item.name)
        if not served:
            raise ConfigError("listeners", raw, "Every listener is a controller listener; "
                                                "clients need one to connect to")

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

    def _parse_http_listeners(self) -> tuple[Listener, ...]:
        """http.listeners as listeners named HTTP; https is refused (no TLS yet), as is a
        port shared with another HTTP listener."""
        raw = cast("tuple[str, ...]", self._values["http.listeners"])
        result = []
        for text in raw:
            match = _LISTENER.fullmatch(text)
            if match is None or match.group(1).lower() != "http":
                raise ConfigError("http.listeners", ",".join(raw),
                                  f"Expected http://host:port, got '{text}'")
            port = int(match.group(3))
            if not 0 <= port <= 65535:
                raise ConfigError("http.listeners", text, "Port must be between 0 and 65535")
            result.append(Listener("HTTP", match.group(2), port))
        ports = [item.port for item in result if item.port != 0]
        if len(set(ports)) != len(ports):
            raise ConfigError("http.listeners", ",".join(raw),
                              "Each HTTP listener must have a different port")
        return tuple(result)

    def _inter_broker_listener_name(self) -> str:
        """Kafka's rule: inter.broker.listener.name, else the listener named after
        security.inter.broker.protocol (PLAINTEXT by default); either must be advertised, or
        the broker does not start — also a single broker whose only listeners are SSL or SASL
        and that names none of them (Kafka 4.1's KafkaConfig refuses it with these words)."""
        advertised = [item.name for item in self.advertised_listeners]
        if "inter.broker.listener.name" in self.explicit:
            key = "inter.broker.listener.name"
            name = cast(str, self._values[key]).upper()
            if "security.inter.broker.protocol" in self.explicit:
                raise ConfigError(key, name, "Only one of inter.broker.listener.name and "
                                             "security.inter.broker.protocol should be set.")
            if name not in self.listener_security_protocol_map:
                raise ConfigError(key, name, (
                    f"Listener with name {name} defined in inter.broker.listener.name not "
                    f"found in listener.security.protocol.map."))
        else:
            key = "security.inter.broker.protocol"
            name = cast(str, self._values[key])
        if name not in advertised:
            raise ConfigError(key, name, (
                "requirement failed: inter.broker.listener.name must be a listener name "
                "defined in advertised.listeners. The valid options based on currently "
                f"configured listeners are {','.join(advertised)}"))
        sasl = self.sasl_listeners.get(name)
        if sasl is not None and key in self.explicit:
            mechanism = cast(str, self._values["sasl.mechanism.inter.broker.protocol"])
            if mechanism not in sasl.mechanisms:
                raise ConfigError("sasl.mechanism.inter.broker.protocol", mechanism,
                                  f"The inter-broker listener {name} is a SASL listener: set "
                                  f"this to one of its enabled mechanisms "
                                  f"({', '.join(sasl.mechanisms)})")
        return name

    @property
    def inter_broker_security_protocol(self) -> str:
        return self.listener_security_protocol_map[self.inter_broker_listener_name]


_LISTENER_PREFIX = re.compile(r"listener\.name\.([^.]+)\.(.+)")


def _listener_prefixed(name: str) -> tuple[str, ConfigKey] | None:
    """(listener in upper case, key) for a listener.name.<listener>.<key> override of a key
    a listener may set for itself; None for any other name."""
    match = _LISTENER_PREFIX.fullmatch(name)
    if match is None or match.group(2) not in LISTENER_KEYS:
        return None
    return match.group(1).upper(), BROKER_CONFIG_DEFS[match.group(2)]


def _key_of(name: str) -> ConfigKey | None:
    """The declared key `name` sets, directly or as a listener's override of it."""
    prefixed = _listener_prefixed(name)
    return prefixed[1] if prefixed is not None else BROKER_CONFIG_DEFS.get(name)


def is_sensitive(name: str) -> bool:
    """Whether `name`'s value must never be shown (a password or private key, or a listener's
    override of one)."""
    key = _key_of(name)
    if key is None:  # listener.name.<l>.<mechanism>.sasl.jaas.config, or a key we do not know
        return name.endswith(("sasl.jaas.config", "password"))
    return key.sensitive or key.type is ConfigType.PASSWORD


def _unknown_key_warning(name: str) -> str:
    hint = ""
    chain = ALL_TOPIC_CONFIG_SYNONYMS.get(name)
    if chain and chain[0][0] != name:
        hint = f" ({name} is a topic config; the broker-wide default is {chain[0][0]})"
    return f"Unknown configuration '{name}' was supplied and is ignored{hint}"


def load_broker_config(path: str | os.PathLike[str] | None = None,
                       overrides: Mapping[str, object] | None = None, *,
                       quiet: bool = False) -> BrokerConfig:
    """Read `path` (if any), apply `overrides` on top, parse and validate; `quiet` logs no
    warnings (a node's worker: its supervisor logged the node's file's once).

    Overrides are what `--override key=value` and embedding code pass; they count as static
    configuration, like the file. Raises OSError if the file cannot be read and ConfigError for
    the first invalid value.
    """
    props: dict[str, str] = dict(load_properties(path)) if path is not None else {}
    for name, value in (overrides or {}).items():
        props[name] = (("true" if value else "false") if isinstance(value, bool) else str(value))
    return BrokerConfig(props, quiet=quiet)


def describe_broker_config(broker: BrokerConfig, *, per_broker: bool = True
                           ) -> Iterator[ConfigEntry]:
    """DescribeConfigs rows for resource type BROKER, in name order.

    `per_broker` (resource name "<id>"): every config, each from the highest layer that sets
    it. Otherwise (resource name "", the cluster default): only the dynamic defaults, each
    with itself as its one synonym, as Kafka 4.1 answers. A key is read-only unless Kafka
    lets it change dynamically. Keys the broker does not know but was given are listed too
    (type UNKNOWN), as Kafka lists them.
    """
    layers = broker.layers()
    if not per_broker:
        layers = layers[1:2]
        names = set(broker.dynamic_default_configs)
    else:
        names = set(broker) | set(broker.originals)
    for name in sorted(names):
        key = BROKER_CONFIG_DEFS.get(name)
        group = BROKER_SYNONYM_GROUPS.get(name, (name,))
        listener = _listener_prefixed(name)
        if listener is not None:  # its base key is its synonym, below it (Kafka's rule)
            group = (name, listener[1].name)
        synonyms = tuple(kafka_synonym_order(name, group, layers))
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        if not per_broker:
            value: str | None = broker.dynamic_default_configs[name]
        elif key is not None:
            value = to_config_string(broker[name])
        else:
            value = broker.originals[name]
        sensitive = is_sensitive(name)
        if sensitive:  # Kafka sends null for a sensitive value, and for its synonyms'
            value = None
            synonyms = tuple(ConfigSynonym(s.name, None, s.source) for s in synonyms)
        declared = _key_of(name)
        yield ConfigEntry(
            name=name, value=value, source=source,
            is_default=source is ConfigSource.DEFAULT_CONFIG, read_only=not is_dynamic(name),
            is_sensitive=sensitive, synonyms=synonyms,
            config_type=declared.type if declared is not None else ConfigType.UNKNOWN,
            documentation=declared.doc if declared is not None else "")


_DEFAULTS: Mapping[str, str | None] = MappingProxyType(
    {key.name: to_config_string(key.default) for key in BROKER_CONFIG_KEYS})
