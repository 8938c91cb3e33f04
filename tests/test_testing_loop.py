"""pybroker.testing.loop: the trio loop on a thread that the testing Broker and Cluster share."""
from __future__ import annotations

import threading
from typing import Any

import pytest
import trio

from pybroker.testing.loop import LoopThread


def test_call_runs_in_the_loop_thread_and_close_ends_it() -> None:
    loop = LoopThread("pybroker-test-loop")
    assert loop.start(5) is None

    async def where() -> str:
        return threading.current_thread().name

    assert loop.call(where) == "pybroker-test-loop"
    loop.close(5)
    assert loop.closed
    assert "pybroker-test-loop" not in {t.name for t in threading.enumerate()}
    loop.close(5)  # a second close is harmless


def test_the_first_task_is_started_before_start_returns_and_cancelled_at_close() -> None:
    cancelled = threading.Event()

    async def serve(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started(42)
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()

    loop = LoopThread()
    assert loop.start(5, serve) == 42
    assert not cancelled.is_set()
    loop.close(5)
    assert cancelled.is_set()


def test_a_first_task_that_fails_to_start_raises_as_trio_run_raised_it() -> None:
    async def refuse(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        raise ValueError("bad config")

    with pytest.raises(BaseExceptionGroup) as refused:
        LoopThread().start(5, refuse)
    assert refused.group_contains(ValueError, match="bad config")
