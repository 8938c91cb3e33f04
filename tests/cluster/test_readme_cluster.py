"""The README's cluster quickstart, run as written: a real ZooKeeper, three brokers, kill -9
of the leader.

The lines between `<!-- cluster-quickstart:begin -->` and `<!-- cluster-quickstart:end -->`
use the fixed addresses of the shipped files (ZooKeeper on 2181, brokers on 9092-9094) and their
fixed data directories under /tmp. To run them unchanged without touching this machine's ports
or files, the run gets a namespace of its own, as tests/test_readme.py's tour does, and more:
a private network (only its loopback), a private /tmp (a directory of the test bound over it)
and private process ids, so that `ps aux | grep server-1.properties` sees this run's brokers
and no one else's.

How each line runs: the four server commands start in the background, each in its own
"terminal" (a child process), and the next line waits until it serves; `> ` lines are typed
into the command above them; the others run to the end. The README shows a run where broker 1
leads, as Kafka's quickstart does; the leader here is whichever broker the topic's assignment
put first, so the test relabels brokers (the leader becomes "1", the next replicas "2" and
"3") before comparing with the README's ```text blocks, and gives `grep` the real leader's file
and `kill -9` the pid `ps` printed. `--describe` after the kill is rerun until the leadership
has moved (the README says "a few seconds later"), within the session timeout plus 5 s.

`python -m tests.cluster.test_readme_cluster WORKDIR` is the part inside the namespace.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.cluster.private_namespace import (
    SERVER_COMMANDS, run_inside, start_server, why_no_private_namespace,
)
from tests.helpers import ROOT

README = ROOT / "README.md"
SESSION_TIMEOUT_S = 6  # zookeeper.session.timeout.ms of config/cluster/*.properties
PORTS = {1: 9092, 2: 9093, 3: 9094}


@dataclass
class Step:
    """A line of the quickstart: a command, what is typed into it, the output shown after it."""

    command: str
    typed: list[str] = field(default_factory=list)
    shown: str | None = None  # the ```text block that follows, if any


def quickstart_steps() -> list[Step]:
    text = README.read_text()
    block = text.split("<!-- cluster-quickstart:begin -->", 1)[1].split(
        "<!-- cluster-quickstart:end -->", 1)[0]
    steps: list[Step] = []
    for kind, body in re.findall(r"^```(sh|text)\n(.*?)^```$", block, flags=re.M | re.S):
        if kind == "text":
            steps[-1].shown = body
            continue
        for line in body.splitlines():
            if line.startswith("> "):
                steps[-1].typed.append(line[2:])
            elif line.strip():
                steps.append(Step(line))
    return steps


# --- inside the namespace ------------------------------------------------------------------------

def run_quickstart(workdir: Path) -> dict[str, object]:
    """Run the steps as written; return what the assertions need."""
    servers: list[subprocess.Popen[bytes]] = []
    results: list[dict[str, object]] = []
    leader_pid: int | None = None
    relabel: dict[int, int] = {}  # real broker id -> the README's
    timings: dict[str, float] = {}
    t_start = time.monotonic()
    try:
        for n, step in enumerate(quickstart_steps()):
            command = step.command
            if command.startswith(SERVER_COMMANDS):
                servers.append(start_server(command, workdir / f"server-{n}.log"))
                results.append({"command": command, "started": True})
                continue
            if command.startswith("ps aux | grep server-1.properties"):
                # The README's leader is broker 1; this run's is the one relabelled 1.
                command = command.replace("server-1.properties",
                                          f"server-{_real(relabel, 1)}.properties")
            elif command.startswith("kill -9 "):
                assert leader_pid is not None, "ps printed no broker"
                command = f"kill -9 {leader_pid}"
                timings["killed_at"] = time.monotonic()
            describe = "--describe" in command
            after_kill = describe and "killed_at" in timings
            deadline = time.monotonic() + SESSION_TIMEOUT_S + 5
            while True:
                done = subprocess.run(command, shell=True, cwd=ROOT, capture_output=True,
                                      text=True, timeout=60,
                                      input="\n".join(step.typed) + "\n" if step.typed else None)
                moved = _leader(done.stdout) not in (None, _real(relabel, 1))
                if not after_kill or moved or time.monotonic() > deadline:
                    break
                time.sleep(0.5)  # "a few seconds later": the session has not expired yet
            if describe and not relabel:
                relabel = _labels(done.stdout)
            if after_kill:
                timings["moved_after"] = time.monotonic() - timings["killed_at"]
            if command.startswith("ps aux | grep "):
                wanted = command.split()[-1]
                found = [int(line.split()[1]) for line in done.stdout.splitlines()
                         if f"-m pybroker config/cluster/{wanted}" in line]
                assert len(found) == 1, done.stdout
                leader_pid = found[0]
            results.append({"command": command, "code": done.returncode, "stdout": done.stdout,
                            "stderr": done.stderr, "shown": step.shown,
                            "relabelled": _relabelled(done.stdout, relabel) if describe
                            else None})
    finally:
        for proc in servers:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    timings["total"] = time.monotonic() - t_start
    return {"steps": results, "relabel": relabel, "leader_pid": leader_pid,
            "timings": timings}


def _partition_line(describe: str) -> str | None:
    return next((line for line in describe.splitlines() if "\tPartition: 0" in line), None)


def _labels(describe: str) -> dict[int, int]:
    """Real broker id -> README's: the replicas in assignment order become 1, 2, 3."""
    line = _partition_line(describe)
    if line is None:
        return {}
    replicas = re.search(r"Replicas: ([\d,]+)", line).group(1).split(",")  # type: ignore[union-attr]
    return {int(r): i for i, r in enumerate(replicas, 1)}


def _real(relabel: dict[int, int], label: int) -> int | None:
    return next((k for k, v in relabel.items() if v == label), None)


def _leader(describe: str) -> int | None:
    line = _partition_line(describe)
    match = line and re.search(r"Leader: (\d+)", line)
    return int(match.group(1)) if match else None


def _relabelled(describe: str, relabel: dict[int, int]) -> str:
    """The describe output with broker ids relabelled as the README's, TopicId masked."""
    def ids(match: re.Match[str]) -> str:
        return match.group(1) + ",".join(str(relabel.get(int(i), f"?{i}"))
                                         for i in match.group(2).split(","))
    text = re.sub(r"(Leader: |Replicas: |Isr: )([\d,]+)", ids, describe)
    return re.sub(r"TopicId: \S+", "TopicId: <id>", text)


# --- the test ------------------------------------------------------------------------------------

def test_cluster_quickstart_runs_as_written(tmp_path: Path) -> None:
    reason = why_no_private_namespace()
    if reason:
        pytest.skip(reason)
    done = run_inside("tests.cluster.test_readme_cluster", tmp_path, timeout=180)
    assert done.returncode == 0, done.stderr[-5000:]
    run = json.loads(done.stdout.splitlines()[-1])
    steps = {i: s for i, s in enumerate(run["steps"])}
    for step in steps.values():
        assert step.get("started") or step["code"] == 0, step
    assert len(steps) == 12, [s["command"] for s in steps.values()]
    zk, b1, b2, b3, create, describe, produce, consume, ps, kill, describe2, consume2 = \
        steps.values()
    assert "Created topic my-replicated-topic." in create["stdout"]
    assert set(run["relabel"].values()) == {1, 2, 3}, describe["stdout"]
    mask = re.compile(r"TopicId: \S+")
    for step in (describe, describe2):
        assert step["relabelled"] == mask.sub("TopicId: <id>", step["shown"]), step["stdout"]
    assert run["leader_pid"] is not None, ps["stdout"]
    assert run["timings"]["moved_after"] < SESSION_TIMEOUT_S + 5
    for step in (consume, consume2):
        assert step["stdout"].splitlines() == ["my test message 1", "my test message 2"], step
        assert "Processed a total of 2 messages" in step["stderr"]


if __name__ == "__main__":
    work = Path(sys.argv[1])
    work.mkdir(parents=True, exist_ok=True)
    print(json.dumps(run_quickstart(work)))
