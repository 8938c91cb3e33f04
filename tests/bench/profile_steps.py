"""Where a broker's CPU goes, step by step on the request path, from py-spy's raw profiles.

    .venv/bin/python tests/bench/profile_steps.py DIR/produce-1.txt [OTHER.txt ...]
    bin/pybroker-bench --profile DIR --workloads raw [--ab REF[,REF...]] [--count N]

Reads the collapsed stacks `bin/pybroker-bench --profile DIR` (or `py-spy record --format
raw`) wrote and gives each sample to one step of the path: the innermost frame that belongs to
a step names it (a frame in storage/ called from a handler is "append", not "handler").
Prints each step's share of the samples, one column per file, so a profile of this build
and one of an older build (tests/bench/ab.py builds it) read side by side. A share times the
run's broker CPU per million records (the bench prints it) is that step's CPU per million.

A sample of a thread that waits is not work, though py-spy cannot always tell (its idle test
reads the thread's state, and a thread blocked in epoll or on a lock can look busy): trio's
I/O wait (epoll in `get_events`) and its worker threads' wait for a job (`_work` in
_thread_cache.py) are dropped before the shares are taken (`IDLE`).

The second form (`profile_raw`) runs tests/bench/raw_load.py's fixed frames (produce acks=1,
acks=all, then fetch) against this build, then each REF of `--ab`, each phase under py-spy,
and prints per step the broker's CPU per request and per record: the step's share of the busy
samples times the phase's broker CPU (user + system, from its CPU clock). A share is of
samples, which py-spy takes of a thread that is runnable, not only running: on a loaded
machine a step that waits for the CPU weighs a little more. py-spy's sampling costs the
broker a little, alike for every build.
"""
from __future__ import annotations

import collections
import shutil
import sys
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# (step, substrings of a frame "function (file:line)"); the first step to match wins, so the
# narrow ones come before the packages they live in.
STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("metrics", ("pybroker/stats/", "pybroker/ops/metrics", "request_log")),
    ("authorize", ("handlers/_authz", "handlers/authz", "pybroker/security/acl")),
    ("quota", ("pybroker/quota/",)),
    ("validate", ("storage/validator.py", "protocol/records/", "producer_state",
                  "txn_verifier", "_has_transactional_batch")),
    ("append", ("pybroker/storage/",)),
    ("replicate", ("pybroker/replica/",)),
    # before decode: the encoder's helpers live in protocol/primitives.py too
    ("respond", ("encode_response", "Message.encode", "send_parts", "_send_buffers",
                 "_send_region", "GatherIO", "write_", "uvarint_bytes")),
    ("decode", ("decode_request", "Message.decode", "protocol/headers.py",
                "read_tag_section", "protocol/primitives.py")),
    ("framing", ("protocol/framing.py", "_Requests.receive", "_serve ")),
    ("handler", ("pybroker/handlers/", "network/dispatch.py", "network/request_hooks")),
    ("threads", ("_thread_cache.py",)),
    ("trio loop", ("trio/",)),
)
NAMES = tuple(name for name, _ in STEPS) + ("other",)
# Innermost frames of a thread that is waiting, not working, as (function, file): trio's epoll
# wait for I/O and a worker thread's wait for its next job. py-spy writes a frame as
# "Class.function (path/file.py:line)", the path as the interpreter has it.
IDLE: tuple[tuple[str, str], ...] = (("get_events", "trio/_core/_io_epoll.py:"),
                                     ("_work", "trio/_core/_thread_cache.py:"))


def step_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        for name, marks in STEPS:
            if any(mark in frame for mark in marks):
                return name
    return "other"


def idle(frames: list[str]) -> bool:
    """Whether the sample's innermost frame is a wait (`IDLE`)."""
    leaf = frames[-1] if frames else ""
    function, _, where = leaf.partition(" (")
    function = function.rpartition(".")[2]
    return any(function == name and file in where for name, file in IDLE)


def shares(path: Path) -> tuple[dict[str, float], int]:
    """Each step's share of the busy samples in one raw profile, and the busy sample count
    (idle samples, `IDLE`, left out)."""
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        frames = stack.split(";")
        if idle(frames):
            continue
        counts[step_of(frames)] += int(n)
        total += int(n)
    return {name: counts[name] / total if total else 0.0 for name in NAMES}, total


@dataclass(frozen=True)
class PhaseProfile:
    """One build's profile of one raw phase, and what the broker's CPU clock said of it."""

    build: str
    phase: str
    path: Path
    requests: int
    records: int
    cpu_s: float
    user_s: float


RAW_PHASES = ("raw-produce-1", "raw-produce-all", "raw-fetch")
DEFAULT_REQUESTS = 1_000


def profile_build(build: "Build", out_dir: Path, requests: int) -> list[PhaseProfile]:
    """raw_load's three phases on a fresh broker of `build` (log on /dev/shm, as the A/B's
    raw turn), each recorded by py-spy into `out_dir`/<build>-<phase>.txt."""
    from tests.bench import ab, raw_load
    from tests.bench.bench_broker import Profiler, cpu_seconds, user_seconds
    from tests.helpers import BrokerProcess

    prof = Profiler(out_dir)
    if prof.exe is None:
        raise RuntimeError("py-spy is not installed (.venv/bin/pip install py-spy)")
    work = Path(tempfile.mkdtemp(prefix="pybroker-profile-", dir=ab.RAW_LOG_ROOT))
    (work / "server.properties").write_text(ab.PROPERTIES)
    broker = BrokerProcess(work / "log", config=str(work / "server.properties"),
                           python=build.python, source=build.tree).start(timeout=120)
    out: list[PhaseProfile] = []
    try:
        assert broker.proc is not None
        pid = broker.proc.pid
        for phase in RAW_PHASES:
            if phase == "raw-fetch":
                def run() -> "raw_load.RawPhase":
                    return raw_load.fetch(broker.bootstrap, "profile-raw-produce-1",
                                          (requests + 5) * raw_load.BATCH_RECORDS)
            else:
                topic, acks = f"profile-{phase}", 1 if phase == "raw-produce-1" else -1
                raw_load.create(broker.bootstrap, topic)
                raw_load.produce(broker.bootstrap, topic, 5, ab.SIZE, acks)  # warm

                def run() -> "raw_load.RawPhase":
                    return raw_load.produce(broker.bootstrap, topic, requests, ab.SIZE, acks)
            path = out_dir / f"{build.label}-{phase}.txt"
            with prof.phase(path.stem, pid):
                cpu0, user0 = cpu_seconds(pid), user_seconds(pid)
                done = run()
                cpu, user = cpu_seconds(pid) - cpu0, user_seconds(pid) - user0
            out.append(PhaseProfile(build.label, phase, path, done.requests, done.records,
                                    cpu, user))
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    return out


def step_table(profiles: list[PhaseProfile]) -> str:
    """Markdown: per phase, each step's broker CPU per request (µs) and per record (ns), one
    pair of columns per build."""
    lines: list[str] = []
    for phase in RAW_PHASES:
        columns = [p for p in profiles if p.phase == phase]
        if not columns:
            continue
        split = [(p, shares(p.path)) for p in columns]
        lines.append(f"\n{phase}: broker CPU per request (µs) and per record (ns) by step\n")
        lines.append("| step | " + " | ".join(f"{p.build} µs/req | {p.build} ns/rec"
                                             for p in columns) + " |")
        lines.append("|---|" + "---:|---:|" * len(columns))
        for step in NAMES + ("total",):
            cells = []
            for p, (share, _) in split:
                cpu = p.cpu_s * (1.0 if step == "total" else share[step])
                cells.append(f"{cpu / max(1, p.requests) * 1e6:.0f} | "
                             f"{cpu / max(1, p.records) * 1e9:.0f}")
            lines.append(f"| {step} | " + " | ".join(cells) + " |")
        lines.append("| (user s, CPU s, requests, busy samples) | " + " | ".join(
            f"{p.user_s:.2f} / {p.cpu_s:.2f} | {p.requests} / {n}"
            for p, (_, n) in split) + " |")
    return "\n".join(lines)


def profile_raw(out_dir: Path, refs: str | None = None,
                requests: int = DEFAULT_REQUESTS) -> int:
    """`bin/pybroker-bench --profile DIR --workloads raw [--ab REF[,REF...]]`: the step table
    of this build and of each REF, profiled one after the other."""
    from tests.bench import ab
    builds = [ab.this_build()]
    for ref in (refs or "").split(","):
        if not ref:
            continue
        try:
            builds.append(ab.ref_build(ref))
        except ab.BuildError as exc:
            print(f"--profile: {exc}", file=sys.stderr)
            return 2
    out_dir.mkdir(parents=True, exist_ok=True)
    profiles: list[PhaseProfile] = []
    for build in builds:
        ab.byte_compile(build.tree)
        profiles.extend(profile_build(build, out_dir, requests))
    print(step_table(profiles))
    return 0


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    columns = [(Path(a).name, *shares(Path(a))) for a in argv]
    print("step".ljust(12) + "".join(name[:22].rjust(24) for name, _, _ in columns))
    for step in NAMES:
        print(step.ljust(12) + "".join(f"{s[step]:23.1%} " for _, s, _ in columns))
    print("samples".ljust(12) + "".join(f"{n:23d} " for _, _, n in columns))
    return 0


if TYPE_CHECKING:
    from tests.bench.ab import Build

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
