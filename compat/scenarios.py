"""The scenarios: each a function `(adapter, bootstrap) -> note or None`, run once per client.

A scenario sets up what it needs through `wire` (raw requests: the neutral ground), drives the
client under test through its adapter, and checks both what the broker holds (through `wire`
again) and what the client reads back. It passes by returning (optionally with a note for the
matrix's footnotes, e.g. "read side only"), is not applicable when the adapter raises
`NotApplicable`, and fails on any other exception. Every scenario uses its own topics and groups,
so scenarios can run side by side on one broker.
"""
from __future__ import annotations

import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Callable

from compat import wire
from compat.base import (
    READ_COMMITTED, READ_UNCOMMITTED, Adapter, Got, Member, NotApplicable, ProduceFailed, Rec,
    Txn, stop_all, wait_for,
)
from protocol.records.batch import Compression
from protocol.records.record import Record, decode_control_record

T0 = 1_700_000_000_000  # explicit timestamps: 2023-11-14


@dataclass(frozen=True)
class Scenario:
    id: str
    title: str
    run: Callable[[Adapter, str], "str | None"]
    timeout: float = 90.0  # seconds before its worker is killed


SCENARIOS: dict[str, Scenario] = {}


RunFn = Callable[[Adapter, str], "str | None"]


def scenario(id: str, title: str, *, timeout: float = 90.0) -> Callable[[RunFn], RunFn]:
    def register(fn: RunFn) -> RunFn:
        SCENARIOS[id] = Scenario(id, title, fn, timeout)
        return fn
    return register


def unique(a: Adapter, what: str) -> str:
    client = "".join(c for c in a.name if c.isalnum())
    return f"{what}-{client}-{uuid.uuid4().hex[:8]}"


# -- checks ------------------------------------------------------------------------------------

def _expected_partition(r: Rec) -> int:
    return 0 if r.partition is None else r.partition


def _check_ts(want: Rec, got_ts: int, what: str) -> None:
    if want.timestamp is not None:
        assert got_ts == want.timestamp, f"{what}: timestamp {got_ts} != {want.timestamp}"
    else:  # stamped by the client: about now
        now = int(time.time() * 1000)
        assert abs(got_ts - now) < 600_000, f"{what}: timestamp {got_ts} is not about now"


def check_stored(bootstrap: str, topic: str, sent: list[Rec]) -> None:
    """What the broker holds, per partition and in order, is exactly `sent`."""
    for p in sorted({_expected_partition(r) for r in sent}):
        want = [r for r in sent if _expected_partition(r) == p]
        have = [rec for _, recs in wire.batches(bootstrap, topic, p) for rec in recs]
        assert [(h.key, h.value, tuple(h.headers)) for h in have] == \
            [(r.key, r.value, r.headers) for r in want], \
            f"broker holds {_short(have)} in {topic}-{p}, sent {_short(want)}"
        for r, h in zip(want, have):
            _check_ts(r, h.timestamp, f"stored offset {h.offset}")


def check_read(sent: list[Rec], got: list[Got]) -> None:
    """The client read every record once, in order per partition, offsets from 0."""
    for p in sorted({_expected_partition(r) for r in sent} | {g.partition for g in got}):
        want = [r for r in sent if _expected_partition(r) == p]
        have = sorted((g for g in got if g.partition == p), key=lambda g: g.offset)
        assert [g.offset for g in have] == list(range(len(want))), \
            f"read offsets {[g.offset for g in have][:20]} of partition {p}, " \
            f"expected 0..{len(want) - 1}"
        for r, g in zip(want, have):
            assert (g.key, g.value, g.headers) == (r.key, r.value, r.headers), \
                f"read {_short([g])} at {p}/{g.offset}, sent {_short([r])}"
            _check_ts(r, g.timestamp, f"read offset {g.offset}")


def _short(items: list) -> str:
    text = repr(items)
    return text if len(text) < 200 else text[:200] + "..."


def _placed(a: Adapter, recs: list[Rec], partitions: int) -> tuple[list[Rec], int]:
    """`recs` as they are when the client can choose partitions, else all left to the
    partitioner on a one-partition topic (so every record lands on partition 0)."""
    if a.cannot("partition") is None:
        return recs, partitions
    return [Rec(r.key, r.value, r.headers, r.timestamp, None) for r in recs], 1


def neutral_records(bootstrap: str, topic: str, values: list[bytes], partitions: int) -> None:
    """values[i] to partition i % partitions, one batch per partition."""
    for p in range(partitions):
        recs = [Record(f"k{i}".encode(), v) for i, v in enumerate(values) if i % partitions == p]
        if recs:
            wire.produce(bootstrap, topic, p, recs)


# -- produce / consume -------------------------------------------------------------------------

@scenario("roundtrip", "Round trip: keys, null keys, null and empty values, headers")
def roundtrip(a: Adapter, bootstrap: str) -> str | None:
    notes = []
    null_header: bytes | None = None
    if reason := a.cannot("null-header-value"):
        null_header = b"not-null"
        notes.append(f"no null header value: {reason}")
    recs = [
        Rec(b"key-0", b"value-0", (("h1", b"one"), ("h2", b"")), partition=0),
        Rec(None, b"no-key", partition=0),
        Rec(b"tombstone", None, partition=0),
        Rec(b"empty-value", b"", partition=0),
        Rec(b"", b"empty-key", partition=0),
        Rec(b"null-header", b"v", (("nh", null_header), ("h", b"x")), partition=0),
        Rec(b"after", b"edge-cases", partition=0),
    ]
    for p in (1, 2):
        recs += [Rec(f"k{p}-{i}".encode(), f"p{p}-value-{i:03d}".encode(), partition=p)
                 for i in range(15)]
    recs, partitions = _placed(a, recs, 3)
    if partitions == 1:
        notes.append(f"one partition: {a.cannot('partition')}")
    topic = unique(a, "roundtrip")
    wire.create_topic(bootstrap, topic, partitions)
    a.produce(bootstrap, topic, recs)
    check_stored(bootstrap, topic, recs)
    check_read(recs, a.consume(bootstrap, topic, list(range(partitions)), len(recs)))
    return "; ".join(notes) or None


@scenario("timestamps", "Explicit record timestamps (CreateTime) written and read back")
def timestamps(a: Adapter, bootstrap: str) -> str | None:
    # Not monotonic, and one far in the past (not 0: librdkafka reads 0 as "now").
    stamps = [T0 + 5000, T0, T0 + 1, T0 + 86_400_000, T0 + 2, 1000, T0 + 3]
    recs = [Rec(f"k{i}".encode(), f"v{i}".encode(), timestamp=ts, partition=0)
            for i, ts in enumerate(stamps)]
    recs, _ = _placed(a, recs, 1)
    topic = unique(a, "timestamps")
    wire.create_topic(bootstrap, topic, 1)
    note = None
    if reason := a.cannot("timestamp"):
        wire.produce(bootstrap, topic, 0, [Record(r.key, r.value, (), r.timestamp) for r in recs])
        note = f"read side only (written raw): {reason}"
    else:
        a.produce(bootstrap, topic, recs)
    check_stored(bootstrap, topic, recs)
    check_read(recs, a.consume(bootstrap, topic, [0], len(recs)))
    return note


def _codec_scenario(codec: str) -> None:
    @scenario(f"codec-{codec}", f"Compression: {codec} written, stored as {codec}, read back")
    def run(a: Adapter, bootstrap: str) -> str | None:
        if reason := a.cannot(f"codec:{codec}"):
            raise NotApplicable(reason)
        recs = [Rec(f"key-{i}".encode(), (f"{codec} value {i:04d} " * 20).encode(),
                    (("i", str(i).encode()),), partition=i % 2) for i in range(60)]
        recs, partitions = _placed(a, recs, 2)
        topic = unique(a, codec)
        wire.create_topic(bootstrap, topic, partitions)
        a.produce(bootstrap, topic, recs, codec=codec)
        stored = {h.compression.name for p in range(partitions)
                  for h, _ in wire.batches(bootstrap, topic, p)}
        assert stored == {codec.upper()}, f"batches stored with {sorted(stored)}, not {codec}"
        check_stored(bootstrap, topic, recs)
        check_read(recs, a.consume(bootstrap, topic, list(range(partitions)), len(recs)))
        return None


for _codec in ("gzip", "snappy", "lz4", "zstd"):
    _codec_scenario(_codec)


# -- groups ------------------------------------------------------------------------------------

# (state, assignor, member id -> its partitions of topic) of a group, by (bootstrap, group, topic)
GroupLook = Callable[[str, str, str], tuple[str, str, dict[str, set[int]]]]


def classic_look(bootstrap: str, group: str, topic: str
                 ) -> tuple[str, str, dict[str, set[int]]]:
    """A classic group per DescribeGroups (the assignor is the protocol the group chose)."""
    state, assignor, members = wire.group_members(bootstrap, group)
    return state, assignor, {mid: set(parts.get(topic, [])) for mid, (_, parts) in members.items()}


@scenario("group-rebalance", "A group of three: two share six partitions, a third joins, "
          "rebalance to 2/2/2", timeout=150)
def group_rebalance(a: Adapter, bootstrap: str) -> str | None:
    return group_of_three(a, bootstrap, "grp", lambda t, g: a.start_member(bootstrap, t, g))


@scenario("group-cooperative", "The cooperative-sticky assignor: two share six partitions, a "
          "third joins, 2/2/2 with no partition moved between the first two", timeout=150)
def group_cooperative(a: Adapter, bootstrap: str) -> str | None:
    return group_of_three(a, bootstrap, "coop",
                          lambda t, g: a.start_member_as(bootstrap, t, g, cooperative=True),
                          sticky("cooperative-sticky"))


def sticky(assignor: str) -> Snapshot:
    """The check that the group chose `assignor` and that the third member's join moved no
    partition between the first two (each kept a subset of what it had)."""
    def check(topic: str, before: dict[str, set[int]], after: dict[str, set[int]],
              chosen: str) -> None:
        assert chosen == assignor, f"the group chose the {chosen!r} assignor"
        for member, had in before.items():
            now = after.get(member)
            assert now is not None, f"member {member} gone after the third joined"
            assert now <= had, f"member {member} had {sorted(had)}, now {sorted(now)}: " \
                "a partition moved between the first two members"
    return check


Snapshot = Callable[[str, dict[str, set[int]], dict[str, set[int]], str], None]


def group_of_three(a: Adapter, bootstrap: str, what: str,
                   start: Callable[[str, str], Member], check: Snapshot | None = None,
                   look: GroupLook = classic_look) -> str | None:
    """Two members started with `start(topic, group)` share six partitions 3/3 and take 60
    records, a third joins, 2/2/2, 60 more records are taken by all three, all leave and the
    group has committed the end of every partition. `check(topic, before, after, assignor)`
    judges the assignments before and after the third joined; `look` sees the group."""
    topic, group = unique(a, what), unique(a, "g")
    wire.create_topic(bootstrap, topic, 6)
    first = [f"a-{i}".encode() for i in range(60)]
    neutral_records(bootstrap, topic, first, 6)
    members: list[Member] = []
    try:
        members.append(start(topic, group))
        members.append(start(topic, group))

        def taken() -> set[bytes]:
            return {v for m in members for v in m.values()}

        def shared_by(n: int) -> bool:
            state, _, assigned = look(bootstrap, group, topic)
            parts = list(assigned.values())
            sizes = sorted(len(p) for p in parts)
            return state == "Stable" and len(parts) == n and \
                sorted(x for p in parts for x in p) == list(range(6)) and \
                sizes == sorted([6 // n + (1 if i < 6 % n else 0) for i in range(n)])

        wait_for(lambda: set(first) <= taken(), 60, "two members to take the first 60 records")
        wait_for(lambda: shared_by(2), 30, "a stable group of two sharing 6 partitions 3/3")
        _, _, before = look(bootstrap, group, topic)
        members.append(start(topic, group))
        wait_for(lambda: shared_by(3), 60, "the rebalance to three members with 2/2/2")
        if check is not None:
            _, assignor, after = look(bootstrap, group, topic)
            check(topic, before, after, assignor)
        second = [f"b-{i}".encode() for i in range(60)]
        neutral_records(bootstrap, topic, second, 6)
        wait_for(lambda: set(second) <= taken(), 60, "the second 60 records after the rebalance")
        for i, m in enumerate(members):
            assert set(m.values()) & set(second), f"member {i + 1} took nothing after the rebalance"
        counts = Counter(v for m in members for v in m.values())
        # Give periodic auto-commits up to 5 s to reach the end before the members leave one
        # by one: a member's final commit sent while the group rebalances for another's
        # leave is refused (REBALANCE_IN_PROGRESS in CompletingRebalance, as Kafka refuses it),
        # so a client that had not auto-committed yet would lose it. Clients that commit only
        # when they stop are judged after the stop, below.
        settle = time.monotonic() + 5
        while time.monotonic() < settle and wire.committed(
                bootstrap, group, topic, list(range(6))) != {p: 20 for p in range(6)}:
            time.sleep(0.1)
    except BaseException:
        for m in members:
            print("member:", m.debug())
        raise
    finally:
        stop_all(members)
    wait_for(lambda: look(bootstrap, group, topic)[0] == "Empty", 30,
             "the group to be empty once every member left")
    committed = wire.committed(bootstrap, group, topic, list(range(6)))
    assert committed == {p: 20 for p in range(6)}, \
        f"committed {committed} once every member left, not the end of every partition (20)"
    if any(n > 1 for n in counts.values()):  # allowed: commits are at least once
        return "some records were taken twice around the rebalance (at-least-once delivery)"
    return None


@scenario("group-static", "Static membership: a member with a group.instance.id restarts "
          "within the session timeout and gets its partitions back without a rebalance",
          timeout=120)
def group_static(a: Adapter, bootstrap: str) -> str | None:
    topic, group = unique(a, "static"), unique(a, "g")
    wire.create_topic(bootstrap, topic, 4)
    first = [f"a-{i}".encode() for i in range(40)]
    neutral_records(bootstrap, topic, first, 4)  # value i on partition i % 4
    members: dict[str, Member] = {}
    try:
        members["a"] = a.start_member_as(bootstrap, topic, group, instance_id="member-a")
        members["b"] = a.start_member_as(bootstrap, topic, group, instance_id="member-b")

        def taken() -> set[bytes]:
            return {v for m in members.values() for v in m.values()}

        def by_instance() -> tuple[str, dict[str | None, tuple[str, set[int]]]]:
            state, _, found = wire.group_members(bootstrap, group)
            return state, {inst: (mid, set(parts.get(topic, [])))
                           for mid, (inst, parts) in found.items()}

        def settled() -> bool:
            state, found = by_instance()
            return state == "Stable" and set(found) == {"member-a", "member-b"} and \
                sorted(p for _, parts in found.values() for p in parts) == [0, 1, 2, 3] and \
                all(parts for _, parts in found.values())

        wait_for(lambda: set(first) <= taken(), 60, "two static members to take 40 records")
        wait_for(settled, 30, "a stable group of member-a and member-b sharing 4 partitions")
        _, before = by_instance()
        members.pop("a").stop()  # a static member closes without leaving
        states = set()
        restarted = a.start_member_as(bootstrap, topic, group, instance_id="member-a")
        members["a"] = restarted

        def rejoined() -> bool:
            state, found = by_instance()
            states.add(state)
            return "member-a" in found and found["member-a"][0] != before["member-a"][0]

        wait_for(rejoined, 20, "member-a to rejoin under a new member id")
        state, after = by_instance()
        assert states == {"Stable"} and state == "Stable", \
            f"the group went through {sorted(states | {state})} when member-a restarted"
        assert after["member-b"] == before["member-b"], \
            f"member-b went from {before['member-b']} to {after['member-b']}"
        assert after["member-a"][1] == before["member-a"][1], \
            f"member-a had {sorted(before['member-a'][1])}, got {sorted(after['member-a'][1])}"
        second = [f"b-{i}".encode() for i in range(40)]
        neutral_records(bootstrap, topic, second, 4)
        wait_for(lambda: set(second) <= taken(), 30, "the 40 records after the restart")
        for value in restarted.values():
            p = int(value.split(b"-")[1]) % 4
            assert p in before["member-a"][1], \
                f"the restarted member-a took {value!r} of partition {p}, not one of its own"
        assert set(restarted.values()) & set(second), "the restarted member-a took nothing"
    except BaseException:
        for m in members.values():
            print("member:", m.debug())
        raise
    finally:
        stop_all(members.values())
    return None


@scenario("commit-resume", "Commit and resume: a group takes 8 of 20 records and commits, "
          "then resumes with the other 12")
def commit_resume(a: Adapter, bootstrap: str) -> str | None:
    return commit_and_resume(a, bootstrap, a.consume_group)


def commit_and_resume(a: Adapter, bootstrap: str,
                      consume: Callable[[str, str, str, int], list[Got]]) -> str | None:
    """The commit-resume scenario with `consume(bootstrap, topic, group, count)`."""
    topic, group = unique(a, "commit"), unique(a, "g")
    wire.create_topic(bootstrap, topic, 2)
    values = [f"c-{i:02d}".encode() for i in range(20)]
    neutral_records(bootstrap, topic, values, 2)
    first = consume(bootstrap, topic, group, 8)
    assert len(first) == 8, f"took {len(first)} records, asked for 8"
    committed = wire.committed(bootstrap, group, topic, [0, 1])
    for p in (0, 1):
        offsets = sorted(g.offset for g in first if g.partition == p)
        assert offsets == list(range(len(offsets))), f"partition {p}: took offsets {offsets}"
        if offsets:
            assert committed[p] == len(offsets), \
                f"partition {p}: committed {committed[p]} after taking offsets {offsets}"
        else:
            assert committed[p] in (-1, 0), f"partition {p}: committed {committed[p]}, took none"
    note = _client_sees(a, bootstrap, group, topic, committed)
    second = consume(bootstrap, topic, group, 12)
    got1, got2 = [g.value for g in first], [g.value for g in second]
    # A value may be None (a record that is not one of these), which sorts with no bytes:
    # the multisets are compared, and what was read twice is listed in repr's order.
    again = set(got1) & set(got2)
    assert not again, f"read again after resuming: {sorted(again, key=repr)}"
    assert Counter(got1 + got2) == Counter(values), \
        f"missing after resuming: {sorted(set(values) - set(got1 + got2))}"
    assert (now := wire.committed(bootstrap, group, topic, [0, 1])) == {0: 10, 1: 10}, \
        f"committed {now} after reading everything"
    _client_sees(a, bootstrap, group, topic, now)
    return note


def _client_sees(a: Adapter, bootstrap: str, group: str, topic: str,
                 raw: dict[int, int]) -> str | None:
    """The client's view of the committed offsets is the broker's (where it has one)."""
    try:
        seen = a.committed(bootstrap, group, topic, sorted(raw))
    except NotApplicable as exc:
        return f"committed offsets checked with raw OffsetFetch only: {exc}"
    want = {p: o if o > 0 else -1 for p, o in raw.items()}  # 0 and none alike: nothing read
    seen = {p: o if o > 0 else -1 for p, o in seen.items()}
    assert seen == want, f"the client reports committed offsets {seen}, the broker {want}"
    return None


# -- seeking -----------------------------------------------------------------------------------

def _seek_topic(a: Adapter, bootstrap: str, what: str) -> tuple[str, list[Record]]:
    """Ten records, timestamps T0 + 1000 i: 0-4 in one gzip batch, 5-9 one batch each."""
    topic = unique(a, what)
    wire.create_topic(bootstrap, topic, 1)
    recs = [Record(f"k{i}".encode(), f"seek-{i}".encode(), (), T0 + 1000 * i) for i in range(10)]
    wire.produce(bootstrap, topic, 0, recs[:5], Compression.GZIP)
    for r in recs[5:]:
        wire.produce(bootstrap, topic, 0, [r])
    return topic, recs


def _check_from(got: list[Got], recs: list[Record], start: int) -> None:
    assert [(g.offset, g.value) for g in got] == \
        [(i, recs[i].value) for i in range(start, len(recs))], \
        f"read {[(g.offset, g.value) for g in got]}, expected offsets {start}..{len(recs) - 1}"


@scenario("seek-offset", "Seek to an offset (inside a compressed batch, and past it)")
def seek_offset(a: Adapter, bootstrap: str) -> str | None:
    topic, recs = _seek_topic(a, bootstrap, "seekoff")
    _check_from(a.consume_from(bootstrap, topic, 0, 3, 7), recs, 3)
    _check_from(a.consume_from(bootstrap, topic, 0, 7, 3), recs, 7)
    return None


@scenario("offsets-for-times", "Offsets for times: the first offset at or after a timestamp "
          "(exact, between records, inside a compressed batch, past the last record)")
def offsets_for_times(a: Adapter, bootstrap: str) -> str | None:
    topic, recs = _seek_topic(a, bootstrap, "oft")
    for ts, want in ((T0 - 5, 0), (T0 + 2000, 2), (T0 + 2500, 3), (T0 + 5500, 6),
                     (T0 + 9000, 9), (T0 + 9001, None)):
        found = a.offsets_for_times(bootstrap, topic, {0: ts})
        expected = None if want is None else (want, recs[want].timestamp)
        assert found == {0: expected}, f"offsets for time {ts - T0:+} ms after T0: {found}, " \
            f"expected {expected}"
    return None


@scenario("seek-timestamp", "Seek to a timestamp (offsets for times), then read from there")
def seek_timestamp(a: Adapter, bootstrap: str) -> str | None:
    topic, recs = _seek_topic(a, bootstrap, "seekts")
    _check_from(a.consume_from_time(bootstrap, topic, 0, T0 + 2500, 7), recs, 3)
    _check_from(a.consume_from_time(bootstrap, topic, 0, T0 + 6000, 4), recs, 6)
    return None


# -- administration ----------------------------------------------------------------------------

@scenario("admin-topics", "Admin: create (with a config), list, describe, add partitions, "
          "delete a topic")
def admin_topics(a: Adapter, bootstrap: str) -> str | None:
    topic = unique(a, "admin")
    a.create_topic(bootstrap, topic, 3, {"retention.ms": "3600000"})
    # The broker that took the create answers once its own metadata leads every partition
    # (or at once, for a client that sends timeout_ms 0); the bootstrap broker asked here
    # may be another one of a cluster or node, which learns of the topic after (`_settles`).
    _settles(lambda: wire.partition_count(bootstrap, topic), 3,
             "the topic's partitions at the bootstrap broker (not created with 3 partitions)")
    assert wire.topic_configs(bootstrap, topic)["retention.ms"] == "3600000", \
        "created without its retention.ms"
    wait_for(lambda: topic in a.list_topics(bootstrap), 10, "the topic in the client's list")
    assert (n := a.partition_count(bootstrap, topic)) == 3, f"described with {n} partitions"
    a.add_partitions(bootstrap, topic, 5)
    _settles(lambda: wire.partition_count(bootstrap, topic), 5,
             "the topic's partitions at the bootstrap broker (partitions not added)")
    wait_for(lambda: a.partition_count(bootstrap, topic) == 5, 10,
             "the client to describe 5 partitions")
    a.delete_topic(bootstrap, topic)
    wait_for(lambda: wire.partition_count(bootstrap, topic) is None, 10, "the topic to go")
    wait_for(lambda: topic not in a.list_topics(bootstrap), 10,
             "the topic to leave the client's list")
    return None


@scenario("admin-configs", "Admin: describe a topic's configs, alter one, delete the override")
def admin_configs(a: Adapter, bootstrap: str) -> str | None:
    """The reads after each alter wait for the value (`_settles`): a client sends its alter
    to the broker it picks (the least loaded one: kafka-python, librdkafka, Kafka's Java
    admin), which in a cluster need not be the one a describe then asks, and Kafka promises
    the other brokers the change only as they catch up with the metadata (KRaft: the
    controller acknowledges the alter once committed, each broker applies it when it
    replays the record; its Admin javadoc says the same of a created topic). The value read
    must still be exactly the one set."""
    topic = unique(a, "configs")
    wire.create_topic(bootstrap, topic, 1, {"cleanup.policy": "delete"})
    described = a.describe_configs(bootstrap, topic)
    for name, value in (("retention.ms", "604800000"), ("max.message.bytes", "1048588"),
                        ("cleanup.policy", "delete")):
        assert described.get(name) == value, f"described {name}={described.get(name)!r}"
    assert len(described) >= 20, f"only {len(described)} configs described"
    a.set_config(bootstrap, topic, "retention.ms", "3600000")
    _settles(lambda: wire.topic_configs(bootstrap, topic)["retention.ms"], "3600000",
             "retention.ms at the bootstrap broker after the alter (not altered)")
    _settles(lambda: a.describe_configs(bootstrap, topic).get("retention.ms"), "3600000",
             "retention.ms described by the client after the alter")
    a.delete_config(bootstrap, topic, "retention.ms")
    _settles(lambda: wire.topic_configs(bootstrap, topic)["retention.ms"], "604800000",
             "retention.ms at the bootstrap broker after the delete (override not deleted)")
    _settles(lambda: a.describe_configs(bootstrap, topic).get("retention.ms"), "604800000",
             "retention.ms described by the client after the delete")
    return None


def _settles(read: Callable[[], object], want: object, what: str,
             timeout: float = 15.0) -> None:
    """Read until the value is exactly `want`; fail with the last one read after `timeout`
    seconds (a change that never reaches the broker asked)."""
    deadline = time.monotonic() + timeout
    while (got := read()) != want:
        assert time.monotonic() < deadline, f"{what}: {got!r} after {timeout:.0f} s, not {want!r}"
        time.sleep(0.2)


@scenario("admin-groups", "Admin: list and describe a live group, then (empty) alter its "
          "offsets and delete it", timeout=120)
def admin_groups(a: Adapter, bootstrap: str) -> str | None:
    topic, group = unique(a, "admgrp"), unique(a, "g")
    wire.create_topic(bootstrap, topic, 2)
    values = [f"v-{i}".encode() for i in range(10)]
    neutral_records(bootstrap, topic, values, 2)
    member = a.start_member(bootstrap, topic, group)
    try:
        wait_for(lambda: set(values) <= set(member.values()), 60, "the member to take 10 records")
        wait_for(lambda: wire.describe_group(bootstrap, group)[0] == "Stable", 30,
                 "a stable group")
        wait_for(lambda: group in a.list_groups(bootstrap), 10, "the group in the client's list")
        view = a.describe_group(bootstrap, group)
        _, assignor, _ = wire.group_members(bootstrap, group)
        assert view.state.lower() == "stable", f"described as {view.state!r}"
        assert view.assignor == assignor, f"assignor {view.assignor!r}, the broker: {assignor!r}"
        assert [{t: sorted(p) for t, p in m.items()} for m in view.members] == \
            [{topic: [0, 1]}], f"members described as {view.members}"
    except BaseException:
        print("member:", member.debug())
        raise
    finally:
        member.stop()
    wait_for(lambda: wire.describe_group(bootstrap, group)[0] == "Empty", 30, "an empty group")
    view = a.describe_group(bootstrap, group)
    assert view.state.lower() == "empty" and not view.members, f"described as {view}"
    a.alter_group_offsets(bootstrap, group, topic, {0: 1, 1: 3})
    assert (now := wire.committed(bootstrap, group, topic, [0, 1])) == {0: 1, 1: 3}, \
        f"committed {now} after altering to 1 and 3"
    a.delete_group(bootstrap, group)
    assert (now := wire.committed(bootstrap, group, topic, [0, 1])) == {0: -1, 1: -1}, \
        f"committed {now} after deleting the group"
    wait_for(lambda: group not in a.list_groups(bootstrap), 10,
             "the group to leave the client's list")
    return None


@scenario("admin-logdirs", "Admin: describe log dirs, each partition's size as the bytes of "
          "its batches")
def admin_logdirs(a: Adapter, bootstrap: str) -> str | None:
    topic = unique(a, "logdirs")
    wire.create_topic(bootstrap, topic, 3)
    wire.produce(bootstrap, topic, 0, [Record(b"k", b"x" * 100)])
    for i in range(3):
        wire.produce(bootstrap, topic, 1, [Record(b"k", b"y" * 1000)] * (i + 1), Compression.GZIP)
    sizes = a.log_dir_sizes(bootstrap, topic)
    want = {p: sum(h.size for h, _ in wire.batches(bootstrap, topic, p)) for p in range(3)}
    assert want[2] == 0 and want[0] > 0, want
    assert sizes == want, f"described sizes {sizes}, the partitions hold {want} bytes"
    return None


# -- producer guarantees and limits ------------------------------------------------------------

@scenario("idempotent", "Idempotent producer: every batch carries a producer id, sequences "
          "run from 0 per partition")
def idempotent(a: Adapter, bootstrap: str) -> str | None:
    if reason := a.cannot("idempotence"):
        raise NotApplicable(reason)
    # Partition by partition, so that a client producing in several runs (kcat: one per
    # partition) still has one producer per partition.
    recs = [Rec(f"k{i}".encode(), f"idem-{p}-{i:03d}".encode(), partition=p)
            for p in range(3) for i in range(30)]
    recs, partitions = _placed(a, recs, 3)
    topic = unique(a, "idem")
    wire.create_topic(bootstrap, topic, partitions)
    a.produce(bootstrap, topic, recs, idempotent=True)
    check_stored(bootstrap, topic, recs)
    for p in range(partitions):
        seq, pids = 0, set()
        for header, batch in wire.batches(bootstrap, topic, p):
            assert header.producer_id >= 0, f"partition {p}: a batch without a producer id"
            assert header.base_sequence == seq, \
                f"partition {p}: base sequence {header.base_sequence}, expected {seq}"
            seq += len(batch)
            pids.add((header.producer_id, header.producer_epoch))
        assert len(pids) == 1, f"partition {p}: several producer ids/epochs {sorted(pids)}"
    return None


LIMIT = 100_000  # the topic's max.message.bytes


@scenario("max-message", f"A record batch just under the topic's max.message.bytes ({LIMIT}) "
          "is stored; one over it is refused")
def max_message(a: Adapter, bootstrap: str) -> str | None:
    topic = unique(a, "maxmsg")
    wire.create_topic(bootstrap, topic, 1, {"max.message.bytes": str(LIMIT)})
    near = Rec(b"near", b"n" * (LIMIT - 200), partition=0)
    over = Rec(b"over", b"o" * (LIMIT + 100), partition=0)
    (near,), _ = _placed(a, [near], 1)
    (over,), _ = _placed(a, [over], 1)
    a.produce(bootstrap, topic, [near])
    ((header, _),) = wire.batches(bootstrap, topic, 0)
    assert LIMIT - 300 <= header.size <= LIMIT, f"stored batch of {header.size} bytes"
    try:
        a.produce(bootstrap, topic, [over])
    except ProduceFailed as exc:
        text = str(exc)
        assert any(w in text.lower() for w in ("too large", "too_large", "larger than", "size")), \
            f"refused, but not for its size: {text}"
    else:
        raise AssertionError("a record over max.message.bytes was acknowledged")
    assert wire.list_offset(bootstrap, topic, 0) == 1, "the refused record was appended"
    check_read([near], a.consume(bootstrap, topic, [0], 1))
    return None


@scenario("partitions-100", "100 partitions: 400 keyed records by the client's partitioner, "
          "read back from all 100")
def partitions_100(a: Adapter, bootstrap: str) -> str | None:
    topic = unique(a, "p100")
    wire.create_topic(bootstrap, topic, 100)
    recs = [Rec(f"key-{i:03d}".encode(), f"value-{i:03d}".encode()) for i in range(400)]
    a.produce(bootstrap, topic, recs)
    stored: dict[tuple[int, int], tuple[bytes | None, bytes | None]] = {}
    for p in range(100):
        for _, batch in wire.batches(bootstrap, topic, p):
            for r in batch:
                stored[(p, r.offset)] = (r.key, r.value)
    assert sorted(stored.values()) == sorted((r.key, r.value) for r in recs), \
        f"the broker holds {len(stored)} records, sent {len(recs)}"
    used = {p for p, _ in stored}
    assert len(used) >= 90, f"keyed records landed on only {len(used)} of 100 partitions"
    got = a.consume(bootstrap, topic, list(range(100)), len(recs))
    read = {(g.partition, g.offset): (g.key, g.value) for g in got}
    assert len(got) == len(read), "some records read twice"
    assert read == stored, f"read {len(read)} records, the broker holds {len(stored)}"
    return None


# -- transactions ------------------------------------------------------------------------------

def _transaction_writer(a: Adapter) -> tuple[Adapter, str | None]:
    """The client that writes the transactions: `a`, or confluent-kafka (with the note) when
    `a` cannot."""
    reason = a.cannot("transactions")
    if reason is None:
        return a, None
    from compat.clients.confluent import ADAPTER as confluent
    if (missing := confluent.missing()) is not None:
        raise NotApplicable(f"{reason}; and no writer for the read side: {missing}")
    return confluent, f"read side only (written by confluent-kafka): {reason}"


def _check_markers(bootstrap: str, topic: str, partition: int, txns: list[Txn]) -> None:
    """The partition holds transactional data batches of one producer and, after each
    transaction's records, its commit or abort marker: the writer really used transactions."""
    markers, producers = [], set()
    for header, recs in wire.batches(bootstrap, topic, partition):
        if header.is_control:
            markers.append(decode_control_record(recs[0].key, recs[0].value).is_commit)
            producers.add(header.producer_id)
        elif header.is_transactional:
            producers.add(header.producer_id)
    want = [t.commit for t in txns]
    assert markers == want, f"partition {partition}: markers (commit=True) {markers}, not {want}"
    assert len(producers) == 1, f"partition {partition}: transactional producer ids {producers}"


@scenario("transactions", "Transactions: commit, abort, commit on two partitions with plain "
          "records written while each is open; read_committed sees the committed and plain "
          "ones and reaches the log end, read_uncommitted sees all")
def transactions(a: Adapter, bootstrap: str) -> str | None:
    writer, note = _transaction_writer(a)
    topic = unique(a, "txn")
    wire.create_topic(bootstrap, topic, 2)
    txns = [Txn(tuple(Rec(f"k{t}-{i}".encode(), f"txn{t}-p{i % 2}-{i // 2}".encode(),
                          partition=i % 2) for i in range(4)), commit)
            for t, commit in enumerate((True, False, True))]
    plain: list[tuple[int, bytes]] = []  # (partition, value), in the order written

    def while_open(t: int) -> None:
        # Inside the transaction's span of offsets (after its records, before its marker):
        # read_committed must keep these, aborted or not is a property of the producer.
        for p in (0, 1):
            value = f"plain{t}-p{p}".encode()
            wire.produce(bootstrap, topic, p, [Record(b"plain", value)])
            plain.append((p, value))

    writer.produce_transactions(bootstrap, topic, txns, f"compat-{topic}", while_open)
    assert len(plain) == 2 * len(txns), f"while_open ran for {len(plain) // 2} of {len(txns)}"
    everything: dict[int, list[bytes]] = {0: [], 1: []}
    committed: dict[int, list[bytes]] = {0: [], 1: []}
    for t, txn in enumerate(txns):
        for r in txn.recs:
            assert r.value is not None and r.partition is not None
            everything[r.partition].append(r.value)
            if txn.commit:
                committed[r.partition].append(r.value)
        for p, value in plain[2 * t:2 * t + 2]:
            everything[p].append(value)
            committed[p].append(value)
    end = {}
    for p in (0, 1):
        _check_markers(bootstrap, topic, p, txns)
        stored = [r for h, recs in wire.batches(bootstrap, topic, p) if not h.is_control
                  for r in recs]
        assert [r.value for r in stored] == everything[p], \
            f"partition {p}: the broker holds {_short([r.value for r in stored])}"
        end[p] = wire.list_offset(bootstrap, topic, p)
        assert end[p] == len(everything[p]) + len(txns), \
            f"partition {p}: log end {end[p]}, expected records and markers"
    offset_of = {(p, r.value): r.offset for p in (0, 1)
                 for h, recs in wire.batches(bootstrap, topic, p) if not h.is_control
                 for r in recs}
    for isolation, want in ((READ_COMMITTED, committed), (READ_UNCOMMITTED, everything)):
        count = sum(len(v) for v in want.values())
        got, positions = a.consume_to_end(bootstrap, topic, [0, 1], count, isolation)
        for p in (0, 1):
            have = sorted((g for g in got if g.partition == p), key=lambda g: g.offset)
            assert [g.value for g in have] == want[p], \
                f"{isolation}: read {_short([g.value for g in have])} from partition {p}, " \
                f"expected {_short(want[p])}"
            assert [g.offset for g in have] == [offset_of[(p, g.value)] for g in have], \
                f"{isolation}: partition {p} read at offsets {[g.offset for g in have]}"
        assert positions == end, \
            f"{isolation}: the consumer ended at {positions}, the log ends at {end} " \
            "(stuck before a transaction marker?)"
    return note

