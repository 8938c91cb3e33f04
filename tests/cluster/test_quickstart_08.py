"""Kafka 0.8's quickstart (docs/QUICKSTART-0.8.md), typed as written, from ZooKeeper to kill -9
of the leader (issue #27).

The lines between `<!-- quickstart-0.8:begin -->` and `<!-- quickstart-0.8:end -->` name
Kafka's fixed addresses (ZooKeeper on 2181, brokers on 9092-9094) and data directories
(/tmp/zookeeper, /tmp/kafka-logs*), and step 6 writes config/server-1.properties and
config/server-2.properties into the checkout. The run gets a private namespace
(tests/cluster/private_namespace.py) with the checkout's config/ replaced by a scratch copy, so
every line runs unchanged and this machine's ports, files and checkout stay as they were.

How each line runs: server commands start in the background (their own "terminal"), and the
next line waits until the server serves; `> ` lines are typed into the command above them
(then end of input, as Ctrl-D); a console consumer without `--max-messages` waits for more
forever, as in Kafka, so it gets Ctrl-C (SIGINT) once it has printed the lines the page shows,
or after 60 s; the properties block is applied as the page says (the line changed where the
file has the key, added where it does not). The page shows broker 1 leading; the leader here
is whichever broker the assignment put first, so `grep` is given the leader's file and
`kill -9` the pid that `ps` printed for it. `--describe` after the kill is rerun until the
leadership has moved ("once ZooKeeper has noticed"), within the session timeout plus 10 s.

`python -m tests.cluster.test_quickstart_08 WORKDIR` is the part inside the namespace.
"""
from __future__ import annotations

import json
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.cluster.private_namespace import (
    SERVER_COMMANDS, run_inside, start_server, why_no_private_namespace,
)
from tests.helpers import ROOT

PAGE = ROOT / "docs" / "QUICKSTART-0.8.md"
SESSION_TIMEOUT_S = 6  # zookeeper.session.timeout.ms of config/server.properties
CONSUMER_WAIT_S = 60


@dataclass
class Step:
    """A line of the page: a command, what is typed into it, the output shown after it; or
    the properties block, as (file, key, value) edits."""

    command: str
    typed: list[str] = field(default_factory=list)
    shown: str | None = None
    edits: list[tuple[str, str, str]] = field(default_factory=list)


def quickstart_steps() -> list[Step]:
    text = PAGE.read_text()
    block = text.split("<!-- quickstart-0.8:begin -->", 1)[1].split(
        "<!-- quickstart-0.8:end -->", 1)[0]
    steps: list[Step] = []
    for kind, body in re.findall(r"^```(sh|text|properties)\n(.*?)^```$", block,
                                 flags=re.M | re.S):
        if kind == "text":
            steps[-1].shown = body
        elif kind == "properties":
            edits, target = [], ""
            for line in body.splitlines():
                if line.strip().endswith(":"):
                    target = line.strip()[:-1]
                elif "=" in line:
                    key, value = line.strip().split("=", 1)
                    edits.append((target, key, value))
            steps.append(Step("(edit)", edits=edits))
        else:
            for line in body.splitlines():
                if line.startswith("> "):
                    steps[-1].typed.append(line[2:])
                elif line.strip():
                    steps.append(Step(line))
    return steps


# --- inside the namespace ------------------------------------------------------------------------

def _edit(edits: list[tuple[str, str, str]]) -> None:
    """Set each key in its file: the line changed where the file has it, else added."""
    for target, key, value in edits:
        path = ROOT / target
        lines = path.read_text().splitlines()
        at = [i for i, line in enumerate(lines) if line.split("=", 1)[0].strip() == key]
        if at:
            for i in at:
                lines[i] = f"{key}={value}"
        else:
            lines.append(f"{key}={value}")
        path.write_text("\n".join(lines) + "\n")


def _consume_until_shown(command: str, shown: str | None) -> dict[str, object]:
    """A consumer that waits for more: Ctrl-C once it printed what the page shows."""
    wanted = len((shown or "").splitlines())
    proc = subprocess.Popen(shlex.split(command), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    lines: queue.Queue[str] = queue.Queue()
    errors: list[str] = []
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or ()],
                     daemon=True).start()
    reading_errors = threading.Thread(target=lambda: errors.extend(proc.stderr or ()),
                                      daemon=True)
    reading_errors.start()
    printed: list[str] = []
    deadline = time.monotonic() + CONSUMER_WAIT_S
    while len(printed) < wanted and time.monotonic() < deadline:
        try:
            printed.append(lines.get(timeout=0.5).rstrip("\n"))
        except queue.Empty:
            if proc.poll() is not None:
                break
    proc.send_signal(signal.SIGINT)
    proc.wait(30)
    reading_errors.join(10)
    while not lines.empty():
        printed.append(lines.get().rstrip("\n"))
    return {"command": command, "code": proc.returncode, "interrupted": True,
            "stdout": "".join(f"{line}\n" for line in printed), "stderr": "".join(errors)}


def _config_of(broker: int) -> str:
    return "server.properties" if broker == 0 else f"server-{broker}.properties"


def _partition_line(describe: str) -> str | None:
    return next((line for line in describe.splitlines() if "\tPartition: 0" in line), None)


def _leader(describe: str) -> int | None:
    line = _partition_line(describe)
    match = line and re.search(r"Leader: (\d+)", line)
    return int(match.group(1)) if match else None


def run_quickstart(workdir: Path) -> dict[str, object]:
    """Run the steps as written; return what the assertions need."""
    servers: dict[str, subprocess.Popen[bytes]] = {}
    results: list[dict[str, object]] = []
    leader: int | None = None
    leader_pid: int | None = None
    alive_before_kill: list[str] = []
    moved_after: float | None = None
    killed_at: float | None = None
    try:
        for n, step in enumerate(quickstart_steps()):
            command = step.command
            if step.edits:
                _edit(step.edits)
                results.append({"command": command, "edited": step.edits})
                continue
            if command.startswith(SERVER_COMMANDS):
                command = command.removesuffix("&").strip()
                log = workdir / f"server-{n}.log"
                servers[command.split()[-1]] = start_server(command, log)
                results.append({"command": command, "started": True, "log": str(log)})
                continue
            if command.startswith("ps aux | grep server-1.properties"):
                # The page's leader is broker 1; this run's is the one --describe showed.
                assert leader is not None, "no --describe named a leader before ps"
                command = command.replace("server-1.properties", _config_of(leader))
            elif command.startswith("kill -9 "):
                assert leader_pid is not None, "ps printed no broker"
                alive_before_kill = [name for name, proc in servers.items()
                                     if proc.poll() is None]
                command = f"kill -9 {leader_pid}"
                killed_at = time.monotonic()
            if "kafka-console-consumer" in command and "--max-messages" not in command:
                results.append(_consume_until_shown(command, step.shown) | {"shown": step.shown})
                continue
            describe = "--describe" in command
            after_kill = describe and killed_at is not None
            deadline = time.monotonic() + SESSION_TIMEOUT_S + 10
            while True:
                done = subprocess.run(command, shell=True, cwd=ROOT, capture_output=True,
                                      text=True, timeout=60,
                                      input="\n".join(step.typed) + "\n" if step.typed else None)
                moved = _leader(done.stdout) not in (None, leader)
                if not after_kill or moved or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            if describe and leader is None:
                leader = _leader(done.stdout)
            if after_kill and killed_at is not None:
                moved_after = time.monotonic() - killed_at
            if command.startswith("ps aux | grep "):
                wanted = f"-m pybroker config/{_config_of(leader or 0)}"
                found = [int(line.split()[1]) for line in done.stdout.splitlines()
                         if line.rstrip().endswith(wanted)]
                assert len(found) == 1, done.stdout
                leader_pid = found[0]
            results.append({"command": command, "code": done.returncode, "stdout": done.stdout,
                            "stderr": done.stderr, "shown": step.shown})
    finally:
        for proc in servers.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    return {"steps": results, "leader": leader, "leader_pid": leader_pid,
            "alive_before_kill": alive_before_kill, "moved_after": moved_after}


# --- the test ------------------------------------------------------------------------------------

def _replicas_and_isr(describe: str) -> tuple[int | None, list[int], list[int]]:
    line = _partition_line(describe) or ""
    replicas = re.search(r"Replicas: ([\d,]+)", line)
    isr = re.search(r"Isr: ([\d,]*)", line)
    return (_leader(describe),
            [int(r) for r in replicas.group(1).split(",")] if replicas else [],
            [int(r) for r in isr.group(1).split(",") if r] if isr else [])


def _outside(tmp_path: Path, inside: str) -> Path:
    """A path written inside the namespace, seen from here: its /tmp is tmp_path/tmp."""
    path = Path(inside)
    return tmp_path / "tmp" / path.relative_to("/tmp") if path.is_relative_to("/tmp") else path


def test_kafka_08_quickstart_runs_as_written(tmp_path: Path) -> None:
    reason = why_no_private_namespace()
    if reason:
        pytest.skip(reason)
    scratch = tmp_path / "config"
    shutil.copytree(ROOT / "config", scratch)
    done = run_inside("tests.cluster.test_quickstart_08", tmp_path, timeout=240,
                      binds={scratch: ROOT / "config"})
    assert done.returncode == 0, done.stderr[-5000:]
    run = json.loads(done.stdout.splitlines()[-1])
    steps = run["steps"]
    commands = [s["command"] for s in steps]
    assert len(steps) == 19, commands
    for step in steps:
        assert step.get("started") or step.get("edited") or step.get("interrupted") \
            or step["code"] == 0, step
    (zk, b0, create, listing, produce, consume, cp1, cp2, edit, b1, b2, create3, describe,
     produce3, consume3, ps, kill, describe2, consume4) = steps
    assert "Created topic test." in create["stdout"]
    assert listing["stdout"].split() == listing["shown"].split() == ["test"]
    for step in (consume, consume3, consume4):
        assert step["stdout"].splitlines() == step["shown"].splitlines(), step
        assert "Processed a total of 2 messages" in step["stderr"], step
    # Step 6: the copies start beside broker 0, each on its own port and data directory,
    # each saying what its old key stands for and that the HTTP side door is taken.
    for started, port in ((b1, 9093), (b2, 9094)):
        text = _outside(tmp_path, started["log"]).read_text()
        assert f"use listeners=PLAINTEXT://127.0.0.1:{port}" in text, text[-3000:]
        assert "HTTP listener http://127.0.0.1:9644 cannot be bound" in text, text[-3000:]
    assert sorted(run["alive_before_kill"]) == sorted(
        ["config/zookeeper.properties", "config/server.properties",
         "config/server-1.properties", "config/server-2.properties"])
    leader, replicas, isr = _replicas_and_isr(describe["stdout"])
    assert sorted(replicas) == [0, 1, 2] and sorted(isr) == [0, 1, 2], describe["stdout"]
    assert leader == run["leader"] and leader in replicas
    new_leader, replicas2, isr2 = _replicas_and_isr(describe2["stdout"])
    assert replicas2 == replicas, describe2["stdout"]
    assert new_leader is not None and new_leader != leader, describe2["stdout"]
    assert leader not in isr2 and sorted(isr2) == sorted(set(replicas) - {leader}), \
        describe2["stdout"]
    assert run["moved_after"] is not None and run["moved_after"] < SESSION_TIMEOUT_S + 10


if __name__ == "__main__":
    work = Path(sys.argv[1])
    work.mkdir(parents=True, exist_ok=True)
    print(json.dumps(run_quickstart(work)))
