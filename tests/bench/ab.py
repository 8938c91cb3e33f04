"""`bin/pybroker-bench --ab REF`: this build against another commit, alternating, in one run.

A change on the hot path is judged by its cost per record, and a figure taken on one day
cannot be held against a figure taken on another: the machine's load, its page cache and its
CPU clocks drift by more than the change. So both builds run here, now, on the same workload,
taking turns: round 1 runs this build then REF, round 2 REF then this build, and so on, and
each round gives one ratio per figure. The table shows the median ratio of the rounds and
their spread (lowest to highest), which says whether a difference is larger than the noise.

REF is built once into a tree and a virtual environment of its own under
~/.cache/pybroker-ab/<commit> (`git archive`, then `pip install` of that tree's runtime
dependencies, from the package index or pip's cache); this build is the working tree as it
is, uncommitted changes included, run by this interpreter. Both brokers read one properties
file, written here, with the keys every pybroker has read since the seed (so an old commit
and a new one run the same configuration), on a fresh log dir each turn.

The workload is issue #28's: confluent-kafka in this process, 1 KB records, one partition,
produce with acks=1 and acks=all (which goes first alternates by round, see `run_turn`),
then consume the acks=1 topic from the beginning
(tests/bench/bench_broker.py). Per figure: MB/s, and broker CPU-seconds per million records
(utime+stime from /proc/<pid>/stat, the broker process alone).
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.bench import raw_load  # noqa: E402
from tests.bench.bench_broker import (  # noqa: E402
    Throughput, bench_consume, bench_produce, cpu_seconds, steady_client_allocator,
    user_seconds,
)
from tests.helpers import BrokerProcess  # noqa: E402

# The commit the CPU gate (tests/bench/test_cpu_gate.py) holds this tree to. It moves forward
# on purpose, in a commit of its own that says why: after a change that makes records cheaper,
# so that the gate keeps the gain; never to let a costlier change through.
# ae30c21: main with the hand codecs of Produce and Fetch requests (branch cpu, issue #28);
# before it 356ec97, which this tree beat by 27 % (produce) and 21 % (fetch) in instructions
# per record; before that 883091e. Moved forward on purpose only.
GATE_REF = "ae30c2149183801f7b23b3d0761936a41774acb7"
GATE_LIMIT = 1.15  # this/REF, median of the rounds, per workload (instructions per record)
CACHE = Path(os.environ.get("PYBROKER_AB_CACHE", Path.home() / ".cache" / "pybroker-ab"))
SIZE = 1024
DEFAULT_COUNT = 500_000  # ~0.5 CPU-s a phase: 50 clock ticks, so a tick is 2 %
WARMUP_COUNT = 20_000
DEFAULT_ROUNDS = 5
# The keys of config/server.properties as the seed shipped it, which every commit since reads
# (listeners and log.dirs come from BrokerProcess's overrides).
PROPERTIES = """\
node.id=0
num.partitions=1
default.replication.factor=1
auto.create.topics.enable=true
log.segment.bytes=1073741824
group.initial.rebalance.delay.ms=0
offsets.topic.num.partitions=5
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
"""
# (figure name, phase, higher is better)
# "user-s/M" is the user-mode part of "CPU-s/M": the broker's own work, without the kernel's
# copies, whose cost here swings with other processes' writeback from turn to turn.
# "client CPU-s/M" is this process's (confluent-kafka's) CPU per million records: consume
# MB/s is set by the client's Python loop, not by the broker (docs/PERFORMANCE.md, "Consume
# against 706cf02"), so a consume MB/s ratio reads alongside the client's work per record.
FIGURES = (("produce acks=1 MB/s", "produce-1", True),
           ("produce acks=1 CPU-s/M", "produce-1", False),
           ("produce acks=1 user-s/M", "produce-1", False),
           ("produce acks=all MB/s", "produce-all", True),
           ("produce acks=all CPU-s/M", "produce-all", False),
           ("produce acks=all user-s/M", "produce-all", False),
           ("consume MB/s", "consume", True),
           ("consume CPU-s/M", "consume", False),
           ("consume user-s/M", "consume", False),
           ("consume client CPU-s/M", "consume", False),
           ("raw produce acks=1 CPU-s/M", "raw-produce-1", False),
           ("raw produce acks=1 user-s/M", "raw-produce-1", False),
           ("raw produce acks=all CPU-s/M", "raw-produce-all", False),
           ("raw produce acks=all user-s/M", "raw-produce-all", False),
           ("raw fetch CPU-s/M", "raw-fetch", False),
           ("raw fetch user-s/M", "raw-fetch", False))
# Where the raw phases' broker keeps its log: memory, so that their kernel time is a copy and
# not the disk's writeback (tests/bench/raw_load.py).
RAW_LOG_ROOT = Path("/dev/shm") if Path("/dev/shm").is_dir() else None


class BuildError(RuntimeError):
    """REF could not be checked out or installed."""


@dataclass(frozen=True)
class Build:
    """A tree to run `python -m pybroker` from, and the interpreter that runs it."""

    label: str
    tree: Path
    python: str


def this_build() -> Build:
    return Build("this", ROOT, sys.executable)


def ref_build(ref: str, cache: Path = CACHE) -> Build:
    """REF's tree and venv, built on first use and kept (keyed by the full commit id)."""
    try:
        sha = subprocess.run(["git", "rev-parse", "--verify", f"{ref}^{{commit}}"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.strip()
    except subprocess.CalledProcessError as exc:
        raise BuildError(f"{ref!r} is not a commit of this repository: "
                         f"{exc.stderr.strip()}") from None
    tree = cache / sha
    python = tree / ".venv" / "bin" / "python"
    if not (tree / ".ab-ready").exists():
        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", sha], cwd=ROOT, capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        subprocess.run([sys.executable, "-m", "venv", str(tree / ".venv")], check=True)
        installed = subprocess.run([str(python), "-m", "pip", "install", "-q", str(tree)],
                                   capture_output=True, text=True)
        if installed.returncode != 0:
            raise BuildError(f"pip install of {sha[:12]} failed:\n{installed.stderr[-2000:]}")
        byte_compile(tree)
        (tree / ".ab-ready").write_text(sha + "\n")
    return Build(sha[:12], tree, str(python))


def byte_compile(tree: Path) -> None:
    """Both builds start from bytecode, as an installed wheel does: a start that compiles
    ~300 modules is not the hot path's cost."""
    import compileall
    for package in ("pybroker", "protocol"):
        compileall.compile_dir(str(tree / package), quiet=2)


def run_turn(build: Build, work: Path, count: int, turn: int) -> dict[str, Throughput]:
    """One build's turn: a fresh broker, the three phases, the broker stopped.

    The two produce phases take turns at going first: acks=1 in rounds 1, 3, 5 (`turn` 0, 2,
    4), acks=all in rounds 2, 4 and the warm-up; both builds of a round alike. On this VM
    the broker's write() into the page cache costs 4-10x the system time per MB once the
    free memory the host still backs runs out, whatever the acks, and that happened more
    often to a turn's second produce phase: with acks=all always second, it was charged to
    acks=all (docs/PERFORMANCE.md, "acks=all's system time")."""
    log_dir = work / f"{build.label}-{turn}"
    broker = BrokerProcess(log_dir, config=str(work / "server.properties"), python=build.python,
                           source=build.tree).start(timeout=120)
    try:
        assert broker.proc is not None
        pid = broker.proc.pid
        phases: list[tuple[str, str, str | int]] = [("produce-1", "ab-acks1", 1),
                                                    ("produce-all", "ab-acksall", "all")]
        if turn % 2:
            phases.reverse()
        out = {phase: bench_produce(broker.bootstrap, pid, topic, 1, SIZE, count, acks=acks)
               for phase, topic, acks in phases}
        out["consume"] = bench_consume(broker.bootstrap, pid, "ab-acks1", 1, SIZE, count)
    finally:
        broker.stop()
        shutil.rmtree(log_dir, ignore_errors=True)
    out.update(run_raw_turn(build, work, count))
    return out


def run_raw_turn(build: Build, work: Path, count: int) -> dict[str, Throughput]:
    """The same build on a log in memory, under raw_load's fixed frames: Produce with acks=1
    and acks=all, then Fetch of the acks=1 topic."""
    log_dir = Path(tempfile.mkdtemp(prefix="pybroker-ab-raw-", dir=RAW_LOG_ROOT))
    broker = BrokerProcess(log_dir, config=str(work / "server.properties"), python=build.python,
                           source=build.tree).start(timeout=120)
    requests = max(1, count // raw_load.BATCH_RECORDS)
    out: dict[str, Throughput] = {}
    try:
        assert broker.proc is not None
        pid = broker.proc.pid
        for phase, acks in (("raw-produce-1", 1), ("raw-produce-all", -1)):
            topic = f"ab-{phase}"
            raw_load.create(broker.bootstrap, topic)
            raw_load.produce(broker.bootstrap, topic, 5, SIZE, acks)  # warm: caches, the topic
            out[phase] = _measured(pid, lambda: raw_load.produce(
                broker.bootstrap, topic, requests, SIZE, acks))
        out["raw-fetch"] = _measured(pid, lambda: raw_load.fetch(
            broker.bootstrap, "ab-raw-produce-1", (requests + 5) * raw_load.BATCH_RECORDS))
        return out
    finally:
        broker.stop()
        shutil.rmtree(log_dir, ignore_errors=True)


def _measured(pid: int, phase: Callable[[], raw_load.RawPhase]) -> Throughput:
    user0, cpu0 = user_seconds(pid), cpu_seconds(pid)
    done = phase()
    cpu, user = cpu_seconds(pid) - cpu0, user_seconds(pid) - user0
    return Throughput(done.records, SIZE, done.seconds, cpu, 0.0, 0, user)


def figure(t: Throughput, name: str) -> float:
    if name.endswith("MB/s"):
        return t.mb_s
    if name.endswith("client CPU-s/M"):
        return t.client_cpu / t.records * 1e6
    return t.user_per_million if name.endswith("user-s/M") else t.cpu_per_million


@dataclass(frozen=True)
class Comparison:
    """One figure over the rounds: each build's median, and this/REF per round."""

    name: str
    higher_is_better: bool
    this: list[float]
    ref: list[float]

    @property
    def ratios(self) -> list[float]:
        return [a / b for a, b in zip(self.this, self.ref) if b]

    @property
    def median_ratio(self) -> float:
        return statistics.median(self.ratios)


def compare(this: Build, ref: Build, rounds: int, count: int,
            progress: bool = True, raw_only: bool = False) -> list[Comparison]:
    """`rounds` alternations of the two builds; the first to run swaps every round. With
    `raw_only`, each turn is the raw phases alone (`run_raw_turn`), and so are the figures."""
    runs: dict[str, list[dict[str, Throughput]]] = {this.label: [], ref.label: []}
    byte_compile(this.tree)
    # The client's allocator keeps its memory: otherwise whether librdkafka's Fetch buffers
    # are faulted in afresh changes from turn to turn (steady_client_allocator).
    steady_client_allocator()
    # The brokers run as in production: not with the strict encoding the test run turns on
    # (tests/conftest.py), which REF may not have and which costs this build's encoder more.
    strict = os.environ.pop("PYBROKER_STRICT_ENCODE", None)
    try:
        _alternate(this, ref, rounds, count, progress, runs,
                   _raw_turn if raw_only else run_turn)
    finally:
        if strict is not None:
            os.environ["PYBROKER_STRICT_ENCODE"] = strict
    return [Comparison(name, higher, [figure(r[phase], name) for r in runs[this.label]],
                       [figure(r[phase], name) for r in runs[ref.label]])
            for name, phase, higher in FIGURES if phase in runs[this.label][0]]


def _raw_turn(build: Build, work: Path, count: int, turn: int) -> dict[str, Throughput]:
    return run_raw_turn(build, work, count)


def _alternate(this: Build, ref: Build, rounds: int, count: int, progress: bool,
               runs: dict[str, list[dict[str, Throughput]]],
               turn_of: Callable[[Build, Path, int, int], dict[str, Throughput]]) -> None:
    with tempfile.TemporaryDirectory(prefix="pybroker-ab-") as tmp:
        (Path(tmp) / "server.properties").write_text(PROPERTIES)
        for build in (this, ref):  # a first turn each, not counted: caches, the client's start
            turn_of(build, Path(tmp), WARMUP_COUNT, -1)
        for rnd in range(rounds):
            order = (this, ref) if rnd % 2 == 0 else (ref, this)
            for build in order:
                os.sync()  # the last turn's writeback is not this turn's cost
                turn = turn_of(build, Path(tmp), count, rnd)
                runs[build.label].append(turn)
                if progress:
                    print(f"round {rnd + 1}/{rounds} {build.label:>12}: " + ", ".join(
                        f"{phase} {t.mb_s:.0f} MB/s {t.cpu_per_million:.2f} CPU-s/M "
                        f"(user {t.user_per_million:.2f})"
                        for phase, t in turn.items()), file=sys.stderr, flush=True)


def table(comparisons: list[Comparison], this: Build, ref: Build,
          note: str = "MB/s higher is better, CPU-s per million records lower is better") -> str:
    lines = [f"{'figure':<26}{this.label:>10}{ref.label:>14}   this/REF  [lowest - highest]",
             "-" * 78]
    for c in comparisons:
        lines.append(f"{c.name:<26}{statistics.median(c.this):>10.2f}"
                     f"{statistics.median(c.ref):>14.2f}   {c.median_ratio:>8.3f}  "
                     f"[{min(c.ratios):.3f} - {max(c.ratios):.3f}]")
    lines.append(f"\nMedians of {len(comparisons[0].this)} alternations on {os.cpu_count()} "
                 f"CPUs; {note}.")
    return "\n".join(lines)


def checked_ref(ref: str, rounds: int, option: str) -> Build | None:
    """REF's build for an A/B of `rounds` rounds, or None once `option`'s complaint is on
    stderr (too few rounds, REF not a commit, its install failed)."""
    if rounds < 3:
        print(f"{option}: at least 3 rounds, so that a spread means something", file=sys.stderr)
        return None
    try:
        return ref_build(ref)
    except BuildError as exc:
        print(f"{option}: {exc}", file=sys.stderr)
        return None


def run(ref: str, rounds: int = DEFAULT_ROUNDS, count: int = DEFAULT_COUNT,
        json_path: Path | None = None, raw_only: bool = False) -> int:
    other = checked_ref(ref, rounds, "--ab")
    if other is None:
        return 2
    this = this_build()
    comparisons = compare(this, other, rounds, count, raw_only=raw_only)
    print(table(comparisons, this, other))
    if json_path is not None:
        json_path.write_text(json.dumps(
            {"ref": other.label, "rounds": rounds, "count": count,
             "figures": [{"name": c.name, "this": c.this, "ref": c.ref, "ratios": c.ratios}
                         for c in comparisons]}, indent=2))
    return 0
