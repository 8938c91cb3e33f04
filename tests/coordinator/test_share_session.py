"""Share sessions: the epochs of ShareFetch and ShareAcknowledge, and the cache's limit."""
from __future__ import annotations

from uuid import UUID

from protocol.errors import ErrorCode
from pybroker.coordinator.share_session import ShareSessionCache

TP0, TP1 = (UUID(int=1), 0), (UUID(int=1), 1)


def opened(cache: ShareSessionCache, member: str = "m") -> None:
    ctx = cache.fetch_context("g", member, 0, [TP0], [], has_acks=False, fetches_data=True)
    assert ctx.error == ErrorCode.NONE and ctx.session is not None
    assert ctx.session.epoch == 1


def test_epochs_follow_one_another() -> None:
    cache = ShareSessionCache(10)
    opened(cache)
    for epoch in (1, 2, 3):
        ctx = cache.fetch_context("g", "m", epoch, [TP1], [], has_acks=True, fetches_data=True)
        assert ctx.error == ErrorCode.NONE
    assert cache.sessions[("g", "m")].partitions == {TP0, TP1}
    assert cache.acknowledge_context("g", "m", 4).error == ErrorCode.NONE
    assert cache.sessions[("g", "m")].epoch == 5


def test_a_wrong_epoch_is_invalid_share_session_epoch_and_changes_nothing() -> None:
    cache = ShareSessionCache(10)
    opened(cache)
    ctx = cache.fetch_context("g", "m", 2, [], [], has_acks=False, fetches_data=True)
    assert ctx.error == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert cache.acknowledge_context("g", "m", 7).error == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert cache.sessions[("g", "m")].epoch == 1


def test_no_session_is_share_session_not_found() -> None:
    cache = ShareSessionCache(10)
    assert cache.fetch_context("g", "m", 1, [], [], has_acks=False, fetches_data=True).error \
        == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert cache.acknowledge_context("g", "m", -1).error == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_opening_with_acknowledgements_is_invalid_request() -> None:
    cache = ShareSessionCache(10)
    assert cache.fetch_context("g", "m", 0, [TP0], [], has_acks=True, fetches_data=True).error \
        == ErrorCode.INVALID_REQUEST


def test_acknowledge_cannot_open_a_session() -> None:
    cache = ShareSessionCache(10)
    opened(cache)
    assert cache.acknowledge_context("g", "m", 0).error == ErrorCode.INVALID_SHARE_SESSION_EPOCH


def test_closing_may_acknowledge_but_not_fetch() -> None:
    cache = ShareSessionCache(10)
    opened(cache)
    assert cache.fetch_context("g", "m", -1, [], [], has_acks=True, fetches_data=True).error \
        == ErrorCode.INVALID_REQUEST
    ctx = cache.fetch_context("g", "m", -1, [], [], has_acks=True, fetches_data=False)
    assert ctx.error == ErrorCode.NONE and ctx.closing
    assert cache.close("g", "m") is not None
    assert ("g", "m") not in cache.sessions


def test_forgotten_partitions_leave_the_session() -> None:
    cache = ShareSessionCache(10)
    opened(cache)
    cache.fetch_context("g", "m", 1, [TP1], [TP0], has_acks=False, fetches_data=True)
    assert cache.sessions[("g", "m")].partitions == {TP1}


def test_a_full_cache_refuses_a_new_session_but_not_a_reopened_one() -> None:
    cache = ShareSessionCache(1)
    opened(cache, "m1")
    assert cache.fetch_context("g", "m2", 0, [], [], has_acks=False, fetches_data=True).error \
        == ErrorCode.SHARE_SESSION_LIMIT_REACHED
    opened(cache, "m1")


def test_the_epoch_wraps_to_one() -> None:
    cache = ShareSessionCache(10)
    opened(cache)
    cache.sessions[("g", "m")].epoch = 2**31 - 1
    assert cache.acknowledge_context("g", "m", 2**31 - 1).error == ErrorCode.NONE
    assert cache.sessions[("g", "m")].epoch == 1
