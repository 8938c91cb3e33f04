"""The A/B benchmark's bookkeeping (tests/bench/ab.py): a bad REF is refused before anything
runs, and the ratios pair each round's two turns (not the medians of each side)."""
from __future__ import annotations

from pathlib import Path

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


def test_raw_only_runs_and_reports_the_raw_phases_alone(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    """The CPU gate's A/B: raw turns only (no librdkafka phases started), raw figures only."""
    from tests.bench import ab
    from tests.bench.bench_broker import Throughput

    turns: list[tuple[str, int]] = []

    def raw_turn(build: ab.Build, work: object, count: int) -> dict[str, Throughput]:
        turns.append((build.label, count))
        user = 0.3 if build.label == "this" else 0.25
        return {phase: Throughput(count, ab.SIZE, 1.0, 0.6, 0.0, 0, user)
                for phase in ("raw-produce-1", "raw-produce-all", "raw-fetch")}

    def full_turn(*args: object) -> None:
        raise AssertionError("a raw-only A/B ran the librdkafka phases")

    monkeypatch.setattr(ab, "run_raw_turn", raw_turn)
    monkeypatch.setattr(ab, "run_turn", full_turn)
    monkeypatch.setattr(ab, "byte_compile", lambda tree: None)
    this, ref = ab.Build("this", tmp_path, "python"), ab.Build("ref", tmp_path, "python")
    comparisons = ab.compare(this, ref, 3, 1_000_000, progress=False, raw_only=True)
    assert {c.name for c in comparisons} == {name for name, phase, _ in ab.FIGURES
                                             if phase.startswith("raw-")}
    assert turns[:2] == [("this", ab.WARMUP_COUNT), ("ref", ab.WARMUP_COUNT)]
    assert [label for label, _ in turns[2:]] == ["this", "ref", "ref", "this", "this", "ref"]
    user = next(c for c in comparisons if c.name == "raw fetch user-s/M")
    assert user.median_ratio == pytest.approx(1.2)


def test_the_produce_phases_take_turns_at_going_first(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    """A turn's second produce phase met dearer page-cache writes on this VM (docs/
    PERFORMANCE.md, "acks=all's system time"): acks=1 goes first in turns 0 and 2 (rounds 1
    and 3), acks=all in turn 1, the same for both builds of a round, and the figures keep
    their phases."""
    from tests.bench import ab
    from tests.bench.bench_broker import Throughput

    class Broker:
        bootstrap = "127.0.0.1:1"

        def __init__(self, *args: object, **kwargs: object) -> None:
            self.proc = type("Proc", (), {"pid": 1})()

        def start(self, timeout: float) -> "Broker":
            return self

        def stop(self) -> None:
            pass

    produced: list[tuple[str, str | int]] = []

    def produce(bootstrap: str, pid: int, topic: str, partitions: int, size: int, count: int,
                acks: str | int = 1) -> Throughput:
        produced.append((topic, acks))
        return Throughput(count, size, 1.0, 0.5 if acks == 1 else 0.7, 0.0, 0)

    def nothing(*args: object) -> Throughput:
        return Throughput(1, ab.SIZE, 1.0, 0.1, 0.0, 0)

    monkeypatch.setattr(ab, "BrokerProcess", Broker)
    monkeypatch.setattr(ab, "bench_produce", produce)
    monkeypatch.setattr(ab, "bench_consume", nothing)
    monkeypatch.setattr(ab, "run_raw_turn", lambda build, work, count: {})
    build = ab.Build("this", tmp_path, "python")
    for turn in (0, 1, 2):
        produced.clear()
        out = ab.run_turn(build, tmp_path, 1000, turn)
        first = ["ab-acks1", "ab-acksall"] if turn % 2 == 0 else ["ab-acksall", "ab-acks1"]
        assert [topic for topic, _ in produced] == first
        assert out["produce-1"].broker_cpu == 0.5 and out["produce-all"].broker_cpu == 0.7


_CHURN = """
import resource, sys
if {steady}:
    sys.path.insert(0, {root!r})
    from tests.bench.bench_broker import steady_client_allocator
    assert steady_client_allocator()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
held = [bytearray(1 << 20) for _ in range(64)]  # the first round grows the heap
del held
before = faults()
for _ in range(5):  # as librdkafka's queue of ~1 MB Fetch buffers fills and drains
    held = [bytearray(1 << 20) for _ in range(64)]
    del held
print(faults() - before)
"""


@pytest.mark.parametrize("steady", [False, True])
def test_the_clients_allocator_keeps_what_it_freed(steady: bool) -> None:
    """steady_client_allocator (the A/B's client): buffers of ~1 MB, freed and allocated
    again, come back from the heap without page faults; with glibc's defaults they are
    handed back and faulted in again (256 faults a MB), which moved the A/B's consume figure
    turn by turn (docs/PERFORMANCE.md, "Consume against 706cf02")."""
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", _CHURN.format(root=root, steady=steady)],
                         capture_output=True, text=True, check=True).stdout
    faults_per_mb = int(out) / (5 * 64)
    if steady:
        assert faults_per_mb < 8
    else:
        assert faults_per_mb > 128  # glibc's defaults: what the helper is there to change
