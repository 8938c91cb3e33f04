"""The memory pool's accounting and waiting line (the hostile-load behaviour, with a real
broker, is tests/integration/test_memory_bound.py)."""
from __future__ import annotations

import pytest
import trio

from pybroker.quota.memory_pool import MemoryPool


def test_unbounded_pool_grants_everything() -> None:
    pool = MemoryPool(None)
    assert pool.try_allocate(10 ** 12) and pool.available > 10 ** 12


async def test_waiters_are_served_in_order_as_memory_returns() -> None:
    pool = MemoryPool(100)
    assert pool.try_allocate(80)
    granted: list[str] = []

    async def want(name: str, size: int) -> None:
        await pool.allocate(size)
        granted.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(want, "big", 60)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(want, "small", 10)  # would fit, but queues behind "big"
        await trio.testing.wait_all_tasks_blocked()
        assert granted == [] and pool.waiting == 2
        assert not pool.try_allocate(5)  # nobody jumps the line
        pool.release(30)  # 50 used: "small" would fit, but "big" (60) is first and does not
        await trio.testing.wait_all_tasks_blocked()
        assert granted == [] and pool.waiting == 2
        pool.release(50)
    assert sorted(granted) == ["big", "small"] and pool.used == 70


async def test_a_cancelled_waiter_leaves_the_line_and_lets_the_next_one_in() -> None:
    pool = MemoryPool(100)
    assert pool.try_allocate(50)
    granted: list[str] = []
    scope = trio.CancelScope()

    async def want(name: str, size: int) -> None:
        await pool.allocate(size)
        granted.append(name)

    async def cancellable(name: str, size: int) -> None:
        with scope:
            await want(name, size)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(cancellable, "huge", 100)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(want, "fits", 40)  # would fit, but queues behind "huge"
        await trio.testing.wait_all_tasks_blocked()
        assert granted == [] and pool.waiting == 2
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
    assert granted == ["fits"] and pool.used == 90 and pool.waiting == 0


def test_take_may_overdraw_and_release_gives_back() -> None:
    pool = MemoryPool(100)
    pool.take(150)
    assert pool.available == 0 and not pool.try_allocate(1)
    pool.release(150)
    assert pool.available == 100


@pytest.mark.parametrize("size", [1, 100])
def test_try_allocate_up_to_capacity(size: int) -> None:
    pool = MemoryPool(100)
    assert pool.try_allocate(size)
    assert pool.used == size
