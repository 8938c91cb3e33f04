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
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pybroker.testing_zookeeper import four_letter_word
from tests.helpers import ROOT, venv_not_ready

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


def _why_no_private_namespace() -> str | None:
    # The steps run bin/ scripts inside a namespace with no network: they must not need to
    # install anything first.
    unready = venv_not_ready()
    if unready is not None:
        return unready
    for tool in ("unshare", "ip", "ps"):
        if shutil.which(tool) is None:
            return f"the cluster quickstart needs {tool} on PATH (a private namespace)"
    probe = subprocess.run(["unshare", "--map-root-user", "--net", "--mount", "--pid", "--fork",
                            "--mount-proc", "true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return ("the cluster quickstart needs private network, mount and pid namespaces to own "
                "ports 2181 and 9092-9094 and /tmp/zookeeper without touching this machine's; "
                f"unshare said: {probe.stderr.strip()}")
    home = Path(os.environ.get("ZOOKEEPER_HOME", "/usr/share/zookeeper"))  # as bin/_zookeeper
    if not (home / "bin" / "zkEnv.sh").exists():
        return f"zookeeper is not installed (no {home}/bin/zkEnv.sh; bin/test installs it)"
    return None


# --- inside the namespace ------------------------------------------------------------------------

def _wait_serving(what: str, proc: subprocess.Popen[bytes], ready: Callable[[], bool],
                  timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        if ready():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} was not serving after {timeout} s")


def _zookeeper_serving() -> bool:
    try:
        return "Mode: " in four_letter_word("127.0.0.1", 2181, "srvr")
    except OSError:
        return False


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
            if command.startswith(("bin/zookeeper-server-start.sh", "bin/kafka-server-start.sh")):
                log = workdir / f"server-{n}.log"
                with log.open("wb") as out:  # the child keeps its own descriptor
                    proc = subprocess.Popen(shlex.split(command), cwd=ROOT,
                                            stdin=subprocess.DEVNULL, stdout=out,
                                            stderr=subprocess.STDOUT)
                servers.append(proc)
                try:
                    _wait_serving(command, proc, _zookeeper_serving if "zookeeper" in command
                                  else lambda log=log: b"listening on" in log.read_bytes())
                except RuntimeError as exc:
                    tail = log.read_bytes()[-3000:].decode(errors="replace")
                    raise RuntimeError(f"{exc}; its output ends:\n{tail}") from None
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


def _env() -> dict[str, str]:
    """The bin/ scripts run with this test's Python environment (bin/_bootstrap's
    PYBROKER_VENV) when it is a venv, and import this checkout's pybroker."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if sys.prefix != sys.base_prefix:
        env.setdefault("PYBROKER_VENV", sys.prefix)
    return env


def _needed_under_tmp() -> list[Path]:
    """The checkout and this Python, where they live under /tmp (a fresh clone in CI): the
    namespace's private /tmp would hide them, so they are bound back in at the same paths."""
    tmp = Path("/tmp")
    wanted = {ROOT, Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).parent}
    found = sorted({p.resolve() for p in wanted if p.resolve().is_relative_to(tmp)})
    # Outermost first, and nothing inside another already bound.
    return [p for p in found if not any(p != q and p.is_relative_to(q) for q in found)]


# --- the test ------------------------------------------------------------------------------------

def test_cluster_quickstart_runs_as_written(tmp_path: Path) -> None:
    reason = _why_no_private_namespace()
    if reason:
        pytest.skip(reason)
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    inside = (f'ip link set lo up && mkdir -p {private_tmp}/.host '
              f'&& mount --bind /tmp {private_tmp}/.host && mount --rbind {private_tmp} /tmp'
              + "".join(f' && mkdir -p {shlex.quote(str(p))} && mount --bind '
                        f'{shlex.quote("/tmp/.host/" + str(p.relative_to("/tmp")))} '
                        f'{shlex.quote(str(p))}' for p in _needed_under_tmp())
              + ' && exec "$@"')
    done = subprocess.run(
        ["unshare", "--map-root-user", "--net", "--mount", "--pid", "--fork", "--mount-proc",
         "sh", "-c", inside, "sh", sys.executable, "-m", "tests.cluster.test_readme_cluster",
         str(tmp_path / "work")],
        capture_output=True, text=True, timeout=180, cwd=ROOT,
        env=_env())
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
