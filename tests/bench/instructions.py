"""Instructions per record: the CPU gate's measure, which other work on the machine cannot move.

The timed A/B (tests/bench/ab.py) reads the broker's CPU seconds, and on this 2-CPU machine
(two hyperthreads, shared with other sessions) CPU time per record moved by up to 2x between
turns of one build with what else ran: raw fetch user-s/M from 0.632 to 1.300 x REF in one
run. A gate on that had to skip whenever the machine was busy, which was every CI run. The
number of instructions the broker executes for a request does not depend on the machine's
load, so this counts them, with valgrind's callgrind (no hardware counters on this VM).

Each build's broker runs as `python -m pybroker` under `valgrind --tool=callgrind
--instr-atstart=no` through tests/bench/instr_broker.py, on a log in /dev/shm, and takes
tests/bench/raw_load.py's fixed frames over a real loopback socket: warm-up requests and a
warm-up fetch uncounted, then rounds of `requests` Produce requests of 1,000 1 KB
records with acks=1 and with acks=all (one topic each) and a Fetch of what that round's
acks=1 phase wrote. Counting is switched on after the warm-up and each phase ends with a
dump, so a phase's count is the broker's whole request path (the socket reads, framing,
decode, authorize, quota, append, respond, the metrics) for its requests, in all the broker's
threads, and nothing of its start, its topic creation or this process's client. The figure is
instructions per record, user mode (valgrind does not see the kernel's copies).

What else makes a count move, and what holds it still:
- the broker's timers, which run on wall time while valgrind makes the broker ~50x slower:
  its trio clock runs at CLOCK_RATE of the wall's;
- glibc's `rep movsb`/`rep stosb`, one instruction a byte to valgrind: NO_REP_STRINGS;
- how much of a frame the socket holds when the broker reads (each read a pass of its loop):
  fixed socket buffers, BUFFER_BYTES;
- str hashing: PYTHONHASHSEED=0;
- Python's warm-up (quickening, specialisation): WARMUP_REQUESTS.
What is left is the connection's scheduling (a pass of Python more or less): rounds of one
build agree within ~3-5 % for produce (~1,000 instructions a record) and usually as well for
fetch (~550, all per request), whose rounds once spread 0.88-1.09; the gate's verdict is the
median of the rounds.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from tests.bench import raw_load
from tests.bench.ab import (
    CACHE, PROPERTIES, RAW_LOG_ROOT, Build, Comparison, checked_ref, table, this_build,
)
from tests.helpers import BrokerProcess

HERE = Path(__file__).resolve().parent
TOGGLE_SOURCE = HERE / "callgrind_toggle.c"
ENTRY = HERE / "instr_broker.py"
SIZE = 1024
# Uncounted requests a phase before the first round: Python 3.11 quickens a function and
# specialises its instructions over its first calls, which made the first counted round's
# Fetch ~8 % dearer than the next ones after a warm-up of 5.
WARMUP_REQUESTS = 20
DEFAULT_ROUNDS, DEFAULT_REQUESTS = 3, 20
NOTE = "instructions per record (callgrind), lower is better"
# The phases of a round, in the order they run.
PHASES = ("produce acks=1", "produce acks=all", "fetch")
FIGURE = "instr/record"
# The broker's trio clock runs at this share of the wall's (instr_broker.py). Its timers
# (retention, checkpoints, the memory check: a few dozen wake-ups in 10 s) run on wall time,
# and the broker under valgrind is ~50x slower than native, so at full rate they cost as much
# in a phase as ~5-10 % of its requests, more the more loaded the machine: 553,000
# instructions a second of an idle broker, against 63,000 at 0.02. The requests wait on no
# timer (one partition, one replica, data there to fetch).
CLOCK_RATE = 0.02
# glibc copies and clears large buffers with `rep movsb` / `rep stosb`, which valgrind counts
# as one instruction a byte (a 1 MB frame's bytearray: a million), while the CPU does them
# 32-64 bytes a cycle; that made the zeroing of one frame half of a Produce's count. With
# these thresholds out of reach glibc uses its vector loops, whose instruction count is
# about what the copy costs.
NO_REP_STRINGS = ("glibc.cpu.x86_rep_movsb_threshold=1099511627776:"
                  "glibc.cpu.x86_rep_stosb_threshold=1099511627776")
# Fixed socket buffers at both ends (the most the kernel allows here, rmem_max/wmem_max), so
# that a 1 MB frame or answer is in the socket whole and the broker reads and writes it in
# the same number of calls each time: with the kernel's autotuned buffers the count of
# reads, each a pass of the receive loop, followed the timing of the two processes.
BUFFER_BYTES = 4 << 20
GATE_PROPERTIES = (f"socket.receive.buffer.bytes={BUFFER_BYTES}\n"
                   f"socket.send.buffer.bytes={BUFFER_BYTES}\n")
_TOTALS = re.compile(rb"^(?:totals|summary):\s*(\d+)", re.M)
_TRIGGER = re.compile(rb"^desc: Trigger: Client Request: (\S+)", re.M)


class Unavailable(RuntimeError):
    """valgrind, its callgrind header or a C compiler is missing: nothing can be counted."""


def missing_tools() -> str | None:
    """Why instructions cannot be counted here, or None when they can."""
    if shutil.which("valgrind") is None:
        return "valgrind is not installed (Debian: apt-get install valgrind)"
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        return "no C compiler (cc) to build the callgrind toggle"
    if not Path("/usr/include/valgrind/callgrind.h").exists():
        return "valgrind/callgrind.h is missing (Debian's valgrind package has it)"
    return None


def toggle_library(cache: Path = CACHE) -> Path:
    """callgrind_toggle.c built once into `cache`, named by its source's hash."""
    why = missing_tools()
    if why is not None:
        raise Unavailable(why)
    source = TOGGLE_SOURCE.read_bytes()
    lib = cache / f"callgrind_toggle-{hashlib.sha256(source).hexdigest()[:16]}.so"
    if not lib.exists():
        cache.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(suffix=".so.tmp", dir=cache)  # two builds at once
        os.close(fd)
        compiler = shutil.which("cc") or "gcc"
        subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", partial,
                        str(TOGGLE_SOURCE)], check=True, capture_output=True)
        os.replace(partial, lib)
    return lib


@dataclass(frozen=True)
class Count:
    """One phase of one build: instructions the broker executed, and what it handled."""

    phase: str
    instructions: int
    records: int
    requests: int
    seconds: float

    @property
    def per_record(self) -> float:
        return self.instructions / self.records


class _Counter:
    """The broker under callgrind and the control line to it."""

    def __init__(self, build: Build, work: Path, slowdown: int) -> None:
        self.work = work
        self.out = work / "callgrind.out"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(work / "control"))
        listener.listen(1)
        listener.settimeout(120)
        self._listener = listener
        # Production's encoder, not the strict one the test run turns on (tests/conftest.py),
        # which REF may not have (as ab.compare).
        env = ["env", "-u", "PYBROKER_STRICT_ENCODE", "PYTHONHASHSEED=0",
               f"GLIBC_TUNABLES={NO_REP_STRINGS}",
               f"PYBROKER_GATE_CONTROL={work / 'control'}",
               f"PYBROKER_GATE_TOGGLE={toggle_library()}",
               f"PYBROKER_GATE_SLOWDOWN={slowdown}",
               f"PYBROKER_GATE_CLOCK_RATE={CLOCK_RATE}"]
        valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                    f"--callgrind-out-file={self.out}", f"--log-file={work / 'valgrind.log'}"]

        def wrap(args: Sequence[str]) -> list[str]:
            # [python, -m, pybroker, ...] -> env ... valgrind ... python instr_broker.py ...
            return [*env, *valgrind, args[0], str(ENTRY), *args[3:]]

        (work / "server.properties").write_text(PROPERTIES + GATE_PROPERTIES)
        self.log_dir = Path(tempfile.mkdtemp(prefix="pybroker-gate-", dir=RAW_LOG_ROOT))
        self.broker = BrokerProcess(self.log_dir, config=str(work / "server.properties"),
                                    python=build.python, source=build.tree, wrap=wrap)
        self._control: socket.socket | None = None

    def __enter__(self) -> "_Counter":
        try:
            self.broker.start(timeout=300)
            self._control, _ = self._listener.accept()
            self._control.settimeout(120)
            self._lines = self._control.makefile("rwb", buffering=0)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self._control is not None:
            self._control.close()
        self._listener.close()
        if self.broker.proc is not None and self.broker.proc.poll() is None:
            self.broker.proc.terminate()
            try:
                self.broker.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.broker.proc.kill()
                self.broker.proc.wait(30)
        shutil.rmtree(self.log_dir, ignore_errors=True)

    def _say(self, line: str) -> None:
        self._lines.write(line.encode() + b"\n")
        answer = self._lines.readline().decode().strip()
        if answer != "ok":
            raise RuntimeError(f"the gate's broker answered {answer!r} to {line!r}: "
                               + (self.work / "valgrind.log").read_text()[-2000:])

    def start(self) -> None:
        """Counting on, from here to the end: each `measure` is one phase's dump."""
        self._say("start")

    def measure(self, name: str, phase: Callable[[], raw_load.RawPhase]) -> Count:
        tag = name.replace(" ", "_")
        done = phase()
        self._say(f"dump {tag}")
        return Count(name, self.instructions(tag), done.records, done.requests, done.seconds)

    def instructions(self, tag: str) -> int:
        """The total of the dump `tag` (callgrind writes one file a dump, `out.N`)."""
        for part in sorted(self.work.glob("callgrind.out.*")):
            text = part.read_bytes()
            trigger = _TRIGGER.search(text)
            if trigger is not None and trigger.group(1) == tag.encode():
                totals = _TOTALS.search(text)
                if totals is None:
                    raise RuntimeError(f"{part} has no totals line")
                part.unlink()
                return int(totals.group(1))
        raise RuntimeError(f"callgrind wrote no dump for {tag} in {self.work}")


def count(build: Build, requests: int, rounds: int,
          slowdown: int = 0) -> dict[str, list[Count]]:
    """Each phase's instructions for `build`'s broker, `rounds` times over in one process,
    `requests` requests a phase. Round r fetches what its own acks=1 phase wrote."""
    with tempfile.TemporaryDirectory(prefix="pybroker-gate-") as tmp, \
            _Counter(build, Path(tmp), slowdown) as counter:
        bootstrap = counter.broker.bootstrap
        produces = ((PHASES[0], "gate-acks1", 1), (PHASES[1], "gate-acksall", -1))
        for _, topic, acks in produces:  # uncounted: the topics, first-use caches
            raw_load.create(bootstrap, topic)
            raw_load.produce(bootstrap, topic, WARMUP_REQUESTS, SIZE, acks, BUFFER_BYTES)
        raw_load.fetch(bootstrap, "gate-acks1", WARMUP_REQUESTS * raw_load.BATCH_RECORDS,
                       buffer_bytes=BUFFER_BYTES)
        counter.start()
        out: dict[str, list[Count]] = {phase: [] for phase in PHASES}
        for rnd in range(rounds):
            for name, topic, acks in produces:
                out[name].append(counter.measure(f"{name} {rnd}", lambda: raw_load.produce(
                    bootstrap, topic, requests, SIZE, acks, BUFFER_BYTES)))
            first = (WARMUP_REQUESTS + rnd * requests) * raw_load.BATCH_RECORDS
            out[PHASES[2]].append(counter.measure(f"{PHASES[2]} {rnd}", lambda: raw_load.fetch(
                bootstrap, "gate-acks1", requests * raw_load.BATCH_RECORDS,
                buffer_bytes=BUFFER_BYTES, first=first)))
        return out


def compare(this: Build, ref: Build, requests: int, rounds: int,
            slowdown: int = 0) -> list[Comparison]:
    """Both builds counted at once (each broker is one valgrind process, single-threaded as
    valgrind runs it, so the two share a 2-CPU machine without changing each other's
    counts); one Comparison a phase, of instructions per record, round by round.
    `slowdown` goes to this build's broker alone (instr_broker.py)."""
    with ThreadPoolExecutor(2) as pool:
        mine = pool.submit(count, this, requests, rounds, slowdown)
        theirs = pool.submit(count, ref, requests, rounds)
        a, b = mine.result(), theirs.result()
    return [Comparison(f"{phase} {FIGURE}", False, [c.per_record for c in a[phase]],
                       [c.per_record for c in b[phase]]) for phase in PHASES]


def over(comparisons: list[Comparison], limit: float, ref: Build) -> list[str]:
    """What rose above `limit` x REF (median of the rounds), one line a workload."""
    return [f"{c.name}: {c.median_ratio:.3f} x {ref.label}'s ({statistics.median(c.this):,.0f} "
            f"against {statistics.median(c.ref):,.0f}; rounds "
            f"{', '.join(f'{r:.3f}' for r in c.ratios)})"
            for c in comparisons if c.median_ratio > limit]


def run(ref: str, rounds: int = DEFAULT_ROUNDS, requests: int = DEFAULT_REQUESTS) -> int:
    """`bin/pybroker-bench --ab REF --instructions`: the gate's count, for any REF."""
    why = missing_tools()
    if why is not None:
        print(f"--instructions: {why}", file=sys.stderr)
        return 2
    other = checked_ref(ref, rounds, "--instructions")
    if other is None:
        return 2
    this = this_build()
    print(table(compare(this, other, requests, rounds), this, other, NOTE))
    return 0
