"""The rebalance benchmark (issue #33 item 4): what one member joining costs a busy group.

Run through `bin/pybroker-bench --workloads rebalance [--peers kafka] [--quick]`
(tests/bench/peer_bench.py wires it and prints the table).

A topic of 100 partitions takes a steady load (one confluent-kafka producer, RATE records/s
of 100 B, round-robin over the partitions, so each partition gets a record every 50 ms). Ten
members of a group consume it, each a confluent-kafka Consumer polling continuously in its
own thread and noting the time of every batch it gets and the partitions in it. Once the ten
hold a balanced assignment and every partition flows, an eleventh member subscribes. From
that moment (the join) until the eleven hold a balanced assignment again:

- recovery: the time from the join until every partition has been consumed again by its
  final owner, after that owner (last) got it. A partition that never moved counts from the
  join itself, so only moved partitions, or an eager rebalance that revokes everything, make
  this long;
- stop: for each of the ten old members, the longest time it received nothing (from the join
  to the end); how many of them stopped at all, i.e. had a gap longer than STOP_FACTOR times
  the baseline (and at least STOP_FLOOR). The baseline is the longest gap any old member had
  in a window of steady load as long as the rebalance's, right after it (a longer window
  holds longer gaps by chance alone, so the two windows are of one length); and how many
  old members gave a partition up, since those are the ones a rebalance may stop;
- emptied: from the members' rebalance callbacks rather than their records, how many old
  members were left holding no partition at all, and for how long at most. An eager
  rebalance revokes everything from everyone; when the members' heartbeats are in step (as
  they are after a classic rebalance: each starts its timer at the SyncGroup answer) that
  stop can be shorter than the gaps the load makes anyway, so the gap figures alone miss it.

Three modes (MODES): classic eager (`partition.assignment.strategy=range`), classic
cooperative (`cooperative-sticky`), and KIP-848 (`group.protocol=consumer`, the broker's
default assignor). Every setting else is the client's and the broker's default: classic
members heartbeat every 3 s (heartbeat.interval.ms), consumer-protocol members as the broker
says (group.consumer.heartbeat.interval.ms, 5 s), so both wait for a heartbeat to learn of
the rebalance, as deployed consumers do.

The pure helpers (longest_gap, last_acquired, recovered_at, balanced) are unit-tested in the
fast tier (tests/test_bench_rebalance_gaps.py); nothing here is timed by a test.
"""
from __future__ import annotations

import functools
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

PARTITIONS = 100
MEMBERS = 10
RATE = 2000  # records/s over the whole topic
SIZE = 100
STOP_FACTOR = 2.0
STOP_FLOOR = 0.25  # s
SETTLE_TIMEOUT = 90.0  # s, for the ten to settle and for the eleven to settle again
STABLE = 1.0  # s a balanced assignment must hold before it counts as the end

# mode name -> (label, the members' extra settings)
MODES: dict[str, tuple[str, dict[str, str]]] = {
    "eager": ("classic eager (range)", {"partition.assignment.strategy": "range"}),
    "cooperative": ("classic cooperative (cooperative-sticky)",
                    {"partition.assignment.strategy": "cooperative-sticky"}),
    "consumer": ("consumer protocol (KIP-848)", {"group.protocol": "consumer"}),
}


# --- pure helpers -------------------------------------------------------------------------

def longest_gap(times: Sequence[float], start: float, end: float) -> float:
    """The longest stretch of [start, end] without a time of `times` (sorted): from start to
    the first, between two, or from the last to end. No time in it: the whole window."""
    last = start
    gap = 0.0
    for t in times:
        if t < start:
            continue
        if t > end:
            break
        gap = max(gap, t - last)
        last = t
    return max(gap, end - last)


def last_acquired(events: Iterable[tuple[float, str, frozenset[int]]],
                  partitions: Iterable[int]) -> dict[int, float]:
    """For each of `partitions`, the time its member was last assigned it ("assign" events;
    "revoke" events do not count), or -inf if it never was in `events`."""
    wanted = set(partitions)
    out = {p: float("-inf") for p in wanted}
    for t, kind, parts in events:
        if kind == "assign":
            for p in parts & wanted:
                out[p] = max(out[p], t)
    return out


def recovered_at(receipts: Iterable[tuple[float, Iterable[int]]],
                 acquired: Mapping[int, float], since: float) -> dict[int, float]:
    """For each partition of `acquired` (partition -> when the member last got it), the first
    time the member received it at or after both `since` and that acquisition. Partitions
    not received again are missing from the answer."""
    out: dict[int, float] = {}
    for t, parts in receipts:
        if t < since:
            continue
        for p in parts:
            if p not in out and p in acquired and t >= acquired[p]:
                out[p] = t
    return out


def longest_empty(events: Iterable[tuple[float, str, frozenset[int]]], start: float,
                  end: float) -> float:
    """The longest stretch of [start, end] in which the member held no partition, replayed
    from its assign/revoke `events` (in time order); 0 if it always held some."""
    held: set[int] = set()
    empty_since: float | None = None
    longest = 0.0
    for t, kind, parts in events:
        if t > end:
            break
        held = held | parts if kind == "assign" else held - parts
        if not held and empty_since is None:
            empty_since = t
        elif held and empty_since is not None:
            if t > start:
                longest = max(longest, t - max(empty_since, start))
            empty_since = None
    if empty_since is not None:
        longest = max(longest, end - max(empty_since, start))
    return longest


def balanced(assignments: Sequence[set[int]], partitions: int) -> bool:
    """Every member holds some, no partition twice, all of them held, sizes within one."""
    sizes = [len(a) for a in assignments]
    held = set().union(*assignments) if assignments else set()
    return (bool(sizes) and min(sizes) > 0 and max(sizes) - min(sizes) <= 1
            and sum(sizes) == len(held) == partitions)


@dataclass
class Outcome:
    """One join: the figures of the module docstring."""

    recovery_s: float
    longest_stop_s: float
    stopped: int
    baseline_gap_s: float
    moved: int
    gave_up: int  # old members that lost a partition
    emptied: int  # old members left with no partition for a while
    longest_empty_s: float


# --- the run ------------------------------------------------------------------------------

class Member(threading.Thread):
    """A group member polling continuously in its own thread, noting each batch it gets and
    each change of its assignment (librdkafka's callbacks: the whole assignment for eager,
    increments for cooperative and the consumer protocol, handled alike as adds/removes)."""

    def __init__(self, bootstrap: str, group: str, topic: str, extra: Mapping[str, str]) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Consumer
        from tests.bench.bench_broker import QUIET
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "auto.offset.reset": "latest", "enable.auto.commit": False,
                                  **QUIET, **extra})
        self.topic = topic
        self.receipts: list[tuple[float, frozenset[int]]] = []
        self.events: list[tuple[float, str, frozenset[int]]] = []
        self.assignment: set[int] = set()
        self.subscribed_at = 0.0
        self.error: str | None = None
        self.running = True

    def _assign(self, _c: Any, parts: list) -> None:
        got = frozenset(tp.partition for tp in parts)
        self.events.append((time.monotonic(), "assign", got))
        self.assignment = self.assignment | got

    def _revoke(self, _c: Any, parts: list) -> None:
        gone = frozenset(tp.partition for tp in parts)
        self.events.append((time.monotonic(), "revoke", gone))
        self.assignment = self.assignment - gone

    def run(self) -> None:
        self.subscribed_at = time.monotonic()
        self.consumer.subscribe([self.topic], on_assign=self._assign, on_revoke=self._revoke,
                                on_lost=self._revoke)
        try:
            while self.running:
                batch = self.consumer.consume(num_messages=1000, timeout=0.05)
                now = time.monotonic()
                parts = frozenset(p for m in batch
                                  if m.error() is None and (p := m.partition()) is not None)
                if parts:
                    self.receipts.append((now, parts))
                errors = [m.error() for m in batch if m.error() is not None]
                if errors and self.error is None:
                    self.error = str(errors[0])
        finally:
            self.consumer.close()

    def times_since(self, since: float) -> list[float]:
        return [t for t, _ in list(self.receipts) if t >= since]


class SteadyProducer(threading.Thread):
    """RATE records/s of SIZE bytes, round-robin over the partitions, in 10 ms steps."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Producer
        from tests.bench.bench_broker import QUIET
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **QUIET})
        self.topic = topic
        self.running = True
        self.sent = 0

    def run(self) -> None:
        value = b"x" * SIZE
        step = 0.01
        per_step = int(RATE * step)
        next_at = time.monotonic()
        while self.running:
            for _ in range(per_step):
                self.producer.produce(self.topic, value, partition=self.sent % PARTITIONS)
                self.sent += 1
            self.producer.poll(0)
            next_at += step
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        self.producer.flush(10)


def _wait(what: str, predicate: Callable[[], bool], members: Sequence[Member],
          timeout: float = SETTLE_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        failed = [m.error for m in members if m.error]
        if failed:
            raise RuntimeError(f"{what}: a member failed: {failed[0]}")
        if time.monotonic() > deadline:
            sizes = sorted(len(m.assignment) for m in members)
            raise TimeoutError(f"{what}: not within {timeout:.0f} s (assignment sizes {sizes})")
        time.sleep(0.05)


def _stable_balance(members: Sequence[Member]) -> Callable[[], bool]:
    """True once the members have held one balanced assignment for STABLE seconds."""
    since: list[float | None] = [None]
    seen: list[tuple[frozenset[int], ...] | None] = [None]

    def check() -> bool:
        now = time.monotonic()
        current = tuple(frozenset(m.assignment) for m in members)
        if not balanced([set(a) for a in current], PARTITIONS):
            since[0] = None
            return False
        start = since[0]
        if current != seen[0] or start is None:
            seen[0], since[0] = current, now
            start = now
        return now - start >= STABLE
    return check


def _all_flowing(members: Sequence[Member], window: float) -> Callable[[], bool]:
    """Every partition received by some member within the last `window` seconds."""
    def check() -> bool:
        cut = time.monotonic() - window
        got: set[int] = set()
        for m in members:
            for t, parts in reversed(list(m.receipts)):
                if t < cut:
                    break
                got |= parts
        return len(got) == PARTITIONS
    return check


def measure_join(bootstrap: str, mode: str, progress: Callable[[str], None]) -> Outcome:
    """One join in `mode` (MODES) on a fresh topic and group of `bootstrap`."""
    from tests.bench.bench_broker import create_topic, delete_topics

    extra = MODES[mode][1]
    tag = uuid.uuid4().hex[:6]
    topic, group = f"rebalance-{mode}-{tag}", f"rebalance-{mode}-{tag}"
    create_topic(bootstrap, topic, PARTITIONS)
    _wait_topic_served(bootstrap, topic)
    producer = SteadyProducer(bootstrap, topic)
    old = [Member(bootstrap, group, topic, extra) for _ in range(MEMBERS)]
    members = list(old)
    try:
        producer.start()
        for m in old:
            m.start()
        _wait("ten members settle", _stable_balance(old), old)
        _wait("every partition flows", _all_flowing(old, 1.0), old)
        new = Member(bootstrap, group, topic, extra)
        members.append(new)
        t_join = time.monotonic()
        new.start()
        _wait("eleven members settle", _stable_balance(members), members)
        _wait("every partition flows again", _all_flowing(members, 1.0), members)
        t_end = time.monotonic()
        time.sleep(t_end - t_join)  # the baseline: steady load as long as the rebalance took
        t_after = time.monotonic()
        recovered: dict[int, float] = {}
        for m in members:
            final = _held_at(m, t_end)
            recovered.update(recovered_at(list(m.receipts), last_acquired(list(m.events), final),
                                          t_join))
        missing = set(range(PARTITIONS)) - set(recovered)
        if missing:
            raise RuntimeError(f"partitions not consumed after the join: {sorted(missing)[:10]}")
        gaps = [longest_gap(m.times_since(t_join), t_join, t_end) for m in old]
        baseline = max(longest_gap(m.times_since(t_end), t_end, t_after) for m in old)
        threshold = max(STOP_FACTOR * baseline, STOP_FLOOR)
        moved = sum(len(_held_at(m, t_end) - _held_at(m, t_join)) for m in members)
        gave_up = sum(bool(_held_at(m, t_join) - _held_at(m, t_end)) for m in old)
        empty = [longest_empty(list(m.events), t_join, t_end) for m in old]
        out = Outcome(recovery_s=max(recovered.values()) - t_join, longest_stop_s=max(gaps),
                      stopped=sum(g > threshold for g in gaps), baseline_gap_s=baseline,
                      moved=moved, gave_up=gave_up, emptied=sum(e > 0 for e in empty),
                      longest_empty_s=max(empty))
        progress(f"{mode}: recovery {out.recovery_s:.2f} s, longest stop "
                 f"{out.longest_stop_s:.2f} s, {out.stopped}/{MEMBERS} stopped, {gave_up} gave "
                 f"a partition up, {out.emptied} held none for up to "
                 f"{out.longest_empty_s * 1000:.0f} ms (baseline gap {baseline * 1000:.0f} ms; "
                 f"gaps "
                 f"{' '.join(f'{g * 1000:.0f}' for g in sorted(gaps))} ms), {moved} partitions "
                 f"moved")
        return out
    finally:
        for m in members:
            m.running = False
        producer.running = False
        for t in [*members, producer]:
            if t.is_alive():
                t.join(30)
        delete_topics(bootstrap, [topic])


def _wait_topic_served(bootstrap: str, topic: str, timeout: float = 60.0) -> None:
    """Until Metadata shows every partition of `topic` with a leader: Kafka's CreateTopics
    answers before its brokers have the topic, and a member subscribing then fails with
    UNKNOWN_TOPIC_OR_PART."""
    from confluent_kafka.admin import AdminClient
    from tests.bench.bench_broker import QUIET

    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    deadline = time.monotonic() + timeout
    while True:
        meta = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == PARTITIONS \
                and all(p.leader >= 0 for p in meta.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic} not served within {timeout:.0f} s")
        time.sleep(0.1)


def _held_at(member: Member, t: float) -> set[int]:
    """The member's assignment at time `t`, replayed from its callbacks."""
    held: set[int] = set()
    for at, kind, parts in list(member.events):
        if at > t:
            break
        held = held | parts if kind == "assign" else held - parts
    return held


@dataclass
class RebalanceRun:
    """broker name -> mode -> the outcomes of its rounds; notes of what failed."""

    outcomes: dict[str, dict[str, list[Outcome]]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def bench_rebalance(brokers: Sequence[Any], rounds: int, modes: Sequence[str],
                    progress: Callable[[str, str], None]) -> RebalanceRun:
    """Every mode on every broker (objects with .name and .bootstrap), `rounds` times, the
    brokers' order rotating from round to round. A join that fails is noted, not fatal."""
    run = RebalanceRun()
    for rnd in range(rounds):
        shift = rnd % len(brokers)
        for b in [*brokers[shift:], *brokers[:shift]]:
            for mode in modes:
                try:
                    out = measure_join(b.bootstrap, mode, functools.partial(progress, b.name))
                except Exception as exc:
                    note = f"rebalance: {b.name}, {mode}, round {rnd + 1}: {exc}"
                    run.failures.append(note)
                    progress(b.name, f"{mode}: FAILED {exc}")
                    continue
                run.outcomes.setdefault(b.name, {}).setdefault(mode, []).append(out)
    return run
