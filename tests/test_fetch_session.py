"""The fetch session state machine (pybroker/replica/fetch_session.py), driven without a broker.

`_answer` plays the broker's reads: a partition's answer carries `hwm - fetch_offset` bytes
of records (capped by the request's max bytes), its high watermark and log start. The
hypothesis test plays a session-keeping client (what kafka-python's FetchSessionHandler and
Kafka's FetchSessionHandler do) against the cache through random rounds of produce, added
and removed partitions, and evictions, and checks that what the client pieces together
from incremental answers is what full answers would have told it.
"""
from __future__ import annotations

from types import SimpleNamespace as NS
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import ErrorCode
from pybroker.replica.fetch_session import (
    EVICTION_MS, FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, FetchSessionCache, next_epoch,
)


def _req(partitions: dict[tuple[str, int], int], max_bytes: int = 1 << 20) -> list[Any]:
    """Request topics for {(topic, partition): fetch_offset}, grouped by topic."""
    topics: dict[str, list[Any]] = {}
    for (topic, index), offset in partitions.items():
        topics.setdefault(topic, []).append(NS(partition=index, fetch_offset=offset,
                                               partition_max_bytes=max_bytes,
                                               current_leader_epoch=-1))
    return [NS(topic=t, partitions=ps) for t, ps in topics.items()]


def _forget(keys: list[tuple[str, int]]) -> list[Any]:
    topics: dict[str, list[int]] = {}
    for topic, index in keys:
        topics.setdefault(topic, []).append(index)
    return [NS(topic=t, partitions=ps) for t, ps in topics.items()]


def _answer(topics: Any, log: dict[tuple[str, int], tuple[int, int]],
            errors: frozenset = frozenset(), budget: int = 1 << 30) -> list[dict]:
    """The broker's reads of `topics` over `log` {(topic, partition): (hwm, log_start)}."""
    out = []
    for t in topics:
        parts = []
        for p in t.partitions:
            key = (t.topic, p.partition)
            if key in errors or key not in log:
                parts.append({"partition_index": p.partition, "error_code": 3,
                              "high_watermark": -1, "last_stable_offset": -1,
                              "log_start_offset": -1, "records": b""})
                continue
            hwm, start = log[key]
            size = max(0, min(hwm - p.fetch_offset, p.partition_max_bytes, budget))
            budget -= size
            parts.append({"partition_index": p.partition, "error_code": 0,
                          "high_watermark": hwm, "last_stable_offset": hwm,
                          "log_start_offset": start, "records": b"x" * size})
        out.append({"topic": t.topic, "partitions": parts})
    return out


def _keys(responses: list[dict]) -> list[tuple[str, int]]:
    return [(r["topic"], p["partition_index"]) for r in responses for p in r["partitions"]]


def _open(cache: FetchSessionCache, offsets: dict, log: dict, now: int = 0,
          privileged: bool = False) -> int:
    ctx = cache.new_context(0, INITIAL_EPOCH, _req(offsets), [], privileged=privileged,
                            uses_topic_ids=False, now_ms=now)
    code, sid, answered = ctx.finish(_answer(ctx.topics, log), now)
    assert code == ErrorCode.NONE and len(_keys(answered)) == len(offsets)
    return sid


def _incremental(cache: FetchSessionCache, sid: int, epoch: int, log: dict,
                 changed: dict | None = None, forgotten: list | None = None,
                 now: int = 0, **kw: Any) -> tuple[ErrorCode, int, list[dict]]:
    ctx = cache.new_context(sid, epoch, _req(changed or {}), _forget(forgotten or []),
                            privileged=False, uses_topic_ids=kw.get("ids", False), now_ms=now)
    return ctx.finish(_answer(ctx.topics, log, kw.get("errors", frozenset())), now)


LOG = {("a", 0): (5, 0), ("a", 1): (5, 0), ("b", 0): (5, 0)}
AT_END = {k: 5 for k in LOG}


def test_sessionless_keeps_nothing() -> None:
    cache = FetchSessionCache(10)
    ctx = cache.new_context(0, FINAL_EPOCH, _req(AT_END), [], privileged=False,
                            uses_topic_ids=False, now_ms=0)
    code, sid, answered = ctx.finish(_answer(ctx.topics, LOG), 0)
    assert (code, sid, len(cache)) == (ErrorCode.NONE, INVALID_SESSION_ID, 0)
    assert len(_keys(answered)) == 3


def test_full_fetch_opens_a_session_at_epoch_one() -> None:
    cache = FetchSessionCache(10)
    sid = _open(cache, AT_END, LOG)
    assert sid > 0 and cache.get(sid).epoch == 1 and cache.total_partitions == 3


def test_incremental_answers_only_what_changed() -> None:
    cache = FetchSessionCache(10)
    sid = _open(cache, AT_END, LOG)
    code, got_sid, answered = _incremental(cache, sid, 1, LOG)
    assert (code, got_sid, answered) == (ErrorCode.NONE, sid, [])
    moved = dict(LOG)
    moved[("a", 1)] = (7, 0)  # new records
    moved[("b", 0)] = (5, 2)  # log start moved (retention)
    code, _, answered = _incremental(cache, sid, 2, moved)
    assert _keys(answered) == [("a", 1), ("b", 0)]
    assert answered[0]["partitions"][0]["records"] == b"xx"
    # Nothing new since: answered with nothing (the fetch offset stays at 5 for a-1 until the
    # client says otherwise, so its records come again, as they would in a full fetch).
    assert _keys(_incremental(cache, sid, 3, moved)[2]) == [("a", 1)]
    assert _incremental(cache, sid, 4, moved, changed={("a", 1): 7})[2] == []


def test_an_error_is_answered_every_time_and_its_end_once() -> None:
    cache = FetchSessionCache(10)
    sid = _open(cache, AT_END, LOG)
    failing = frozenset({("a", 0)})
    assert _keys(_incremental(cache, sid, 1, LOG, errors=failing)[2]) == [("a", 0)]
    assert _keys(_incremental(cache, sid, 2, LOG, errors=failing)[2]) == [("a", 0)]
    assert _keys(_incremental(cache, sid, 3, LOG)[2]) == [("a", 0)]  # the error cleared
    assert _incremental(cache, sid, 4, LOG)[2] == []


def test_last_stable_offset_change_is_answered() -> None:
    cache = FetchSessionCache(10)
    sid = _open(cache, AT_END, LOG)
    ctx = cache.new_context(sid, 1, [], [], privileged=False, uses_topic_ids=False, now_ms=0)
    answer = _answer(ctx.topics, LOG)
    answer[0]["partitions"][0]["last_stable_offset"] = 3
    assert _keys(ctx.finish(answer, 0)[2]) == [("a", 0)]


@pytest.mark.parametrize("entry", [{"preferred_read_replica": 2},
                                   {"diverging_epoch": {"epoch": 1, "end_offset": 3}}])
def test_preferred_replica_and_divergence_are_always_answered(entry: dict) -> None:
    cache = FetchSessionCache(10)
    sid = _open(cache, AT_END, LOG)
    for epoch in (1, 2):
        ctx = cache.new_context(sid, epoch, [], [], privileged=False, uses_topic_ids=False,
                                now_ms=0)
        answer = _answer(ctx.topics, LOG)
        answer[1]["partitions"][0].update(entry)
        assert _keys(ctx.finish(answer, 0)[2]) == [("b", 0)]


def test_session_errors() -> None:
    cache = FetchSessionCache(10)
    sid = _open(cache, AT_END, LOG)
    assert _incremental(cache, sid + 1, 1, LOG)[:2] == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    assert _incremental(cache, sid, 2, LOG)[:2] == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)
    assert _incremental(cache, sid, 1, LOG, ids=True)[:2] == \
        (ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR, 0)
    assert _incremental(cache, 0, 3, LOG)[:2] == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    # None of the errors moved the epoch: 1 is still the one expected.
    assert _incremental(cache, sid, 1, LOG) == (ErrorCode.NONE, sid, [])


def test_a_second_request_at_the_same_epoch_while_one_waits_is_refused() -> None:
    cache = FetchSessionCache(10)
    sid = _open(cache, AT_END, LOG)
    first = cache.new_context(sid, 1, [], [], privileged=False, uses_topic_ids=False, now_ms=0)
    second = cache.new_context(sid, 2, [], [], privileged=False, uses_topic_ids=False, now_ms=0)
    assert second.finish(_answer(second.topics, LOG), 0)[:2] == (ErrorCode.NONE, sid)
    assert first.finish(_answer(first.topics, LOG), 0) == \
        (ErrorCode.INVALID_FETCH_SESSION_EPOCH, sid, [])
    assert first.throttled() == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, sid)


def test_forgotten_partitions_leave_and_an_empty_session_closes() -> None:
    cache = FetchSessionCache(10)
    sid = _open(cache, AT_END, LOG)
    assert _incremental(cache, sid, 1, LOG, forgotten=[("a", 0), ("a", 9)])[:2] == \
        (ErrorCode.NONE, sid)
    assert set(cache.get(sid).partitions) == {("a", 1), ("b", 0)}
    assert cache.total_partitions == 2
    code, got, answered = _incremental(cache, sid, 2, LOG, forgotten=[("a", 1), ("b", 0)])
    assert (code, got, answered, len(cache)) == (ErrorCode.NONE, 0, [], 0)


def test_full_requests_naming_a_session_close_it() -> None:
    cache = FetchSessionCache(10)
    sid = _open(cache, AT_END, LOG)
    ctx = cache.new_context(sid, FINAL_EPOCH, _req(AT_END), [], privileged=False,
                            uses_topic_ids=False, now_ms=0)
    assert ctx.finish(_answer(ctx.topics, LOG), 0)[1] == 0 and len(cache) == 0
    sid = _open(cache, AT_END, LOG)
    ctx = cache.new_context(sid, INITIAL_EPOCH, _req(AT_END), [], privileged=False,
                            uses_topic_ids=False, now_ms=0)
    new = ctx.finish(_answer(ctx.topics, LOG), 0)[1]
    assert new not in (0, sid) and list(cache.sessions) == [new]


def test_added_partitions_join_and_those_with_records_go_last() -> None:
    cache = FetchSessionCache(10)
    log = dict(LOG)
    log[("c", 0)] = (0, 0)
    sid = _open(cache, AT_END, LOG)
    code, _, answered = _incremental(cache, sid, 1, log, changed={("c", 0): 0})
    assert _keys(answered) == [("c", 0)]  # new to the client: its offsets are news
    assert list(cache.get(sid).partitions) == [("a", 0), ("a", 1), ("b", 0), ("c", 0)]
    log[("a", 0)] = (6, 0)
    _incremental(cache, sid, 2, log)
    assert list(cache.get(sid).partitions) == [("a", 1), ("b", 0), ("c", 0), ("a", 0)]
    # The read order groups consecutive partitions of a topic.
    ctx = cache.new_context(sid, 3, [], [], privileged=False, uses_topic_ids=False, now_ms=0)
    assert [(t.topic, [p.partition for p in t.partitions]) for t in ctx.topics] == \
        [("a", [1]), ("b", [0]), ("c", [0]), ("a", [0])]


def test_throttled_answer_remembers_nothing() -> None:
    cache = FetchSessionCache(10)
    sid = _open(cache, AT_END, LOG)
    moved = {**LOG, ("a", 0): (9, 0)}
    ctx = cache.new_context(sid, 1, [], [], privileged=False, uses_topic_ids=False, now_ms=0)
    assert ctx.throttled() == (ErrorCode.NONE, sid)
    assert _keys(_incremental(cache, sid, 2, moved)[2]) == [("a", 0)]
    full = cache.new_context(0, 0, _req(AT_END), [], privileged=False, uses_topic_ids=False,
                             now_ms=0)
    assert full.throttled() == (ErrorCode.NONE, 0) and len(cache) == 1


def test_next_epoch_wraps_to_one() -> None:
    assert [next_epoch(e) for e in (0, 1, 0x7FFFFFFF, -1)] == [1, 2, 1, -1]


def test_no_slots_means_no_sessions() -> None:
    cache = FetchSessionCache(0)
    ctx = cache.new_context(0, 0, _req(AT_END), [], privileged=False, uses_topic_ids=False,
                            now_ms=0)
    assert ctx.finish(_answer(ctx.topics, LOG), 0)[1] == 0 and len(cache) == 0


# -- eviction (KIP-227) ----------------------------------------------------------------------------
def _sized(n: int) -> tuple[dict, dict]:
    offsets = {("t", i): 0 for i in range(n)}
    return offsets, {k: (0, 0) for k in offsets}


def test_a_young_consumer_session_is_not_evicted_by_a_consumer() -> None:
    cache = FetchSessionCache(1)
    small, big = _sized(1), _sized(50)
    first = _open(cache, *small, now=0)
    ctx = cache.new_context(0, 0, _req(big[0]), [], privileged=False, uses_topic_ids=False,
                            now_ms=1000)
    assert ctx.finish(_answer(ctx.topics, big[1]), 1000)[1] == 0
    assert list(cache.sessions) == [first] and cache.evictions == 0


def test_a_stale_session_is_evicted() -> None:
    cache = FetchSessionCache(1)
    first = _open(cache, *_sized(50), now=0)
    second = _open(cache, *_sized(1), now=EVICTION_MS + 1)
    assert list(cache.sessions) == [second] != [first] and cache.evictions == 1
    assert cache.total_partitions == 1


def test_a_follower_evicts_a_young_consumer_session() -> None:
    cache = FetchSessionCache(1)
    _open(cache, *_sized(50), now=0)
    follower = _open(cache, *_sized(1), now=10, privileged=True)
    assert cache.get(follower).privileged and len(cache) == 1
    # ... but not a young follower's session, and a consumer never evicts it while young.
    offsets, log = _sized(99)
    for privileged in (True, False):
        ctx = cache.new_context(0, 0, _req(offsets), [], privileged=privileged,
                                uses_topic_ids=False, now_ms=20)
        assert ctx.finish(_answer(ctx.topics, log), 20)[1] == 0


def test_once_old_the_smaller_session_gives_way_to_a_larger_one() -> None:
    cache = FetchSessionCache(2)
    small = _open(cache, *_sized(3), now=0)
    large = _open(cache, *_sized(10), now=0)
    later = EVICTION_MS + 1
    for sid in (small, large):  # both used recently (not stale), both old (evictable)
        assert _incremental(cache, sid, 1, {}, now=later)[0] == ErrorCode.NONE
    offsets, log = _sized(2)
    ctx = cache.new_context(0, 0, _req(offsets), [], privileged=False, uses_topic_ids=False,
                            now_ms=later + 1)
    assert ctx.finish(_answer(ctx.topics, log), later + 1)[1] == 0  # 2 < 3: no room
    offsets, log = _sized(3)
    ctx = cache.new_context(0, 0, _req(offsets), [], privileged=False, uses_topic_ids=False,
                            now_ms=later + 1)
    assert ctx.finish(_answer(ctx.topics, log), later + 1)[1] == 0  # a tie keeps the incumbent
    newcomer = _open(cache, *_sized(4), now=later + 1)
    assert set(cache.sessions) == {large, newcomer} and cache.evictions == 1


# -- a client against the cache ---------------------------------------------------------------------
class _Client:
    """A session-keeping fetcher: full fetch first, then only what changed; on a session
    error it starts over with a full fetch (as Kafka's and kafka-python's clients do)."""

    def __init__(self) -> None:
        self.offsets: dict[tuple[str, int], int] = {}
        self.known: dict[tuple[str, int], tuple[int, int]] = {}
        self.sid, self.epoch = 0, 0
        self.sent: dict[tuple[str, int], int] = {}  # what the session holds for us
        self.received: dict[tuple[str, int], int] = {}

    def request(self) -> tuple[int, int, list, list]:
        if self.epoch == 0 or self.sid == 0:
            self.sent = dict(self.offsets)
            return 0, 0, _req(self.offsets), []
        changed = {k: v for k, v in self.offsets.items() if self.sent.get(k) != v}
        gone = [k for k in self.sent if k not in self.offsets]
        self.sent = dict(self.offsets)
        return self.sid, self.epoch, _req(changed), _forget(gone)

    def response(self, code: ErrorCode, sid: int, answered: list[dict], full: bool) -> None:
        if code:
            self.sid, self.epoch = 0, 0
            return
        if full:
            self.sid, self.epoch = sid, 1
        elif sid == 0:
            self.sid, self.epoch = 0, 0
        else:
            self.epoch = next_epoch(self.epoch)
        for r in answered:
            for p in r["partitions"]:
                key = (r["topic"], p["partition_index"])
                if key not in self.offsets:
                    continue
                self.known[key] = (p["high_watermark"], p["log_start_offset"])
                self.offsets[key] += len(p["records"])
                self.received[key] = self.received.get(key, 0) + len(p["records"])


_steps = st.lists(st.one_of(
    st.tuples(st.just("produce"), st.integers(0, 7), st.integers(1, 5)),
    st.tuples(st.just("retain"), st.integers(0, 7)),
    st.tuples(st.just("add"), st.integers(0, 7)),
    st.tuples(st.just("drop"), st.integers(0, 7)),
    st.tuples(st.just("evict"), st.just(0)),
    st.tuples(st.just("fetch"), st.integers(1, 12)),
), max_size=40)


@settings(max_examples=150, deadline=None)
@given(_steps)
def test_a_client_sees_through_incremental_answers_what_full_ones_would_say(steps: list
                                                                               ) -> None:
    cache = FetchSessionCache(4)
    log = {("t", i): (0, 0) for i in range(8)}
    produced = {k: 0 for k in log}
    client = _Client()
    for k in list(log)[:4]:
        client.offsets[k] = 0
    for step in steps:
        kind, *args = step
        key = ("t", args[0]) if kind not in ("evict", "fetch") else None
        if kind == "produce":
            hwm, start = log[key]
            log[key] = (hwm + args[1], start)
            produced[key] += args[1]
        elif kind == "retain":
            hwm, start = log[key]
            log[key] = (hwm, start)  # log start moves only below what was consumed
            if client.offsets.get(key, 0) > start:
                log[key] = (hwm, client.offsets[key])
        elif kind == "add" and key not in client.offsets:
            client.offsets[key] = client.received.get(key, 0)
        elif kind == "drop" and len(client.offsets) > 1:
            client.offsets.pop(key, None)
        elif kind == "evict" and client.sid:
            cache.remove(client.sid)
        elif kind == "fetch":
            sid, epoch, topics, forgotten = client.request()
            ctx = cache.new_context(sid, epoch, topics, forgotten, privileged=False,
                                    uses_topic_ids=False, now_ms=0)
            code, got, answered = ctx.finish(_answer(ctx.topics, log, budget=args[0]), 0)
            assert code in (ErrorCode.NONE, ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
            client.response(code, got, answered, full=epoch == 0)
            if code:
                continue
            # What the client knows of every partition it fetches is what a full answer says.
            for k in client.offsets:
                assert client.known.get(k) == log[k], k
    # Fetching to the end delivers every record once, to the client's own offsets.
    for _ in range(40):
        sid, epoch, topics, forgotten = client.request()
        ctx = cache.new_context(sid, epoch, topics, forgotten, privileged=False,
                                uses_topic_ids=False, now_ms=0)
        client.response(*ctx.finish(_answer(ctx.topics, log, budget=3), 0), full=epoch == 0)
    for k, offset in client.offsets.items():
        assert offset == log[k][0] == client.received[k] == produced[k]


_arrivals = st.lists(st.tuples(st.integers(0, 3 * EVICTION_MS // 2),  # time step
                               st.integers(1, 20),  # partitions
                               st.booleans(),  # privileged (a follower)
                               st.sampled_from(["open", "use", "close"])),
                     max_size=40)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4), _arrivals)
def test_the_cache_never_overflows_and_protects_young_active_sessions(slots: int,
                                                                       arrivals: list) -> None:
    """Whatever arrives: at most `slots` sessions, the partition count is the sum of the
    sessions', and a consumer's newcomer never evicts a session that is both younger than
    EVICTION_MS and used within it."""
    cache = FetchSessionCache(slots)
    now = 0
    epochs: dict[int, int] = {}
    for step, size, privileged, action in arrivals:
        now += step
        before = {sid: (s.creation_ms, s.last_used_ms) for sid, s in cache.sessions.items()}
        if action == "open" or not epochs:
            offsets, log = _sized(size)
            ctx = cache.new_context(0, 0, _req(offsets), [], privileged=privileged,
                                    uses_topic_ids=False, now_ms=now)
            sid = ctx.finish(_answer(ctx.topics, log), now)[1]
            if sid:
                epochs[sid] = 1
            gone = set(before) - set(cache.sessions)
            if not privileged:
                for old in gone:
                    created, used = before[old]
                    assert now - created > EVICTION_MS or now - used > EVICTION_MS
        else:
            sid = sorted(epochs)[size % len(epochs)]
            epoch = FINAL_EPOCH if action == "close" else epochs[sid]
            code, got, _ = _incremental(cache, sid, epoch, {}, now=now)
            if code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND or action == "close":
                del epochs[sid]
            else:
                assert (code, got) == (ErrorCode.NONE, sid)
                epochs[sid] = next_epoch(epoch)
        assert len(cache) <= slots
        assert cache.total_partitions == sum(len(s.partitions) for s in cache.sessions.values())
