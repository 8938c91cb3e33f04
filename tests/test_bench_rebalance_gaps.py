"""The rebalance benchmark's pure helpers (tests/bench/bench_rebalance.py): how a stop, a
recovery and a settled group are read from the members' notes. Nothing here is timed."""
from __future__ import annotations

import math

import pytest

from tests.bench.bench_rebalance import (
    balanced, last_acquired, longest_empty, longest_gap, recovered_at,
)


def test_longest_gap_counts_the_window_edges() -> None:
    # between receipts, before the first and after the last all count
    assert longest_gap([1.0, 1.5, 4.0], 0.0, 5.0) == 2.5
    assert longest_gap([3.0, 3.1], 0.0, 3.5) == 3.0
    assert longest_gap([0.1, 0.2], 0.0, 4.0) == 3.8


def test_longest_gap_ignores_times_outside_the_window() -> None:
    assert longest_gap([0.5, 2.0, 2.5, 9.0], 1.0, 3.0) == 1.0
    assert longest_gap([], 1.0, 3.0) == 2.0
    assert longest_gap([5.0], 1.0, 3.0) == 2.0


def test_last_acquired_takes_the_latest_assign_and_ignores_revokes() -> None:
    events = [(1.0, "assign", frozenset({1, 2, 3})), (5.0, "revoke", frozenset({1, 2, 3})),
              (6.0, "assign", frozenset({2, 3})), (7.0, "assign", frozenset({9}))]
    got = last_acquired(events, {1, 2, 3, 4})
    assert got[1] == 1.0 and got[2] == 6.0 and got[3] == 6.0
    assert got[4] == -math.inf  # never assigned: every receipt after `since` counts


def test_recovered_at_waits_for_both_the_join_and_the_acquisition() -> None:
    receipts = [(1.0, frozenset({1, 2})), (2.5, frozenset({1, 2})), (3.5, frozenset({2})),
                (4.0, frozenset({1}))]
    acquired = {1: 0.5, 2: 3.0}
    # 1 held since before the join (t=2): its first receipt after the join; 2 got at 3.0
    assert recovered_at(receipts, acquired, since=2.0) == {1: 2.5, 2: 3.5}
    # a partition never received again is missing, and one not held is not reported
    assert recovered_at(receipts, {1: 4.5, 7: 0.0}, since=2.0) == {}


def test_balanced_wants_every_partition_once_and_even_sizes() -> None:
    assert balanced([{0, 1}, {2}], 3)
    assert not balanced([{0, 1, 2}, set()], 3)  # a member holds nothing
    assert not balanced([{0, 1}, {1, 2}], 3)  # partition 1 twice
    assert not balanced([{0}, {1}], 3)  # partition 2 nobody's
    assert not balanced([{0, 1, 2, 3}, {4, 5}], 6)  # 4 against 2
    assert not balanced([], 3)


def test_longest_empty_replays_the_callbacks_within_the_window() -> None:
    eager = [(0.0, "assign", frozenset({1, 2})), (3.0, "revoke", frozenset({1, 2})),
             (3.4, "assign", frozenset({2})), (6.0, "revoke", frozenset({2}))]
    assert longest_empty(eager, 1.0, 5.0) == pytest.approx(0.4)  # revoked all at 3.0, got 2 at 3.4
    assert longest_empty(eager, 1.0, 7.0) == 1.0  # empty again from 6.0 to the window's end
    assert longest_empty(eager, 3.2, 5.0) == pytest.approx(0.2)  # an emptiness begun before the window
    # incremental: losing one of two partitions never leaves the member empty
    incremental = [(0.0, "assign", frozenset({1, 2})), (3.0, "revoke", frozenset({1}))]
    assert longest_empty(incremental, 1.0, 5.0) == 0.0
