"""The A/B benchmark's bookkeeping (tests/bench/ab.py): a bad REF is refused before anything
runs, and the ratios pair each round's two turns (not the medians of each side)."""
from __future__ import annotations

import pytest

from tests.bench.ab import BuildError, Comparison, ref_build


def test_a_ref_that_is_no_commit_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(BuildError, match="not a commit"):
        ref_build("no-such-ref-anywhere", cache=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_ratios_pair_the_turns_of_one_round() -> None:
    c = Comparison("produce acks=1 CPU-s/M", False, this=[1.0, 3.0, 2.0], ref=[2.0, 2.0, 1.0])
    assert c.ratios == [0.5, 1.5, 2.0]
    assert c.median_ratio == 1.5
