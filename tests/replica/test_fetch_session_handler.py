"""The fetcher's side of a fetch session (pybroker/client/fetch_session_handler.py), and the
two sides together: the follower's handler against the broker's cache."""
from __future__ import annotations

from types import SimpleNamespace as NS
from typing import Any

from protocol.errors import ErrorCode
from pybroker.client.fetch_session_handler import FetchSessionHandler
from pybroker.replica.fetch_session import FetchSessionCache


def _entry(partition: int, offset: int, epoch: int = 0) -> dict[str, Any]:
    return {"partition": partition, "current_leader_epoch": epoch, "fetch_offset": offset,
            "last_fetched_epoch": -1, "log_start_offset": 0, "partition_max_bytes": 100}


def test_full_then_only_what_moved_then_forgotten() -> None:
    h = FetchSessionHandler()
    wanted = {("t", 0): _entry(0, 5), ("t", 1): _entry(1, 5)}
    assert h.build(wanted) == (0, 0, {"t": [wanted[("t", 0)], wanted[("t", 1)]]}, {})
    assert h.answered(0, 42)
    assert h.build(wanted) == (42, 1, {}, {})
    assert h.answered(0, 42)
    moved = {("t", 0): _entry(0, 9), ("u", 0): _entry(0, 0)}
    assert h.build(moved) == (42, 2, {"t": [moved[("t", 0)]], "u": [moved[("u", 0)]]},
                              {"t": [1]})
    assert h.answered(0, 42) and h.epoch == 3


def test_errors_and_lost_answers_start_over_closing_the_session() -> None:
    h = FetchSessionHandler()
    wanted = {("t", 0): _entry(0, 5)}
    h.build(wanted)
    h.answered(0, 42)
    assert not h.answered(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)  # no build: ignored
    h.build(wanted)
    assert not h.answered(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    assert h.build(wanted)[:2] == (42, 0)  # full, closing 42 if it still exists
    h.answered(0, 43)
    h.build(wanted)  # ... never answered (a cancelled long poll)
    assert h.build(wanted) == (43, 0, {"t": [wanted[("t", 0)]]}, {})


def test_no_session_made_keeps_asking_in_full() -> None:
    h = FetchSessionHandler()
    wanted = {("t", 0): _entry(0, 5)}
    h.build(wanted)
    assert h.answered(0, 0) and h.made_none
    assert h.build(wanted)[:2] == (0, 0)
    assert h.answered(0, 7) and not h.made_none


def _as_request(send: dict[str, list[dict]]) -> list[Any]:
    return [NS(topic=t, partitions=[NS(**p) for p in ps]) for t, ps in send.items()]


def test_a_follower_session_against_the_broker_cache() -> None:
    cache = FetchSessionCache(10)
    h = FetchSessionHandler()
    offsets = {("t", p): 0 for p in range(3)}
    hwm = {k: 4 for k in offsets}
    for _ in range(6):
        wanted = {k: _entry(k[1], v) for k, v in offsets.items()}
        sid, epoch, send, forget = h.build(wanted)
        ctx = cache.new_context(sid, epoch, _as_request(send),
                                [NS(topic=t, partitions=ps) for t, ps in forget.items()],
                                privileged=True, uses_topic_ids=False, now_ms=0)
        answer = [{"topic": t.topic, "partitions": [
            {"partition_index": p.partition, "error_code": 0,
             "high_watermark": hwm[(t.topic, p.partition)], "last_stable_offset": 4,
             "log_start_offset": 0,
             "records": b"x" * (hwm[(t.topic, p.partition)] - p.fetch_offset)}
            for p in t.partitions]} for t in ctx.topics]
        code, got, answered = ctx.finish(answer, 0)
        assert h.answered(code, got)
        for r in answered:
            for p in r["partitions"]:
                offsets[(r["topic"], p["partition_index"])] += len(p["records"])
    assert offsets == hwm and cache.get(h.session_id).privileged and h.epoch > 3
