"""pybroker.runtime.clock: the timers' clock is the wall clock until a test advances it, and only
forward."""
from __future__ import annotations

import pytest

from pybroker.runtime.clock import Clock


def test_the_clock_is_the_wall_clock_plus_what_was_advanced() -> None:
    wall = [1_700_000_000.25]
    clock = Clock(lambda: wall[0])
    assert clock.now_ms() == 1_700_000_000_250
    assert clock.advance(60_000) == 1_700_000_060_250
    wall[0] += 1.0
    assert clock.now_ms() == 1_700_000_061_250 and clock.advanced_ms == 60_000
    assert clock.advance(0) == clock.now_ms()


def test_the_clock_never_runs_backwards() -> None:
    clock = Clock(lambda: 10.0)
    with pytest.raises(ValueError, match="forward"):
        clock.advance(-1)
    assert clock.now_ms() == 10_000
