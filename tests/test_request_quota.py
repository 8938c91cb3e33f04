"""The loop-time meter behind request_percentage: a task is charged its own steps only."""
from __future__ import annotations

import time

import trio

from pybroker.request_quota import LoopTime


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def test_a_task_is_charged_its_steps_not_its_waits_nor_other_tasks() -> None:
    meter = LoopTime()
    trio.lowlevel.add_instrument(meter)
    try:
        taken: dict[str, float] = {}

        async def busy(name: str, spin_s: float) -> None:
            meter.take()  # watched from here; what came before is dropped
            for _ in range(5):
                _spin(spin_s)
                await trio.sleep(0.02)  # parked: not counted
            taken[name] = meter.take()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(busy, "heavy", 0.01)
            nursery.start_soon(busy, "light", 0.001)
        # 5 x 10 ms and 5 x 1 ms of spinning; 100 ms of sleeping each, interleaved
        assert 0.045 <= taken["heavy"] <= 0.075, taken
        assert 0.004 <= taken["light"] <= 0.02, taken
        assert meter._spent == {}  # exited tasks are forgotten
    finally:
        trio.lowlevel.remove_instrument(meter)
