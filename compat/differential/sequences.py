"""What a client sees over time, not only single answers: each a case filed under the API
version it exercises most (the group's under JoinGroup, the producer's under Produce...)."""
from __future__ import annotations

import struct
import time
from typing import Any, Iterator

from compat.differential.case import Case, Ctx
from compat.differential.corpus import (
    FETCH_V, LIST_V, META_V, batch, create, fetch_body, init_producer_id, list_body, metadata_body, produce,
    produce_body, setup_view, wait_gone,
)
from protocol.api_keys import ApiKey as K

JOIN_V, SYNC_V, HEARTBEAT_V, LEAVE_V, COMMIT_V, DESCRIBE_V = 7, 5, 4, 4, 8, 5


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def subscription(topic: str) -> bytes:
    """A consumer's subscription (ConsumerProtocol v0: the topic, no user data): Kafka 4's
    group coordinator reads the metadata of "consumer" groups, so it must be well formed."""
    return struct.pack(">h", 0) + struct.pack(">i", 1) + _string(topic) + struct.pack(">i", -1)


def assignment(topic: str, partitions: list[int]) -> bytes:
    """A consumer's assignment (ConsumerProtocol v0), well formed for the same reason."""
    return (struct.pack(">h", 0) + struct.pack(">i", 1) + _string(topic)
            + struct.pack(">i", len(partitions)) + b"".join(struct.pack(">i", p)
                                                            for p in partitions)
            + struct.pack(">i", -1))


def _join(group: str, member: str) -> dict:
    return {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
            "member_id": member, "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription(group)}], "reason": None}


def _sync(group: str, gen: int, member: str, assignments: list[tuple[str, bytes]]) -> dict:
    return {"group_id": group, "generation_id": gen, "member_id": member,
            "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": m, "assignment": a} for m, a in assignments]}


def _beat(group: str, gen: int, member: str) -> dict:
    return {"group_id": group, "generation_id": gen, "member_id": member,
            "group_instance_id": None}


def group_of_two(ctx: Ctx) -> None:
    """Join, sync, heartbeat, commit with one member; a second joins (a rebalance the first
    learns of by its heartbeat); both sync; the second leaves; the first rejoins alone."""
    g = ctx.topic()
    create(ctx, g, 2)
    one, two = ctx.target.conn, ctx.target.connect()
    m1 = ctx.ask("1 join without id", K.JOIN_GROUP, JOIN_V, _join(g, "")).member_id
    j1 = ctx.ask("1 join", K.JOIN_GROUP, JOIN_V, _join(g, m1), timeout=15)
    ctx.ask("1 sync", K.SYNC_GROUP, SYNC_V, _sync(g, j1.generation_id, m1, [(m1, assignment(g, [0, 1]))]))
    ctx.ask("1 heartbeat", K.HEARTBEAT, HEARTBEAT_V, _beat(g, j1.generation_id, m1))
    ctx.ask("1 commit", K.OFFSET_COMMIT, COMMIT_V, {
        "group_id": g, "generation_id_or_member_epoch": j1.generation_id, "member_id": m1,
        "group_instance_id": None, "topics": [{"name": g, "partitions": [
            {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
             "committed_metadata": ""}]}]})
    m2 = ctx.ask("2 join without id", K.JOIN_GROUP, JOIN_V, _join(g, ""), conn=two).member_id
    two.send(K.JOIN_GROUP, JOIN_V, _join(g, m2))  # parks until the first rejoins
    time.sleep(0.2)
    ctx.ask("1 heartbeat during rebalance", K.HEARTBEAT, HEARTBEAT_V,
            _beat(g, j1.generation_id, m1))
    one.send(K.JOIN_GROUP, JOIN_V, _join(g, m1))
    j1b = one.receive(15)
    ctx.note("1 rejoin", j1b)
    j2 = two.receive(15)
    ctx.note("2 join", j2)
    gen = j1b.generation_id
    ctx.ask("1 sync as leader", K.SYNC_GROUP, SYNC_V,
            _sync(g, gen, m1, [(m1, assignment(g, [0])), (m2, assignment(g, [1]))]))
    ctx.ask("2 sync", K.SYNC_GROUP, SYNC_V, _sync(g, gen, m2, []), conn=two)
    ctx.ask("2 heartbeat", K.HEARTBEAT, HEARTBEAT_V, _beat(g, gen, m2), conn=two)
    ctx.ask("1 stale generation commit", K.OFFSET_COMMIT, COMMIT_V, {
        "group_id": g, "generation_id_or_member_epoch": gen - 1, "member_id": m1,
        "group_instance_id": None, "topics": [{"name": g, "partitions": [
            {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
             "committed_metadata": ""}]}]})
    ctx.ask("describe stable", K.DESCRIBE_GROUPS, DESCRIBE_V,
            {"groups": [g], "include_authorized_operations": False})
    ctx.ask("2 leave", K.LEAVE_GROUP, LEAVE_V,
            {"group_id": g, "members": [{"member_id": m2, "group_instance_id": None}]},
            conn=two)
    ctx.ask("1 heartbeat after leave", K.HEARTBEAT, HEARTBEAT_V, _beat(g, gen, m1))
    j1c = ctx.ask("1 rejoin alone", K.JOIN_GROUP, JOIN_V, _join(g, m1), timeout=15)
    ctx.ask("1 heartbeat before sync", K.HEARTBEAT, HEARTBEAT_V,
            _beat(g, j1c.generation_id, m1))
    ctx.ask("unknown member heartbeat", K.HEARTBEAT, HEARTBEAT_V,
            _beat(g, j1c.generation_id, "nobody"))


def _commit(group: str, gen: int, member: str, offset: int) -> dict:
    return {"group_id": group, "generation_id_or_member_epoch": gen, "member_id": member,
            "group_instance_id": None, "topics": [{"name": group, "partitions": [
                {"partition_index": 0, "committed_offset": offset,
                 "committed_leader_epoch": -1, "committed_metadata": ""}]}]}


def commits_during_a_rebalance(ctx: Ctx) -> None:
    """OffsetCommit from a member in each phase of a rebalance (issue #35 §3): while the group
    prepares (current and stale generation), between the join and the sync (the new, the old
    and a future generation), from a member the rebalance dropped, and once Stable again."""
    g = ctx.topic()
    create(ctx, g, 2)
    one, two = ctx.target.conn, ctx.target.connect()
    m1 = ctx.ask("1 join without id", K.JOIN_GROUP, JOIN_V, _join(g, "")).member_id
    j1 = ctx.ask("1 join", K.JOIN_GROUP, JOIN_V, _join(g, m1), timeout=15)
    gen = j1.generation_id
    ctx.ask("1 sync", K.SYNC_GROUP, SYNC_V, _sync(g, gen, m1, [(m1, assignment(g, [0, 1]))]))
    m2 = ctx.ask("2 join without id", K.JOIN_GROUP, JOIN_V, _join(g, ""), conn=two).member_id
    two.send(K.JOIN_GROUP, JOIN_V, _join(g, m2))  # parks until the first rejoins
    time.sleep(0.2)
    ctx.ask("1 heartbeat while preparing", K.HEARTBEAT, HEARTBEAT_V, _beat(g, gen, m1))
    ctx.ask("1 commit while preparing", K.OFFSET_COMMIT, COMMIT_V, _commit(g, gen, m1, 1))
    ctx.ask("1 stale commit while preparing", K.OFFSET_COMMIT, COMMIT_V,
            _commit(g, gen - 1, m1, 2))
    ctx.ask("2 commit before its first generation", K.OFFSET_COMMIT, COMMIT_V,
            _commit(g, gen, m2, 3), conn=ctx.target.connect())
    one.send(K.JOIN_GROUP, JOIN_V, _join(g, m1))
    j1b = one.receive(15)
    ctx.note("1 rejoin", j1b)
    ctx.note("2 join", two.receive(15))
    new = j1b.generation_id
    ctx.ask("1 commit between join and sync", K.OFFSET_COMMIT, COMMIT_V,
            _commit(g, new, m1, 4))
    ctx.ask("1 old generation commit between join and sync", K.OFFSET_COMMIT, COMMIT_V,
            _commit(g, new - 1, m1, 5))
    ctx.ask("1 future generation commit", K.OFFSET_COMMIT, COMMIT_V, _commit(g, new + 1, m1, 6))
    ctx.ask("2 leave before its sync", K.LEAVE_GROUP, LEAVE_V,
            {"group_id": g, "members": [{"member_id": m2, "group_instance_id": None}]},
            conn=two)
    ctx.ask("2 commit after leaving", K.OFFSET_COMMIT, COMMIT_V, _commit(g, new, m2, 7),
            conn=two)
    ctx.ask("1 commit after the other left", K.OFFSET_COMMIT, COMMIT_V,
            _commit(g, new, m1, 8))
    j1c = ctx.ask("1 rejoin alone", K.JOIN_GROUP, JOIN_V, _join(g, m1), timeout=15)
    ctx.ask("1 sync alone", K.SYNC_GROUP, SYNC_V,
            _sync(g, j1c.generation_id, m1, [(m1, assignment(g, [0, 1]))]))
    ctx.ask("1 commit when stable", K.OFFSET_COMMIT, COMMIT_V,
            _commit(g, j1c.generation_id, m1, 9))
    ctx.ask("committed", K.OFFSET_FETCH, 7, {"group_id": g, "topics": None,
                                               "require_stable": False})


def idempotent_producer(ctx: Ctx) -> None:
    """A retried batch is a duplicate (same offsets, no second copy); a gap in the sequence
    is OUT_OF_ORDER_SEQUENCE_NUMBER; the right next sequence is taken."""
    t = ctx.topic()
    create(ctx, t)
    init = init_producer_id(ctx, "init", 4)
    pid, epoch = init.producer_id, init.producer_epoch

    def seq(n: int, first: int, ts: int) -> bytes:
        return batch(ctx, n, ts=ts, producer_id=pid, producer_epoch=epoch, base_sequence=first)
    v = ctx.version
    ctx.ask("seq 0", K.PRODUCE, v, produce_body(t, seq(3, 0, 0)))
    ctx.ask("seq 0 retried", K.PRODUCE, v, produce_body(t, seq(3, 0, 0)))
    ctx.ask("seq 5 (a gap)", K.PRODUCE, v, produce_body(t, seq(1, 5, 10)))
    ctx.ask("seq 3", K.PRODUCE, v, produce_body(t, seq(2, 3, 20)))
    ctx.ask("wrong epoch", K.PRODUCE, v, produce_body(
        t, batch(ctx, 1, ts=30, producer_id=pid, producer_epoch=epoch + 3, base_sequence=5)))
    ctx.ask("unknown producer id", K.PRODUCE, v, produce_body(
        t, batch(ctx, 1, ts=40, producer_id=pid + 1000, producer_epoch=0, base_sequence=0)))
    ctx.ask("fetch", K.FETCH, FETCH_V, fetch_body(t, 0))


def long_poll(ctx: Ctx) -> None:
    """A Fetch with max_wait 500 ms and no data answers after about 500 ms, empty."""
    t = ctx.topic()
    create(ctx, t)
    produce(ctx, t, batch(ctx, 1))
    began = time.monotonic()
    ctx.ask("answer", K.FETCH, ctx.version, fetch_body(t, 1, max_wait=500))
    elapsed = time.monotonic() - began
    ctx.note("answered after 0.45-1.5 s", 0.45 <= elapsed <= 1.5)
    began = time.monotonic()
    ctx.ask("min_bytes 0", K.FETCH, ctx.version, fetch_body(t, 1, max_wait=500, min_bytes=0))
    ctx.note("min_bytes 0 answered at once (< 0.3 s)", time.monotonic() - began < 0.3)


def offsets_across_segments(ctx: Ctx) -> None:
    """ListOffsets by timestamp where every batch is a segment of its own (segment.ms=1
    rolls on each append of records older than 1 ms)."""
    t = ctx.topic()
    create(ctx, t, configs={"segment.ms": "1"})
    for i in range(4):
        produce(ctx, t, batch(ctx, 2, ts=1000 * i), label=f"produce {i}")
    for label, ts in (("t0", ctx.t0), ("t0+1", ctx.t0 + 1), ("t0+1500", ctx.t0 + 1500),
                      ("t0+3001", ctx.t0 + 3001), ("past all", ctx.t0 + 9000),
                      ("max timestamp", -3), ("earliest", -2), ("latest", -1)):
        ctx.ask(label, K.LIST_OFFSETS, ctx.version, list_body(t, ts))


def delete_records_then_fetch(ctx: Ctx) -> None:
    t = ctx.topic()
    create(ctx, t)
    produce(ctx, t, batch(ctx, 5))
    ctx.ask("delete to 3", K.DELETE_RECORDS, ctx.version, {"topics": [{"name": t, "partitions": [
        {"partition_index": 0, "offset": 3}]}], "timeout_ms": 5000})
    ctx.ask("fetch 1", K.FETCH, FETCH_V, fetch_body(t, 1))
    ctx.ask("fetch 3", K.FETCH, FETCH_V, fetch_body(t, 3))
    ctx.ask("earliest", K.LIST_OFFSETS, LIST_V, list_body(t, -2))
    ctx.ask("by t0", K.LIST_OFFSETS, LIST_V, list_body(t, ctx.t0))


def delete_and_recreate(ctx: Ctx) -> None:
    t = ctx.topic()
    create(ctx, t, 2)
    produce(ctx, t, batch(ctx, 3), partition=1)
    ctx.ask("delete", K.DELETE_TOPICS, ctx.version, {"topics": [{"name": t}],
                                                     "topic_names": [t], "timeout_ms": 10000})
    wait_gone(ctx, t, 2)
    ctx.ask("metadata after delete", K.METADATA, META_V, metadata_body([t]))
    ctx.ask("produce after delete", K.PRODUCE, 9, produce_body(t, batch(ctx), 1))
    answer: Any = None
    for _ in range(50):  # deletion may still be under way: Kafka says so with an error
        answer = create(ctx.__class__(ctx.case, ctx.target, ctx.t0), t, 1)
        if answer.topics[0].error_code == 0:
            break
        time.sleep(0.1)
    ctx.note("re-created", setup_view(answer))
    ctx.ask("metadata after re-create", K.METADATA, META_V, metadata_body([t]))
    ctx.ask("latest", K.LIST_OFFSETS, LIST_V, list_body(t, -1))
    ctx.ask("fetch", K.FETCH, FETCH_V, fetch_body(t, 0))
    ctx.ask("old partition", K.FETCH, FETCH_V, fetch_body(t, 0, partition=1))


def _session_fetch(topic: str, session_id: int, epoch: int, offsets: dict[int, int],
                   forgotten: list[int] | None = None) -> dict:
    body = fetch_body(topic, 0)
    body.update(session_id=session_id, session_epoch=epoch, min_bytes=0)
    body["topics"] = [{"topic": topic, "partitions": [
        {**body["topics"][0]["partitions"][0], "partition": p, "fetch_offset": offset}
        for p, offset in offsets.items()]}] if offsets else []
    body["forgotten_topics_data"] = [{"topic": topic, "partitions": forgotten}] \
        if forgotten else []
    return body


def fetch_sessions(ctx: Ctx) -> None:
    """An incremental fetch session (KIP-227): opened by a full fetch (epoch 0), answered
    with nothing when nothing changed, with the one partition that got data, a wrong epoch
    and an unknown id refused, a partition forgotten, the session closed (epoch -1)."""
    t = ctx.topic()
    create(ctx, t, 2)
    produce(ctx, t, batch(ctx, 2))
    opened = ctx.ask("open (epoch 0)", K.FETCH, ctx.version, _session_fetch(t, 0, 0, {0: 0, 1: 0}))
    sid = opened.session_id
    ctx.note("a session was opened", sid != 0)
    ctx.ask("offset moved, nothing new", K.FETCH, ctx.version, _session_fetch(t, sid, 1, {0: 2}))
    produce(ctx, t, batch(ctx, 1), partition=1, label="produce to partition 1")
    answer = ctx.ask("data on partition 1", K.FETCH, ctx.version, _session_fetch(t, sid, 2, {}))
    ctx.note("the same session", answer.session_id == sid)
    ctx.ask("wrong epoch", K.FETCH, ctx.version, _session_fetch(t, sid, 7, {}))
    ctx.ask("unknown session", K.FETCH, ctx.version, _session_fetch(t, 0, 3, {}))
    ctx.ask("forget partition 1", K.FETCH, ctx.version,
            _session_fetch(t, sid, 3, {}, forgotten=[1]))
    closed = ctx.ask("close (epoch -1)", K.FETCH, ctx.version, _session_fetch(t, sid, -1, {0: 0}))
    ctx.note("closing answers sessionless", closed.session_id == 0)
    ctx.ask("closed session", K.FETCH, ctx.version, _session_fetch(t, sid, 4, {}))


SEQUENCES = [(K.JOIN_GROUP, JOIN_V, "sequence: two members, rebalance, leave", group_of_two),
             (K.OFFSET_COMMIT, COMMIT_V, "sequence: commits in each phase of a rebalance",
              commits_during_a_rebalance),
             (K.PRODUCE, 9, "sequence: idempotent retry and sequence errors",
              idempotent_producer),
             (K.FETCH, FETCH_V, "sequence: long poll 500 ms without data", long_poll),
             (K.FETCH, FETCH_V, "sequence: incremental fetch session and its errors",
              fetch_sessions),
             (K.LIST_OFFSETS, LIST_V, "sequence: by timestamp across segments",
              offsets_across_segments),
             (K.DELETE_RECORDS, 2, "sequence: delete records then fetch below the start",
              delete_records_then_fetch),
             (K.DELETE_TOPICS, 6, "sequence: delete and re-create with the same name",
              delete_and_recreate)]


def sequence_cases() -> Iterator[Case]:
    for api, version, name, fn in SEQUENCES:
        yield Case(api, version, name, fn)
