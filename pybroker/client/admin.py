"""Administrative requests over a KafkaClient: topics, partitions, configs, offsets, records.

One module on purpose (about 540 lines): one short method per admin API; the group and
transaction APIs are mixins already.

Each method speaks one Kafka API (routing it where Kafka wants it: the controller, a
partition's leader, a named broker) and returns plain values. Per-item failures come back in
the result, keyed like the request, as exceptions (`KafkaError`, or `KafkaConnectionError`
when a leader could not be reached), because a tool reports "this topic failed, that one
worked" rather than stopping at the first error; a failure of the whole request raises.
Group administration lives in `group_admin` and transaction administration in
`transaction_admin`; both are mixed in here, so `Admin` is the one object a tool needs.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable, Mapping, TypeVar

import trio

from protocol.api_keys import ApiKey
from protocol.config_resources import ConfigSource, ConfigSynonym, ResourceType
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from pybroker.client.client import REFRESH_CODES, KafkaClient
from pybroker.client.cluster import ZERO_UUID, TopicMetadata, TopicPartition
from pybroker.client.connection import BrokerConnection
from pybroker.client.errors import KafkaConnectionError, KafkaTimeoutError
from pybroker.client.share_group_admin import ShareGroupAdminMixin
from pybroker.client.transaction_admin import TransactionAdminMixin

__all__ = ["Admin", "NewTopic", "ResourceType", "ConfigSource", "ConfigResource",
           "ConfigSynonym", "ConfigEntry", "AlterOpType", "AlterConfigOp", "OffsetSpec",
           "ListOffsetsResult", "PartitionReassignment", "ReplicaInfo", "LogDirDescription"]

V = TypeVar("V")
Outcome = Any  # a value, or the exception that stopped it


@dataclass(frozen=True)
class NewTopic:
    """-1 partitions or replication factor asks for the broker's default."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)
    assignments: Mapping[int, list[int]] | None = None


@dataclass(frozen=True)
class ConfigResource:
    type: ResourceType
    name: str


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool = False
    sensitive: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()

    @property
    def is_default(self) -> bool:
        return self.source == ConfigSource.DEFAULT_CONFIG


class AlterOpType(enum.IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True)
class AlterConfigOp:
    name: str
    value: str | None
    op: AlterOpType = AlterOpType.SET


class OffsetSpec:
    """ListOffsets' special timestamps; any other value is a time in ms."""

    LATEST = LATEST_TIMESTAMP
    EARLIEST = EARLIEST_TIMESTAMP
    MAX_TIMESTAMP = MAX_TIMESTAMP


@dataclass(frozen=True)
class ListOffsetsResult:
    offset: int
    timestamp: int
    leader_epoch: int


@dataclass(frozen=True)
class PartitionReassignment:
    """A reassignment in progress (KIP-455): the whole replica set while it moves, the
    replicas being added (target, not yet in sync) and those to remove once they are."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@dataclass(frozen=True)
class ReplicaInfo:
    """One replica in a log dir, as DescribeLogDirs reports it: its size in bytes, how far it
    is behind (a future replica's lag behind the current one), and whether it is a future one
    (being moved between log dirs)."""

    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True)
class LogDirDescription:
    """One log dir of one broker: its error (None when readable) and its replicas."""

    error: KafkaError | None
    replicas: dict[TopicPartition, ReplicaInfo]
    total_bytes: int = -1
    usable_bytes: int = -1


class Admin(ShareGroupAdminMixin, TransactionAdminMixin):
    """Admin operations; `timeout` (seconds) bounds each one, retries included."""

    def __init__(self, client: KafkaClient, *, timeout: float | None = None,
                 coordinator: Callable[[], Awaitable[BrokerConnection]] | None = None) -> None:
        self.client = client
        self.timeout = client.request_timeout if timeout is None else timeout
        self.coordinator = coordinator

    @property
    def _timeout_ms(self) -> int:
        return int(self.timeout * 1000)

    # -- topics --------------------------------------------------------------------------------

    async def list_topics(self, *, include_internal: bool = True) -> dict[str, TopicMetadata]:
        meta = await self.client.refresh_metadata(None)
        return {n: t for n, t in sorted(meta.topics.items())
                if t.error == ErrorCode.NONE and (include_internal or not t.internal)}

    async def describe_topics(self, names: Iterable[str]) -> dict[str, Outcome]:
        names = list(names)
        meta = await self.client.refresh_metadata(names)
        out: dict[str, Outcome] = {}
        for name in names:
            topic = meta.topics.get(name)
            if topic is None or topic.error != ErrorCode.NONE:
                code = topic.error if topic is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                out[name] = KafkaError(code, f"Topic '{name}' does not exist."
                                       if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else None)
            else:
                out[name] = topic
        return out

    async def _to_controller(self, api_key: ApiKey, body: Mapping[str, Any],
                             field: str) -> list:
        """Send `body` to the controller and return the response's per-item `field`, asking
        again (the controller found afresh) while any item says NOT_CONTROLLER."""
        async def attempt() -> Any:
            conn = await self.client.controller()
            items = getattr(await conn.request(api_key, body), field)
            if any(r.error_code == ErrorCode.NOT_CONTROLLER for r in items):
                raise KafkaError(ErrorCode.NOT_CONTROLLER)
            return items

        return await self.client.retrying(attempt, timeout=self.timeout)

    async def create_topics(self, topics: Iterable[NewTopic], *,
                            validate_only: bool = False) -> dict[str, Outcome]:
        """name -> the CreateTopics result entry (a Container), or the KafkaError."""
        topics = list(topics)
        body = {"topics": [_new_topic_body(t) for t in topics], "timeout_ms": self._timeout_ms,
                "validate_only": validate_only}

        results = await self._to_controller(ApiKey.CREATE_TOPICS, body, "topics")
        return {r.name: _outcome(r.error_code, r.error_message, r) for r in results}

    async def delete_topics(self, names: Iterable[str]) -> dict[str, Outcome]:
        names = list(names)
        body = {"topics": [{"name": n, "topic_id": ZERO_UUID} for n in names],
                "topic_names": names, "timeout_ms": self._timeout_ms}

        results = await self._to_controller(ApiKey.DELETE_TOPICS, body, "responses")
        for name in names:
            self.client.topics.pop(name, None)
        return {r.name: _outcome(r.error_code, r.error_message, None) for r in results}

    async def create_partitions(self, counts: Mapping[str, int], *,
                                validate_only: bool = False) -> dict[str, Outcome]:
        """Raise each topic's partition count to `counts[topic]`."""
        body = {"topics": [{"name": n, "count": c, "assignments": None}
                           for n, c in counts.items()],
                "timeout_ms": self._timeout_ms, "validate_only": validate_only}

        results = await self._to_controller(ApiKey.CREATE_PARTITIONS, body, "results")
        return {r.name: _outcome(r.error_code, r.error_message, None) for r in results}

    # -- configs -------------------------------------------------------------------------------

    async def elect_leaders(self, election_type: int,
                            partitions: Iterable[TopicPartition] | None
                            ) -> dict[TopicPartition, KafkaError | None]:
        """ElectLeaders (type 0 preferred, 1 unclean) at the controller, for `partitions` or,
        with None, every partition (the broker then reports only those that needed an
        election). Each partition maps to None (elected) or its KafkaError; the controller
        is found afresh while an answer says NOT_CONTROLLER, at the top or per partition. A
        top-level error raises."""
        wanted: dict[str, list[int]] | None = None
        if partitions is not None:
            wanted = {}
            for tp in partitions:
                wanted.setdefault(tp.topic, []).append(tp.partition)
        body = {"election_type": election_type, "timeout_ms": self._timeout_ms,
                "topic_partitions": None if wanted is None else
                [{"topic": t, "partitions": ps} for t, ps in wanted.items()]}

        async def attempt() -> Any:
            conn = await self.client.controller()
            resp = await conn.request(ApiKey.ELECT_LEADERS, body)
            code = getattr(resp, "error_code", 0) or 0
            if code:
                raise KafkaError(code)
            if any(p.error_code == ErrorCode.NOT_CONTROLLER
                   for t in resp.replica_election_results for p in t.partition_result):
                raise KafkaError(ErrorCode.NOT_CONTROLLER)
            return resp.replica_election_results

        results = await self.client.retrying(attempt, timeout=self.timeout, any_retriable=False)
        return {TopicPartition(t.topic, p.partition_id):
                KafkaError(p.error_code, p.error_message) if p.error_code else None
                for t in results for p in t.partition_result}

    async def alter_partition_reassignments(
            self, targets: Mapping[TopicPartition, Iterable[int] | None]
    ) -> dict[TopicPartition, KafkaError | None]:
        """AlterPartitionReassignments at the controller: move each partition to its target
        replicas, or (None) cancel the move in progress. Each partition maps to None (started
        or cancelled) or its KafkaError with the broker's message. The controller is found
        afresh while it answers NOT_CONTROLLER, at the top or per partition; any other
        top-level error raises."""
        by_topic: dict[str, list[dict]] = {}
        for tp, replicas in targets.items():
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition,
                 "replicas": None if replicas is None else list(replicas)})
        body = {"timeout_ms": self._timeout_ms,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}

        async def attempt() -> Any:
            conn = await self.client.controller()
            resp = await conn.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, body)
            if resp.error_code:
                raise KafkaError(resp.error_code, resp.error_message or None)
            if any(p.error_code == ErrorCode.NOT_CONTROLLER
                   for t in resp.responses for p in t.partitions):
                raise KafkaError(ErrorCode.NOT_CONTROLLER)
            return resp.responses

        results = await self.client.retrying(attempt, timeout=self.timeout, any_retriable=False)
        return {TopicPartition(t.name, p.partition_index):
                KafkaError(p.error_code, p.error_message or None) if p.error_code else None
                for t in results for p in t.partitions}

    async def list_partition_reassignments(
            self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, PartitionReassignment]:
        """ListPartitionReassignments at the controller: the reassignments in progress among
        `partitions` (None: all of them). A top-level error raises; NOT_CONTROLLER is retried
        at the controller found afresh."""
        wanted: dict[str, list[int]] | None = None
        if partitions is not None:
            wanted = {}
            for tp in partitions:
                wanted.setdefault(tp.topic, []).append(tp.partition)
        body = {"timeout_ms": self._timeout_ms,
                "topics": None if wanted is None else
                [{"name": t, "partition_indexes": ps} for t, ps in wanted.items()]}

        async def attempt() -> Any:
            conn = await self.client.controller()
            resp = await conn.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, body)
            if resp.error_code:
                raise KafkaError(resp.error_code, resp.error_message or None)
            return resp.topics

        topics = await self.client.retrying(attempt, timeout=self.timeout, any_retriable=False)
        return {TopicPartition(t.name, p.partition_index): PartitionReassignment(
                    tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas))
                for t in topics for p in t.partitions}

    async def _config_node(self, resource: ConfigResource) -> int | None:
        """Broker configs are answered by that broker; everything else by any broker."""
        if resource.type in (ResourceType.BROKER, ResourceType.BROKER_LOGGER) \
                and resource.name.isdigit():
            return int(resource.name)
        return None

    async def describe_configs(self, resources: Iterable[ConfigResource], *,
                               include_synonyms: bool = False,
                               keys: Iterable[str] | None = None) -> dict[ConfigResource, Outcome]:
        """resource -> list of ConfigEntry (in the broker's order), or the KafkaError."""
        out: dict[ConfigResource, Outcome] = {}
        wanted = None if keys is None else list(keys)
        for resource in resources:
            body = {"resources": [{"resource_type": int(resource.type),
                                   "resource_name": resource.name,
                                   "configuration_keys": wanted}],
                    "include_synonyms": include_synonyms, "include_documentation": False}
            resp = await self.client.request(ApiKey.DESCRIBE_CONFIGS, body,
                                             node_id=await self._config_node(resource))
            for r in resp.results:
                entries = [ConfigEntry(
                    c.name, c.value, ConfigSource.of(c.config_source), c.read_only,
                    c.is_sensitive, tuple(ConfigSynonym(s.name, s.value, ConfigSource.of(s.source))
                                          for s in c.synonyms or ()))
                    for c in r.configs]
                out[resource] = _outcome(r.error_code, r.error_message, entries)
        return out

    async def incremental_alter_configs(self, changes: Mapping[ConfigResource,
                                                                Iterable[AlterConfigOp]], *,
                                        validate_only: bool = False
                                        ) -> dict[ConfigResource, Outcome]:
        out: dict[ConfigResource, Outcome] = {}
        for resource, ops in changes.items():
            body = {"resources": [{"resource_type": int(resource.type),
                                   "resource_name": resource.name,
                                   "configs": [{"name": o.name, "config_operation": int(o.op),
                                                "value": o.value} for o in ops]}],
                    "validate_only": validate_only}
            resp = await self.client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, body,
                                             node_id=await self._config_node(resource))
            for r in resp.responses:
                out[resource] = _outcome(r.error_code, r.error_message, None)
        return out

    async def describe_client_quotas(self, components: Iterable[tuple[str, int, str | None]],
                                     *, strict: bool = False
                                     ) -> list[tuple[dict[str, str | None], dict[str, float]]]:
        """(entity type -> name, None for the default; quota values) for each entity the
        filter selects; components are (entity type, match type 0 exact / 1 default /
        2 any, name). KafkaError when the broker refuses the filter."""
        body = {"components": [{"entity_type": t, "match_type": m, "match": n}
                               for t, m, n in components], "strict": strict}
        resp = await self.client.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, body)
        if resp.error_code:
            raise KafkaError(resp.error_code, resp.error_message or None)
        return [({e.entity_type: e.entity_name for e in entry.entity},
                 {v.key: v.value for v in entry["values"]}) for entry in resp.entries or []]

    async def alter_client_quotas(self, entity: Mapping[str, str | None],
                                  ops: Iterable[tuple[str, float | None]], *,
                                  validate_only: bool = False) -> None:
        """Set (key, value) or remove (key, None) quotas of one entity (entity type -> name,
        None for the default); KafkaError when the broker refuses it."""
        body = {"entries": [{"entity": [{"entity_type": t, "entity_name": n}
                                        for t, n in entity.items()],
                             "ops": [{"key": k, "value": 0.0 if v is None else float(v),
                                      "remove": v is None} for k, v in ops]}],
                "validate_only": validate_only}
        resp = await self.client.request(ApiKey.ALTER_CLIENT_QUOTAS, body)
        for entry in resp.entries:
            if entry.error_code:
                raise KafkaError(entry.error_code, entry.error_message or None)

    async def alter_configs(self, changes: Mapping[ConfigResource, Mapping[str, str]], *,
                            validate_only: bool = False) -> dict[ConfigResource, Outcome]:
        """The legacy whole-set AlterConfigs: configs not named are reset to their defaults."""
        out: dict[ConfigResource, Outcome] = {}
        for resource, configs in changes.items():
            body = {"resources": [{"resource_type": int(resource.type),
                                   "resource_name": resource.name,
                                   "configs": [{"name": k, "value": v}
                                               for k, v in configs.items()]}],
                    "validate_only": validate_only}
            resp = await self.client.request(ApiKey.ALTER_CONFIGS, body,
                                             node_id=await self._config_node(resource))
            for r in resp.responses:
                out[resource] = _outcome(r.error_code, r.error_message, None)
        return out

    # -- cluster -------------------------------------------------------------------------------

    async def describe_cluster(self) -> tuple[str | None, int, dict]:
        """(cluster id, controller id, brokers by id), from Metadata (served everywhere)."""
        meta = await self.client.refresh_metadata([])
        return meta.cluster_id, meta.controller_id, dict(meta.brokers)

    async def describe_log_dirs(self, broker_ids: Iterable[int]
                                ) -> dict[int, Outcome]:
        """Per broker, its log dirs (path -> LogDirDescription) with every replica it holds,
        or the error that stopped the request to that broker (Kafka's describeLogDirs: asked
        of each broker, since each knows only its own disks)."""
        out: dict[int, Outcome] = {}

        async def one(node_id: int) -> None:
            try:
                resp = await self.client.request(ApiKey.DESCRIBE_LOG_DIRS, {"topics": None},
                                                 node_id=node_id)
            except (KafkaError, KafkaConnectionError, KafkaTimeoutError) as exc:
                out[node_id] = exc
                return
            if getattr(resp, "error_code", 0):
                out[node_id] = KafkaError(resp.error_code, "DescribeLogDirs")
                return
            out[node_id] = {
                d.log_dir: LogDirDescription(
                    KafkaError(d.error_code, d.log_dir) if d.error_code else None,
                    {TopicPartition(t.name, p.partition_index):
                     ReplicaInfo(p.partition_size, p.offset_lag, p.is_future_key)
                     for t in d.topics for p in t.partitions},
                    d.total_bytes, d.usable_bytes)
                for d in resp.results}

        async with trio.open_nursery() as nursery:
            for node_id in dict.fromkeys(broker_ids):
                nursery.start_soon(one, node_id)
        return out

    # -- offsets and records (routed to leaders) -----------------------------------------------

    async def list_offsets(self, specs: Mapping[TopicPartition, int], *,
                           isolation_level: int = 0) -> dict[TopicPartition, Outcome]:
        """tp -> ListOffsetsResult for each OffsetSpec or timestamp; offset -1 means none."""
        need_max_ts = any(s == OffsetSpec.MAX_TIMESTAMP for s in specs.values())

        async def send(node_id: int, batch: dict[TopicPartition, int]) -> dict:
            body = {"replica_id": -1, "isolation_level": isolation_level,
                    "topics": _by_topic(batch, lambda tp, ts: {
                        "partition_index": tp.partition, "current_leader_epoch": -1,
                        "timestamp": ts, "max_num_offsets": 1}),
                    "timeout_ms": self._timeout_ms}
            resp = await self.client.request(ApiKey.LIST_OFFSETS, body, node_id=node_id,
                                             min_version=7 if need_max_ts else None)
            return {TopicPartition(t.name, p.partition_index): _outcome(
                        p.error_code, None, ListOffsetsResult(p.offset, p.timestamp,
                                                              p.leader_epoch))
                    for t in resp.topics for p in t.partitions}

        return await self.for_leaders(dict(specs), send)

    async def delete_records(self, before: Mapping[TopicPartition, int]
                             ) -> dict[TopicPartition, Outcome]:
        """Delete records below each offset (-1: the high watermark); tp -> new low watermark."""
        async def send(node_id: int, batch: dict[TopicPartition, int]) -> dict:
            body = {"topics": _by_topic(batch, lambda tp, off: {
                        "partition_index": tp.partition, "offset": off}),
                    "timeout_ms": self._timeout_ms}
            resp = await self.client.request(ApiKey.DELETE_RECORDS, body, node_id=node_id)
            return {TopicPartition(t.name, p.partition_index):
                    _outcome(p.error_code, None, p.low_watermark)
                    for t in resp.topics for p in t.partitions}

        return await self.for_leaders(dict(before), send)

    async def for_leaders(self, items: dict[TopicPartition, V],
                          send: Callable[[int, dict[TopicPartition, V]], Awaitable[dict]]
                          ) -> dict[TopicPartition, Outcome]:
        """Send each partition's item to its leader, one request per leader, concurrently.

        Partitions whose answer says the metadata was stale are retried after a refresh until
        the timeout; then their last error stands in the result.
        """
        results: dict[TopicPartition, Outcome] = {}
        pending = dict(items)
        deadline = trio.current_time() + self.timeout
        refresh = False
        while pending:
            groups: dict[int, dict[TopicPartition, V]] = {}
            for tp, item in pending.items():
                try:
                    leader = await self.client.leader(tp.topic, tp.partition, refresh=refresh)
                except (KafkaError, KafkaConnectionError, KafkaTimeoutError) as exc:
                    results[tp] = exc
                    continue
                groups.setdefault(leader, {})[tp] = item

            async def one(node_id: int, batch: dict[TopicPartition, V]) -> None:
                try:
                    answered = await send(node_id, batch)
                except (KafkaError, KafkaConnectionError, KafkaTimeoutError) as exc:
                    answered = {tp: exc for tp in batch}
                for tp in batch:
                    results[tp] = answered.get(tp, KafkaError(
                        ErrorCode.UNKNOWN_SERVER_ERROR, f"no answer for {tp}"))

            async with trio.open_nursery() as nursery:
                for node_id, batch in groups.items():
                    nursery.start_soon(one, node_id, batch)
            retry = {tp: item for tp, item in pending.items()
                     if _stale(results.get(tp)) and tp in results}
            if not retry or trio.current_time() + 0.2 >= deadline:
                break
            pending, refresh = retry, True
            await trio.sleep(0.2)
        return {tp: results[tp] for tp in items if tp in results}


def _stale(outcome: Outcome) -> bool:
    """Worth asking again (after a metadata refresh): a moved leader, a lost connection, or
    a new leader whose high watermark has not caught up yet (OFFSET_NOT_AVAILABLE, which
    Kafka's consumer retries too)."""
    return (isinstance(outcome, KafkaConnectionError)
            or (isinstance(outcome, KafkaError)
                and (outcome.code in REFRESH_CODES
                     or outcome.code == ErrorCode.OFFSET_NOT_AVAILABLE)
                and outcome.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))


def _outcome(code: int, message: str | None, value: Any) -> Outcome:
    return KafkaError(code, message or None) if code else value


def _by_topic(items: Mapping[TopicPartition, V], make: Callable[[TopicPartition, V], dict]
              ) -> list[dict]:
    topics: dict[str, list[dict]] = {}
    for tp, item in items.items():
        topics.setdefault(tp.topic, []).append(make(tp, item))
    return [{"name": t, "partitions": ps} for t, ps in topics.items()]


def _new_topic_body(t: NewTopic) -> dict:
    assignments = []
    if t.assignments:
        assignments = [{"partition_index": p, "broker_ids": list(b)}
                       for p, b in sorted(t.assignments.items())]
    return {"name": t.name,
            "num_partitions": -1 if assignments else t.num_partitions,
            "replication_factor": -1 if assignments else t.replication_factor,
            "assignments": assignments,
            "configs": [{"name": k, "value": v} for k, v in t.configs.items()]}
