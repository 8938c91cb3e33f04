"""The loop-time meter behind request_percentage: a task is charged its own steps only.

The meter reads a clock of the test's, advanced only by the work a task does in its steps
(`_work`): with the wall clock, a step preempted on a loaded machine is charged the time
another process ran, and the figures drift (issue #31: this test failed under a parallel run).
"""
from __future__ import annotations

import trio

from pybroker.quota.request_quota import LoopTime


class _WorkClock:
    """Seconds of work done so far: the only thing that moves it is `work`."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def work(self, seconds: float) -> None:
        self.now += seconds


async def test_a_task_is_charged_its_steps_not_its_waits_nor_other_tasks() -> None:
    clock = _WorkClock()
    meter = LoopTime(clock)
    trio.lowlevel.add_instrument(meter)
    try:
        taken: dict[str, float] = {}

        async def busy(name: str, work_s: float) -> None:
            clock.work(0.5)  # before it is watched: dropped by the first take
            meter.take()  # watched from here; what came before is dropped
            for _ in range(5):
                clock.work(work_s)
                await trio.sleep(0.02)  # parked: not counted, whatever the other task does
            taken[name] = meter.take()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(busy, "heavy", 0.01)
            nursery.start_soon(busy, "light", 0.001)
        # 5 x 10 ms and 5 x 1 ms of work, interleaved with the other task's and the sleeps
        assert abs(taken["heavy"] - 0.05) < 1e-9, taken
        assert abs(taken["light"] - 0.005) < 1e-9, taken
        assert meter._spent == {}  # exited tasks are forgotten
    finally:
        trio.lowlevel.remove_instrument(meter)
