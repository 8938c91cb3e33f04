"""What the broker's kernel does in each librdkafka produce phase of the A/B, counted.

`python tests/bench/phase_counts.py [--ref REF] [--count N] [--order 1,all] [--kernel]`

One broker (this tree, or commit REF built by `ab.ref_build`) with the A/B's properties and a
log dir on disk, as `ab.run_turn` runs it; then `bench_produce` (the A/B's own workload:
confluent-kafka, 1 KB records, linger.ms 5, batch.size 1 MB) once per entry of `--order`,
each into a topic of its own. Per phase it prints the broker's CPU per million records (user
and system, from /proc) and, counted by `perf stat` on the broker's threads (tracepoints,
which count the same at any load): its system calls by name, context switches, page faults
and the loopback packets sent in its context (`net:net_dev_xmit`: its answers and window
updates, and the client's queued segments that an opened window lets go from the broker's
side), per million records; where the broker has /metrics, its Produce requests and their
mean size; and how much free memory the machine's kernel handed back to the VM's host
meanwhile (free page reporting, where the kernel has it). With `--kernel`, `perf record`
samples the broker's CPU (4 kHz) and the kernel's samples are split by the system call they
ran under, in ms per phase.

Why (issue #28, docs/PERFORMANCE.md "acks=all's system time"): the A/B's librdkafka acks=all
phase cost 1.5x the CPU of acks=1, all of it system time, which the counts here showed was
not the broker's doing: the same requests and system calls per record in both phases, and
the difference inside `write()`, whose cost per MB moves 4-10x with the machine's memory.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.bench import ab  # noqa: E402
from tests.bench.bench_broker import bench_produce  # noqa: E402
from tests.helpers import BrokerProcess  # noqa: E402

SYSCALLS = ("read", "readv", "recvfrom", "write", "writev", "sendmsg", "sendto", "sendfile64",
            "epoll_wait", "epoll_ctl", "futex", "fsync", "fdatasync", "mmap", "munmap", "brk",
            "madvise", "openat", "close", "newfstatat", "lseek", "ioctl")
EVENTS = ("raw_syscalls:sys_enter", "context-switches", "page-faults", "net:net_dev_xmit",
          *(f"syscalls:sys_enter_{name}" for name in SYSCALLS))
KERNEL_HZ = 4000
# perf's start and attach to the broker's threads, before the phase begins (on a loaded
# machine it took up to a second: counts from a phase already running were short).
ATTACH_S = 1.5
PRODUCE_REQUESTS = 'pybroker_requests_total{api="Produce"}'
# Free memory the guest kernel has handed back to the VM's host (virtio-balloon free page
# reporting), machine-wide and cumulative; absent where the kernel does not report.
REPORTED_KIB = Path("/sys/module/page_reporting/parameters/reported_kib")
BYTES_IN = "pybroker_bytes_in_total"


def _metrics(port: int | None) -> dict[str, int]:
    """Produce requests and record bytes appended so far (nothing from a build without
    /metrics, such as 706cf02)."""
    if port is None:
        return {}
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    out: collections.Counter[str] = collections.Counter()
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name == PRODUCE_REQUESTS or name.startswith(BYTES_IN + "{"):
            out[name if name == PRODUCE_REQUESTS else BYTES_IN] += int(float(value))
    return dict(out)


def _reported_kib() -> int | None:
    try:
        return int(REPORTED_KIB.read_text())
    except (OSError, ValueError):
        return None


def _perf_counts(text: str) -> dict[str, float]:
    counts = {}
    for line in text.splitlines():  # -x ,: value,unit,event,...
        fields = line.split(",")
        if len(fields) > 2 and fields[0].replace(".", "").isdigit():
            counts[fields[2].rpartition(":")[2].removeprefix("sys_enter_")] = float(fields[0])
    return counts


def kernel_by_syscall(data: Path) -> dict[str, float]:
    """ms of the broker's CPU per system call (the function below do_syscall_64 in each
    kernel sample's stack; "user" for samples outside the kernel)."""
    script = subprocess.run(["perf", "script", "-i", str(data), "-F", "ip,sym"],
                            capture_output=True, text=True).stdout
    samples: collections.Counter[str] = collections.Counter()
    for block in script.split("\n\n"):
        stack = [line.split()[-1] for line in block.strip().splitlines() if line.strip()]
        if not stack:
            continue
        where = "user"
        if "do_syscall_64" in stack:
            at = stack.index("do_syscall_64")
            where = stack[at - 1] if at else "syscall"
        elif any(s.startswith("asm_") for s in stack):
            where = "interrupt or fault"
        samples[where] += 1
    return {k: v * 1000 / KERNEL_HZ for k, v in samples.most_common()}


def phase(broker: BrokerProcess, topic: str, acks: int, count: int,
          record_to: Path | None) -> dict[str, object]:
    assert broker.proc is not None
    pid = str(broker.proc.pid)
    before = _metrics(broker.http_port)
    reported = _reported_kib()
    stat = subprocess.Popen(["perf", "stat", "-x", ",", "-e", ",".join(EVENTS), "-p", pid],
                            stderr=subprocess.PIPE, text=True)
    record = None if record_to is None else subprocess.Popen(
        ["perf", "record", "-q", "-g", "-e", "cpu-clock", "-F", str(KERNEL_HZ), "-p", pid,
         "-o", str(record_to)], stderr=subprocess.DEVNULL)
    time.sleep(ATTACH_S)
    try:
        done = bench_produce(broker.bootstrap, broker.proc.pid, topic, 1, ab.SIZE, count,
                             acks=acks)
    finally:
        for tool in (record, stat):
            if tool is not None:
                tool.send_signal(2)
        if record is not None:
            record.wait()
        _, perf_out = stat.communicate()
    after = _metrics(broker.http_port)
    reported_after = _reported_kib()
    millions = count / 1e6
    out: dict[str, object] = {
        "acks": acks, "MB/s": round(done.mb_s), "CPU-s/M": round(done.cpu_per_million, 2),
        "user-s/M": round(done.user_per_million, 2),
        "per M": {k: round(v / millions) for k, v in _perf_counts(perf_out).items() if v}}
    requests = after.get(PRODUCE_REQUESTS, 0) - before.get(PRODUCE_REQUESTS, 0)
    if requests:
        out["Produce requests"] = int(requests)
        out["mean request KB"] = round(
            (after.get(BYTES_IN, 0) - before.get(BYTES_IN, 0)) / requests / 1024)
    if reported is not None and reported_after is not None:
        # Machine-wide: what any process freed may be in it, not the broker's alone.
        out["MiB handed to the host"] = round((reported_after - reported) / 1024)
    if record_to is not None:
        out["kernel ms"] = {k: v for k, v in kernel_by_syscall(record_to).items()
                            if v >= 5}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", help="a commit to run instead of this tree")
    parser.add_argument("--count", type=int, default=ab.DEFAULT_COUNT)
    parser.add_argument("--order", default="1,all", help="the phases' acks, in turn")
    parser.add_argument("--kernel", action="store_true", help="perf record each phase")
    args = parser.parse_args(argv)
    if shutil.which("perf") is None:
        print("phase_counts: needs perf (linux-perf)", file=sys.stderr)
        return 2
    build = ab.ref_build(args.ref) if args.ref else ab.this_build()
    with tempfile.TemporaryDirectory(prefix="pybroker-counts-") as tmp:
        work = Path(tmp)
        (work / "server.properties").write_text(ab.PROPERTIES)
        broker = BrokerProcess(work / "log", config=str(work / "server.properties"),
                               python=build.python, source=build.tree).start(timeout=120)
        try:
            for turn, acks in enumerate(args.order.split(",")):
                os.sync()
                result = phase(broker, f"counts-{acks}-{turn}", -1 if acks == "all" else 1,
                               args.count, work / f"{turn}.perf" if args.kernel else None)
                print(json.dumps(result), flush=True)
        finally:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
