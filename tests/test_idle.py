"""The idle reaper (pybroker/network/idle.py) on trio's autojump clock: which connections it closes
and when. tests/integration/test_bad_input.py checks the same against a real broker."""
from __future__ import annotations

from typing import Any

import trio

from pybroker.network.idle import IdleConnections


async def _served(connections: IdleConnections, waits: bool, log: list[str],
                  name: str) -> None:
    with connections.track() as watch:
        if waits:
            watch.wait_starts()
        await trio.sleep(100)  # a connection parked in wait_readable, or busy in a handler
        log.append(f"{name} lived")
    log.append(f"{name} {'closed' if watch.fired else 'done'} at {trio.current_time():.1f}")


async def test_waiting_connections_close_after_the_idle_period(autojump_clock: Any) -> None:
    connections = IdleConnections(idle_ms=10_000)
    log: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(connections.reap)
        nursery.start_soon(_served, connections, True, log, "waiting")
        nursery.start_soon(_served, connections, False, log, "busy")
        await trio.sleep(200)
        assert len(connections) == 0
        nursery.cancel_scope.cancel()
    closed_at = float(log[0].split(" at ")[1])
    assert log[0].startswith("waiting closed") and 10 <= closed_at <= 11
    assert log[1:] == ["busy lived", "busy done at 100.0"]


async def test_negative_idle_period_never_closes(autojump_clock: Any) -> None:
    connections = IdleConnections(idle_ms=-1)
    log: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(connections.reap)
        nursery.start_soon(_served, connections, True, log, "waiting")
        await trio.sleep(200)
    assert log == ["waiting lived", "waiting done at 100.0"]
