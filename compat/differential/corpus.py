"""The corpus: for every API and version, cases written from the declarations in `protocol/`.

Generated for every version of every API (`generic_cases`):
- `defaults`: the request with every field at its declared default (empty strings and
  arrays, zero numbers), the smallest well-formed request, whose answer is an error path or
  an empty success on both brokers;
- `null-<field>`: each top-level array declared nullable in that version, sent as null;
- `unknown-tag`: in flexible versions, the defaults with a tagged field neither broker
  knows, which both must skip.

Written by hand for the APIs a client lives on (`HAND`): the ordinary case and the edge
cases that apply (unknown topic or partition, offsets before the log start and past its end,
bad CRC, wrong leader epoch, timestamps far in the past and future, duplicate topics, empty
and maximal values). Sequences over time are in `sequences.py`.
"""
from __future__ import annotations

import time
import uuid
from typing import Any, Callable, Iterator

from compat.differential.case import Case, Ctx
from protocol.api_keys import ApiKey as K
from protocol.messages import APIS
from protocol.records.batch import LOG_APPEND_TIME
from protocol.records.record import Record, build_batch
from protocol.schema import ArrayOf

# Versions used for the set-up steps of a case (what is being compared is the step filed
# under the case's own API and version).
PRODUCE_V, FETCH_V, LIST_V, META_V, CREATE_V = 9, 12, 7, 12, 7

# Per-API fields the `defaults` case must set for the request to be answered at all.
DEFAULT_FIXUPS: dict[int, dict[str, Any]] = {
    K.PRODUCE: {"acks": -1, "timeout_ms": 5000},  # acks=0 is never answered
}


def _body(api: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {**DEFAULT_FIXUPS.get(api, {}), **(extra or {})}


def generic_cases(api: int, version: int) -> Iterator[Case]:
    decl = APIS[api]

    def defaults(ctx: Ctx) -> None:
        ctx.ask("answer", api, version, _body(api))
    yield Case(api, version, "defaults", defaults)

    for fld in decl.request.fields:
        if isinstance(fld.type, ArrayOf) and version in fld.versions and version in fld.nullable:
            def null_array(ctx: Ctx, name: str = fld.name) -> None:
                ctx.ask("answer", api, version, _body(api, {name: None}))
            yield Case(api, version, f"null-{fld.name}", null_array)

    if version in decl.flexible:
        def unknown_tag(ctx: Ctx) -> None:
            ctx.ask("answer", api, version, _body(api, {"_unknown_tags": {9999: b"\x07"}}))
        yield Case(api, version, "unknown-tag", unknown_tag)


# -- set-up steps shared by the hand-written cases ----------------------------------------------

# Topic configs compared where an answer lists them: those both brokers have. Kafka 4.1
# has keys pybroker does not (remote storage, compression levels...); the set of keys is
# not compared, their values and sources are.
COMMON_CONFIGS = ("cleanup.policy", "compression.type", "max.message.bytes",
                  "message.timestamp.type", "min.insync.replicas", "retention.bytes",
                  "retention.ms", "segment.bytes", "segment.ms")


def topics_view(answer: Any) -> Any:
    """A CreateTopics answer with its configs restricted to `COMMON_CONFIGS`, by name."""
    out = dict(answer)
    out["topics"] = []
    for t in answer.topics:
        t = dict(t)
        if t.get("configs"):
            t["configs"] = {c.name: {k: v for k, v in c.items() if k != "name"}
                            for c in t["configs"] if c.name in COMMON_CONFIGS}
        out["topics"].append(t)
    return out


def setup_view(answer: Any) -> Any:
    """What a set-up step's CreateTopics is checked for: that it worked."""
    return [(t.name, t.error_code) for t in answer.topics]


def create(ctx: Ctx, name: str, partitions: int = 1, configs: dict[str, str] | None = None,
           label: str = "setup create") -> Any:
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout_ms": 10000}
    answer = ctx.ask(label, K.CREATE_TOPICS, CREATE_V, body, view=setup_view)
    wait_ready(ctx, name, partitions)
    return answer


def wait_ready(ctx: Ctx, topic: str, partitions: int) -> None:
    """Until every partition of a new topic has its leader in place (unobserved): Kafka
    answers NOT_LEADER_OR_FOLLOWER for a moment after CreateTopics returns, while the new
    partition's metadata reaches the broker; a client retries through it."""
    _poll_list_offsets(ctx, topic, partitions, lambda code: code not in (3, 5, 6))


def wait_gone(ctx: Ctx, topic: str, partitions: int) -> None:
    """Until the broker answers for a deleted topic as for one that never existed
    (unobserved): Kafka's DeleteTopics returns once the controller has removed the topic,
    and its broker's metadata follows a moment later (a CI run saw Metadata still list it);
    a client retries through it. ListOffsets, since a Metadata request may auto-create."""
    _poll_list_offsets(ctx, topic, partitions, lambda code: code == 3)


def _poll_list_offsets(ctx: Ctx, topic: str, partitions: int, done: Any) -> None:
    """Ask ListOffsets (latest) for every partition until `done(error_code)` holds for all,
    or about 5 s have passed; nothing is recorded."""
    body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
        {"partition_index": p, "timestamp": -1, "current_leader_epoch": -1}
        for p in range(partitions)]}]}
    for _ in range(100):
        answer = ctx.target.conn.request(K.LIST_OFFSETS, LIST_V, body)
        if isinstance(answer, str) or all(done(p.error_code)
                                          for p in answer.topics[0].partitions):
            return
        time.sleep(0.05)


def batch(ctx: Ctx, n: int = 2, ts: int = 0, size: int = 5, **kw: Any) -> bytes:
    return build_batch([Record(f"k{i}".encode(), bytes([65 + i % 26]) * size,
                               timestamp=ctx.t0 + ts + i) for i in range(n)], **kw)


def produce_body(topic: str, records: Any, partition: int = 0, acks: int = -1) -> dict:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 10000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]}


def produce(ctx: Ctx, topic: str, records: Any, partition: int = 0,
            label: str = "setup produce") -> Any:
    return ctx.ask(label, K.PRODUCE, PRODUCE_V, produce_body(topic, records, partition))


def fetch_body(topic: str, offset: int, partition: int = 0, max_wait: int = 0,
               epoch: int = -1, min_bytes: int = 1) -> dict:
    return {"replica_id": -1, "max_wait_ms": max_wait, "min_bytes": min_bytes,
            "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": partition, "fetch_offset": offset, "current_leader_epoch": epoch,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}]}


def list_body(topic: str, timestamp: int, partition: int = 0, epoch: int = -1) -> dict:
    return {"replica_id": -1, "isolation_level": 0, "timeout_ms": 5000, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "timestamp": timestamp,
                                        "current_leader_epoch": epoch,
                                        "max_num_offsets": 1}]}]}


def metadata_body(topics: list[str] | None, auto: bool = False) -> dict:
    return {"topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": auto, "include_topic_authorized_operations": False}


# -- hand-written cases, by API ----------------------------------------------------------------

HandCase = Callable[[Ctx], None]
HAND: dict[int, list[tuple[str, HandCase, int]]] = {}


def hand(api: int, name: str, since: int = 0) -> Callable[[HandCase], HandCase]:
    """Register a case for every version of `api` from `since`."""
    def register(fn: HandCase) -> HandCase:
        HAND.setdefault(api, []).append((name, fn, since))
        return fn
    return register


@hand(K.PRODUCE, "ordinary")
def _produce_ordinary(ctx: Ctx) -> None:
    t = ctx.topic()
    create(ctx, t, 2)
    ctx.ask("first", K.PRODUCE, ctx.version, produce_body(t, batch(ctx, 3), 1))
    ctx.ask("second", K.PRODUCE, ctx.version, produce_body(t, batch(ctx, 1, ts=10), 1))
    ctx.ask("fetch back", K.FETCH, FETCH_V, fetch_body(t, 0, 1))


@hand(K.PRODUCE, "unknown-topic-and-partition")
def _produce_unknown(ctx: Ctx) -> None:
    t = ctx.topic()
    ctx.ask("unknown topic", K.PRODUCE, ctx.version, produce_body(t + "-none", batch(ctx)))
    create(ctx, t)
    ctx.ask("unknown partition", K.PRODUCE, ctx.version, produce_body(t, batch(ctx), 7))


@hand(K.PRODUCE, "bad-crc")
def _produce_bad_crc(ctx: Ctx) -> None:
    t = ctx.topic()
    create(ctx, t)
    data = bytearray(batch(ctx))
    data[-1] ^= 0xFF  # the last byte of the last record: covered by the CRC
    ctx.ask("answer", K.PRODUCE, ctx.version, produce_body(t, bytes(data)))
    ctx.ask("log end", K.LIST_OFFSETS, LIST_V, list_body(t, -1))


@hand(K.PRODUCE, "empty-and-null-records")
def _produce_empty(ctx: Ctx) -> None:
    t = ctx.topic()
    create(ctx, t)
    ctx.ask("empty", K.PRODUCE, ctx.version, produce_body(t, b""))
    # Kafka never answers this one (see deliberate.py): a short wait is enough to see that.
    ctx.ask("null", K.PRODUCE, ctx.version, produce_body(t, None), timeout=1.0)


@hand(K.PRODUCE, "timestamps-far-past-and-future")
def _produce_timestamps(ctx: Ctx) -> None:
    t = ctx.topic()
    create(ctx, t)
    past = build_batch([Record(b"k", b"old", timestamp=1)])
    ctx.ask("1970", K.PRODUCE, ctx.version, produce_body(t, past))
    future = batch(ctx, 1, ts=10 * 365 * 86_400_000)
    ctx.ask("ten years ahead", K.PRODUCE, ctx.version, produce_body(t, future))


@hand(K.PRODUCE, "compacted-keyless-records")
def _produce_compacted_keyless(ctx: Ctx) -> None:
    """KIP-467: the batch is refused whole, its keyless records named (v8+)."""
    t = ctx.topic()
    create(ctx, t, configs={"cleanup.policy": "compact"})
    records = build_batch([Record(b"k0", b"a", timestamp=ctx.t0),
                           Record(None, b"b", timestamp=ctx.t0 + 1),
                           Record(b"k2", b"c", timestamp=ctx.t0 + 2),
                           Record(None, b"d", timestamp=ctx.t0 + 3)])
    ctx.ask("two keyless of four", K.PRODUCE, ctx.version, produce_body(t, records))
    ctx.ask("log end", K.LIST_OFFSETS, LIST_V, list_body(t, -1))


@hand(K.PRODUCE, "log-append-time-set-by-producer")
def _produce_stamped_append_time(ctx: Ctx) -> None:
    """Only the broker stamps LogAppendTime: a producer's batch with that timestamp type is
    refused record by record on a LogAppendTime topic, and on a CreateTime topic where its
    records carry no timestamp."""
    t = ctx.topic()
    create(ctx, t + "-lat", configs={"message.timestamp.type": "LogAppendTime"})
    create(ctx, t + "-ct", label="setup create 2")
    stamped = build_batch([Record(b"k0", b"a", timestamp=ctx.t0),
                           Record(None, b"bb", timestamp=ctx.t0 + 1)],
                          timestamp_type=LOG_APPEND_TIME)
    ctx.ask("LogAppendTime topic", K.PRODUCE, ctx.version, produce_body(t + "-lat", stamped))
    unstamped = build_batch([Record(b"k0", b"a", timestamp=-1)], timestamp_type=LOG_APPEND_TIME)
    ctx.ask("CreateTime topic, no timestamp", K.PRODUCE, ctx.version,
            produce_body(t + "-ct", unstamped))
    ctx.ask("log end", K.LIST_OFFSETS, LIST_V, list_body(t + "-lat", -1))


@hand(K.PRODUCE, "duplicate-topics")
def _produce_duplicates(ctx: Ctx) -> None:
    t = ctx.topic()
    create(ctx, t)
    body = produce_body(t, batch(ctx))
    body["topic_data"].append({"name": t, "partition_data": [{"index": 0,
                                                             "records": batch(ctx, ts=5)}]})
    ctx.ask("answer", K.PRODUCE, ctx.version, body)


@hand(K.PRODUCE, "large-record")
def _produce_large(ctx: Ctx) -> None:
    t = ctx.topic()
    create(ctx, t)
    ctx.ask("100 KB", K.PRODUCE, ctx.version, produce_body(t, batch(ctx, 1, size=100_000)))
    ctx.ask("2 MB (over message.max.bytes)", K.PRODUCE, ctx.version,
            produce_body(t, batch(ctx, 1, ts=1, size=2_000_000)))


@hand(K.FETCH, "ordinary-and-offsets")
def _fetch_offsets(ctx: Ctx) -> None:
    t = ctx.topic()
    create(ctx, t)
    produce(ctx, t, batch(ctx, 3))
    produce(ctx, t, batch(ctx, 2, ts=10), label="setup produce 2")
    ctx.ask("from 0", K.FETCH, ctx.version, fetch_body(t, 0))
    ctx.ask("mid-batch", K.FETCH, ctx.version, fetch_body(t, 4))
    ctx.ask("at end", K.FETCH, ctx.version, fetch_body(t, 5, min_bytes=0))
    ctx.ask("past end", K.FETCH, ctx.version, fetch_body(t, 50))
    ctx.ask("negative", K.FETCH, ctx.version, fetch_body(t, -3))


@hand(K.FETCH, "unknown-topic-and-partition")
def _fetch_unknown(ctx: Ctx) -> None:
    t = ctx.topic()
    ctx.ask("unknown topic", K.FETCH, ctx.version, fetch_body(t + "-none", 0))
    create(ctx, t)
    ctx.ask("unknown partition", K.FETCH, ctx.version, fetch_body(t, 0, partition=3))


@hand(K.FETCH, "leader-epoch")
def _fetch_epoch(ctx: Ctx) -> None:
    t = ctx.topic()
    create(ctx, t)
    produce(ctx, t, batch(ctx))
    ctx.ask("current (0)", K.FETCH, ctx.version, fetch_body(t, 0, epoch=0))
    ctx.ask("future (7)", K.FETCH, ctx.version, fetch_body(t, 0, epoch=7))


@hand(K.FETCH, "client-rack")
def _fetch_client_rack(ctx: Ctx) -> None:
    """KIP-392's rack_id from a consumer: one broker, no replica.selector.class (Kafka's
    default), so the leader serves it and names no preferred read replica."""
    t = ctx.topic()
    create(ctx, t)
    produce(ctx, t, batch(ctx))
    body = fetch_body(t, 0)
    body["rack_id"] = "rack-a"
    ctx.ask("with rack_id", K.FETCH, ctx.version, body)


@hand(K.FETCH, "duplicate-topics")
def _fetch_duplicates(ctx: Ctx) -> None:
    t = ctx.topic()
    create(ctx, t)
    produce(ctx, t, batch(ctx))
    body = fetch_body(t, 0)
    body["topics"].append(fetch_body(t, 1)["topics"][0])
    ctx.ask("answer", K.FETCH, ctx.version, body)


@hand(K.LIST_OFFSETS, "ordinary")
def _list_ordinary(ctx: Ctx) -> None:
    t = ctx.topic()
    create(ctx, t)
    ctx.ask("empty latest", K.LIST_OFFSETS, ctx.version, list_body(t, -1))
    produce(ctx, t, batch(ctx, 3, ts=100))
    produce(ctx, t, batch(ctx, 2, ts=200), label="setup produce 2")
    for label, ts in (("latest", -1), ("earliest", -2), ("max timestamp", -3),
                      ("at t0+101", ctx.t0 + 101), ("at t0+150", ctx.t0 + 150),
                      ("after all", ctx.t0 + 10_000), ("far past", 0)):
        ctx.ask(label, K.LIST_OFFSETS, ctx.version, list_body(t, ts))


@hand(K.LIST_OFFSETS, "unknown-and-epoch")
def _list_unknown(ctx: Ctx) -> None:
    t = ctx.topic()
    ctx.ask("unknown topic", K.LIST_OFFSETS, ctx.version, list_body(t + "-none", -1))
    create(ctx, t)
    ctx.ask("unknown partition", K.LIST_OFFSETS, ctx.version, list_body(t, -1, partition=2))
    ctx.ask("future epoch", K.LIST_OFFSETS, ctx.version, list_body(t, -1, epoch=9))


@hand(K.METADATA, "topics")
def _metadata_topics(ctx: Ctx) -> None:
    t = ctx.topic()
    create(ctx, t, 3)
    v = ctx.version
    if v == 0:
        return ctx.note("skipped", "v0 asks for all topics with an empty list")
    ctx.ask("known", K.METADATA, v, metadata_body([t]))
    ctx.ask("unknown, no auto-create", K.METADATA, v, metadata_body([t + "-none"]))
    ctx.ask("duplicate", K.METADATA, v, metadata_body([t, t]))
    if v >= 4:
        ctx.ask("auto-create", K.METADATA, v, metadata_body([t + "-auto"], auto=True))
    ctx.ask("invalid name", K.METADATA, v, metadata_body(["bad/name"], auto=True))


@hand(K.METADATA, "by-topic-id", since=12)
def _metadata_by_topic_id(ctx: Ctx) -> None:
    """Topics asked for by id: the Java client's forTopicIds leaves each name "" (its field's
    default); once any id is given, Kafka reads the ids alone (a set), not the names."""
    t, other = ctx.topic(), ctx.topic("other")
    create(ctx, t, 2)
    create(ctx, other, 1, label="setup create other")
    named = ctx.ask("by name", K.METADATA, ctx.version, metadata_body([t, other]))
    ids = {x.name: x.topic_id for x in named.topics}
    flags = {"allow_auto_topic_creation": True, "include_topic_authorized_operations": False}
    ctx.ask("ids with empty names", K.METADATA, ctx.version, {"topics": [
        {"name": "", "topic_id": ids[t]}, {"name": "", "topic_id": ids[other]},
        {"name": "", "topic_id": ids[t]}, {"name": None, "topic_id": uuid.UUID(int=848)}],
        **flags})
    ctx.ask("an id beside a name", K.METADATA, ctx.version, {"topics": [
        {"name": other, "topic_id": uuid.UUID(int=0)}, {"name": "", "topic_id": ids[t]}],
        **flags})


@hand(K.CREATE_TOPICS, "controller-mutation-quota")
def _create_past_mutation_quota(ctx: Ctx) -> None:
    """KIP-599: controller_mutation_rate=0.2 for a client id of this case's own; with
    Kafka's 11 windows of 1 s its bucket holds 2.2 partitions. Three partitions are admitted
    (the bucket goes below zero), then v6+ refuses the next topic with
    THROTTLING_QUOTA_EXCEEDED while older versions create it and throttle."""
    t, v = ctx.topic(), ctx.version
    mutator, probe = ctx.target.connect(), ctx.target.connect()
    mutator.client_id, probe.client_id = f"dc-mutator-v{v}", f"dc-probe-v{v}"
    for conn in (mutator, probe):  # one entity a request: Kafka answers them in any order
        ctx.ask(f"set quota of {conn.client_id}", K.ALTER_CLIENT_QUOTAS, 1, {"entries": [{
            "entity": [{"entity_type": "client-id", "entity_name": conn.client_id}],
            "ops": [{"key": "controller_mutation_rate", "value": 0.2, "remove": False}]}],
            "validate_only": False})
    _wait_mutation_quota(probe, t)
    topics = [{"name": name, "num_partitions": n, "replication_factor": 1, "assignments": [],
               "configs": []} for name, n in ((t + "-a", 3), (t + "-b", 1))]
    ctx.ask("two topics past the quota", K.CREATE_TOPICS, v,
            {"topics": topics, "timeout_ms": 10000, "validate_only": False},
            conn=mutator, view=topics_view)
    wait_ready(ctx, t + "-a", 3)
    if v < 6:
        wait_ready(ctx, t + "-b", 1)
    ctx.ask("what exists", K.METADATA, META_V, metadata_body([t + "-a", t + "-b"]))


def _wait_mutation_quota(probe: Any, t: str) -> None:
    """Until the quota set with the probe's is in force (unobserved): Kafka's controller
    applies a quota once the metadata image carrying it is published, a moment after
    AlterClientQuotas answers. The probe creates a topic of 5 partitions and one of 1 (v7,
    strict) until the second is refused."""
    for i in range(100):
        topics: list[dict[str, Any]] = [
            {"name": f"{t}-probe{i}-{n}", "num_partitions": n, "replication_factor": 1,
             "assignments": [], "configs": []} for n in (5, 1)]
        answer = probe.request(K.CREATE_TOPICS, 7, {"topics": topics, "timeout_ms": 10000,
                                                   "validate_only": False})
        if isinstance(answer, str) or answer.topics[1].error_code != 0:
            return
        time.sleep(0.05)


@hand(K.CREATE_TOPICS, "edge-cases")
def _create_edges(ctx: Ctx) -> None:
    t, v = ctx.topic(), ctx.version

    def one(**kw: Any) -> dict:
        topic = {"name": t, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                 "configs": []}
        topic.update(kw)
        return {"topics": [topic], "timeout_ms": 10000, "validate_only": False}

    def ask(label: str, body: dict) -> None:
        ctx.ask(label, K.CREATE_TOPICS, v, body, view=topics_view)
    ask("ordinary", one())
    ask("exists", one())
    ask("zero partitions", one(name=t + "-z", num_partitions=0))
    ask("replication 3", one(name=t + "-r", replication_factor=3))
    ask("defaults (-1, -1)", one(name=t + "-d", num_partitions=-1, replication_factor=-1))
    ask("bad name", one(name="bad/name"))
    ask("name of 250", one(name="x" * 250))
    ask("unknown config", one(name=t + "-c", configs=[{"name": "no.such", "value": "1"}]))
    ask("bad config value", one(name=t + "-c2", configs=[{"name": "retention.ms",
                                                          "value": "soon"}]))
    dup = one(name=t + "-dup")
    dup["topics"].append(dict(dup["topics"][0]))
    ask("duplicate", dup)
    ask("validate only", {**one(name=t + "-vo"), "validate_only": True})
    ctx.ask("after validate only", K.METADATA, META_V, metadata_body([t + "-vo"]))


@hand(K.DELETE_TOPICS, "ordinary-and-unknown")
def _delete_topics(ctx: Ctx) -> None:
    t, v = ctx.topic(), ctx.version
    create(ctx, t)
    body = ({"topics": [{"name": t}, {"name": t + "-none"}], "timeout_ms": 10000} if v >= 6
            else {"topic_names": [t, t + "-none"], "timeout_ms": 10000})
    ctx.ask("answer", K.DELETE_TOPICS, v, body, view=by_name("responses"))


@hand(K.DELETE_RECORDS, "edge-cases")
def _delete_records(ctx: Ctx) -> None:
    t, v = ctx.topic(), ctx.version
    create(ctx, t)
    produce(ctx, t, batch(ctx, 5))

    def body(offset: int, partition: int = 0, topic: str = t) -> dict:
        return {"topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "offset": offset}]}], "timeout_ms": 5000}
    ctx.ask("to 2", K.DELETE_RECORDS, v, body(2))
    ctx.ask("below start", K.DELETE_RECORDS, v, body(1))
    ctx.ask("past end", K.DELETE_RECORDS, v, body(99))
    ctx.ask("to the high watermark (-1)", K.DELETE_RECORDS, v, body(-1))
    ctx.ask("unknown partition", K.DELETE_RECORDS, v, body(0, partition=4))
    ctx.ask("unknown topic", K.DELETE_RECORDS, v, body(0, topic=t + "-none"))


@hand(K.CREATE_PARTITIONS, "edge-cases")
def _create_partitions(ctx: Ctx) -> None:
    t, v = ctx.topic(), ctx.version
    create(ctx, t, 2)

    def body(count: int, topic: str = t, validate: bool = False) -> dict:
        return {"topics": [{"name": topic, "count": count, "assignments": None}],
                "timeout_ms": 10000, "validate_only": validate}
    ctx.ask("validate 4", K.CREATE_PARTITIONS, v, body(4, validate=True))
    ctx.ask("to 3", K.CREATE_PARTITIONS, v, body(3))
    ctx.ask("same count", K.CREATE_PARTITIONS, v, body(3))
    ctx.ask("fewer", K.CREATE_PARTITIONS, v, body(1))
    ctx.ask("unknown topic", K.CREATE_PARTITIONS, v, body(2, topic=t + "-none"))


@hand(K.OFFSET_COMMIT, "standalone")
def _offset_commit(ctx: Ctx) -> None:
    t, v = ctx.topic(), ctx.version
    create(ctx, t)
    body = {"group_id": t, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "retention_time_ms": -1, "topics": [
                {"name": t, "partitions": [
                    {"partition_index": 0, "committed_offset": 3, "committed_leader_epoch": -1,
                     "committed_metadata": "meta"},
                    {"partition_index": 5, "committed_offset": 1, "committed_leader_epoch": -1,
                     "committed_metadata": None}]}]}
    ctx.ask("commit", K.OFFSET_COMMIT, v, body)
    ctx.ask("fetch", K.OFFSET_FETCH, 7, {"group_id": t, "topics": [
        {"name": t, "partition_indexes": [0, 5]}], "require_stable": False})
    ctx.ask("empty group id", K.OFFSET_COMMIT, v, {**body, "group_id": ""})


@hand(K.OFFSET_FETCH, "unknown-group")
def _offset_fetch(ctx: Ctx) -> None:
    t, v = ctx.topic(), ctx.version
    if v >= 8:
        body = {"groups": [{"group_id": t, "member_id": None, "member_epoch": -1,
                            "topics": [{"name": t, "partition_indexes": [0]}]}],
                "require_stable": False}
    else:
        body = {"group_id": t, "topics": [{"name": t, "partition_indexes": [0]}],
                "require_stable": False}
    ctx.ask("answer", K.OFFSET_FETCH, v, body)


@hand(K.FIND_COORDINATOR, "group-and-transaction")
def _find_coordinator(ctx: Ctx) -> None:
    v = ctx.version
    for label, key, kind in (("group", "dc-group", 0), ("transaction", "dc-txn", 1),
                             ("bad key type", "dc-x", 7)):
        if kind and v == 0:
            continue
        body = ({"key_type": kind, "coordinator_keys": [key]} if v >= 4
                else {"key": key, "key_type": kind})
        ctx.ask(label, K.FIND_COORDINATOR, v, body)


@hand(K.INIT_PRODUCER_ID, "idempotent")
def _init_producer_id(ctx: Ctx) -> None:
    init_producer_id(ctx, "first", ctx.version)
    init_producer_id(ctx, "second", ctx.version)


def init_transactional(ctx: Ctx, transactional_id: str) -> tuple[int, int]:
    """An unobserved transactional producer: (producer id, epoch), retried through a
    coordinator that is not ready yet (its topic is created on the first FindCoordinator).
    A coordinator still not ready after 100 tries fails the case here, rather than handing it
    the -1 ids of an error answer (or a str's missing attribute) to produce with."""
    conn = ctx.target.conn
    init: Any = None
    for _ in range(100):
        conn.request(K.FIND_COORDINATOR, 3, {"key": transactional_id, "key_type": 1})
        init = conn.request(K.INIT_PRODUCER_ID, 3, {
            "transactional_id": transactional_id, "transaction_timeout_ms": 60000,
            "producer_id": -1, "producer_epoch": -1})
        if not isinstance(init, str) and init.error_code not in (14, 15, 16, 51):
            return init.producer_id, init.producer_epoch
        time.sleep(0.1)
    raise RuntimeError(f"InitProducerId for {transactional_id!r} not ready after 100 tries: "
                       f"{init}")


@hand(K.PRODUCE, "transactional-partition-not-added")
def _produce_not_added(ctx: Ctx) -> None:
    """A transactional batch to a partition its producer never added (KIP-890 part 1): the
    partition's leader asks the coordinator and refuses it."""
    t, v = ctx.topic(), ctx.version
    tid = f"dc-not-added-{v}"
    create(ctx, t)
    pid, epoch = init_transactional(ctx, tid)
    records = batch(ctx, 1, producer_id=pid, producer_epoch=epoch, base_sequence=0,
                    transactional=True)
    ctx.ask("answer", K.PRODUCE, v, {**produce_body(t, records), "transactional_id": tid})


def _verify_view(answer: Any) -> Any:
    """An AddPartitionsToTxn v4 answer as each partition's code, by transaction, topic and
    partition: Kafka orders its results by hash map."""
    return {"error_code": answer.error_code, "results": sorted(
        (txn.transactional_id, topic.name, p.partition_index, p.partition_error_code)
        for txn in answer.results_by_transaction for topic in txn.topic_results
        for p in topic.results_by_partition)}


@hand(K.ADD_PARTITIONS_TO_TXN, "verify-only", since=4)
def _add_partitions_verify_only(ctx: Ctx) -> None:
    """v4+, what a partition leader asks the transaction coordinator before it appends a
    transactional batch (KIP-890 part 1): is each partition in the transaction?"""
    v = ctx.version
    t, tid = ctx.topic(), f"dc-verify-{v}"
    create(ctx, t, 2)
    pid, epoch = init_transactional(ctx, tid)  # unobserved set-up, with partition 0 added
    ctx.target.conn.request(K.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": t, "partitions": [0]}]})

    def verify(transactional_id: str, producer_id: int, producer_epoch: int) -> dict:
        return {"transactions": [{
            "transactional_id": transactional_id, "producer_id": producer_id,
            "producer_epoch": producer_epoch, "verify_only": True,
            "topics": [{"name": t, "partitions": [0, 1]}]}]}
    ctx.ask("added and not added", K.ADD_PARTITIONS_TO_TXN, v, verify(tid, pid, epoch),
            view=_verify_view)
    ctx.ask("another epoch", K.ADD_PARTITIONS_TO_TXN, v, verify(tid, pid, epoch + 1),
            view=_verify_view)
    ctx.ask("another producer id", K.ADD_PARTITIONS_TO_TXN, v, verify(tid, pid + 1, epoch),
            view=_verify_view)
    ctx.ask("unknown transactional id", K.ADD_PARTITIONS_TO_TXN, v,
            verify(tid + "-none", pid, epoch), view=_verify_view)


@hand(K.OFFSET_FOR_LEADER_EPOCH, "ordinary-and-unknown")
def _offset_for_leader_epoch(ctx: Ctx) -> None:
    t, v = ctx.topic(), ctx.version
    create(ctx, t)
    produce(ctx, t, batch(ctx, 2))

    def body(epoch: int, current: int = -1, partition: int = 0) -> dict:
        return {"replica_id": -1, "topics": [{"topic": t, "partitions": [
            {"partition": partition, "current_leader_epoch": current, "leader_epoch": epoch}]}]}
    ctx.ask("epoch 0", K.OFFSET_FOR_LEADER_EPOCH, v, body(0))
    ctx.ask("epoch 5", K.OFFSET_FOR_LEADER_EPOCH, v, body(5))
    ctx.ask("fenced current", K.OFFSET_FOR_LEADER_EPOCH, v, body(0, current=9))
    ctx.ask("unknown partition", K.OFFSET_FOR_LEADER_EPOCH, v, body(0, partition=3))


@hand(K.DESCRIBE_CONFIGS, "topic-keys")
def _describe_configs(ctx: Ctx) -> None:
    t, v = ctx.topic(), ctx.version
    create(ctx, t, configs={"retention.ms": "1234"})
    keys = ["retention.ms", "cleanup.policy", "max.message.bytes", "no.such.key"]
    ctx.ask("answer", K.DESCRIBE_CONFIGS, v, {"resources": [
        {"resource_type": 2, "resource_name": t, "configuration_keys": keys}],
        "include_synonyms": False, "include_documentation": False})
    ctx.ask("unknown topic", K.DESCRIBE_CONFIGS, v, {"resources": [
        {"resource_type": 2, "resource_name": t + "-none", "configuration_keys": keys}]})
    # No override: each key's source and synonyms come from the broker's file and defaults
    # (log.retention.hours is set there, log.retention.ms is not).
    plain = ctx.topic("plain")
    create(ctx, plain, label="setup create plain")
    ctx.ask("no override, synonyms", K.DESCRIBE_CONFIGS, v, {"resources": [
        {"resource_type": 2, "resource_name": plain,
         "configuration_keys": ["retention.ms", "segment.bytes", "cleanup.policy"]}],
        "include_synonyms": True, "include_documentation": False})


@hand(K.INCREMENTAL_ALTER_CONFIGS, "dynamic-broker-config")
def _dynamic_broker_config(ctx: Ctx) -> None:
    """KIP-226 on the broker asked (its own id: 0 here, 1 for Kafka, masked in the answers):
    a dynamic config set, described with its source and synonyms, deleted again (the value
    is the default's own, so no other case sees a change); a key Kafka reads only at start
    refused with its message."""
    v = ctx.version
    node = str(ctx.target.conn.request(K.DESCRIBE_CLUSTER, 0, {
        "include_cluster_authorized_operations": False}).brokers[0].broker_id)
    key = "log.cleaner.min.cleanable.ratio"

    def alter(label: str, name: str, op: int, value: str | None) -> None:
        ctx.ask(label, K.INCREMENTAL_ALTER_CONFIGS, v, {"resources": [
            {"resource_type": 4, "resource_name": node, "configs": [
                {"name": name, "config_operation": op, "value": value}]}],
            "validate_only": False}, view=masked("responses"))
    alter("set", key, 0, "0.5")
    describe = {"resources": [
        {"resource_type": 4, "resource_name": node, "configuration_keys": [key]}],
        "include_synonyms": True, "include_documentation": False}
    for _ in range(50):  # Kafka applies it once its metadata log reaches the broker
        answer = ctx.target.conn.request(K.DESCRIBE_CONFIGS, 4, describe)
        if isinstance(answer, str) or answer.results[0].configs[0].config_source == 2:
            break
        time.sleep(0.1)
    ctx.ask("describe", K.DESCRIBE_CONFIGS, 4, describe, view=masked("results"))
    alter("delete", key, 1, None)
    alter("static key refused", "num.partitions", 0, "3")


def masked(field: str) -> Callable[[Any], Any]:
    """An answer with its resources' names masked: a broker's own id differs between the
    targets."""
    def view(answer: Any) -> Any:
        return {**answer, field: [{**r, "resource_name": "<node>"} for r in answer[field]]}
    return view


def by_name(field: str) -> Callable[[Any], Any]:
    """An answer with the array `field` sorted by name: where Kafka's order follows a hash
    map's and no client relies on it (DeleteTopics' results)."""
    def view(answer: Any) -> Any:
        return {**answer, field: sorted(answer[field], key=lambda r: r.name or "")}
    return view


def init_producer_id(ctx: Ctx, label: str, version: int) -> Any:
    """InitProducerId for an idempotent producer, retried while the broker says it is not
    ready (Kafka asks its controller for a block of ids first: COORDINATOR_LOAD_IN_PROGRESS
    for a moment after start); the answer that ended the wait is recorded."""
    body = {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1,
            "producer_epoch": -1}
    for _ in range(100):
        answer = ctx.target.conn.request(K.INIT_PRODUCER_ID, version, body)
        if isinstance(answer, str) or answer.error_code not in (14, 15):
            break
        time.sleep(0.1)
    ctx.note(label, answer)  # type: ignore[possibly-undefined]  # range(100) runs its body
    return answer


def hand_cases(api: int, version: int) -> Iterator[Case]:
    for name, fn, since in HAND.get(api, []):
        if version >= since:
            yield Case(api, version, name, fn)
