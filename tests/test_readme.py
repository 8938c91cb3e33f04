"""The README's Python snippets, run exactly as printed (issue #18).

The tour talks to `127.0.0.1:9092`, as the README's broker listens. To run it unchanged without
touching that port on this machine (a developer's broker, other test runs), the test gives the
tour a network of its own: a private network namespace (`unshare`), in which a broker started
from config/standalone/server.properties owns 127.0.0.1:9092 (and 9093 and up: a broker a CPU)
and nothing else is there. Before the Python
snippet the README's kcat lines write "hello" to a topic, so a snippet that prints an older
record instead of its own is caught. The embedding snippet listens on a free port and needs no
such care; it is run beside a directory named `pybroker`, where a clone of that name would be.

`python -m tests.test_readme WORKDIR` is the part that runs inside the namespace.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.helpers import ROOT, BrokerProcess

README = ROOT / "README.md"
TOUR_PORT = 9092


def python_snippets() -> dict[str, str]:
    """The README's ```python blocks, by section: "tour" and "embedding"."""
    text = README.read_text()
    snippets: dict[str, str] = {}
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        blocks = re.findall(r"^```python\n(.*?)^```$", section, flags=re.M | re.S)
        if blocks:
            assert len(blocks) == 1, section.splitlines()[0]
            snippets[section.splitlines()[0]] = blocks[0]
    return {"tour": snippets["A short tour with a stock client"],
            "embedding": snippets["Embedding"]}


def tour_shell_lines() -> list[str]:
    """The kcat lines that come before the tour's Python snippet, comments and all."""
    section = README.read_text().split("## A short tour with a stock client", 1)[1]
    block = re.search(r"^```sh\n(.*?)^```$", section, flags=re.M | re.S)
    assert block is not None
    return block.group(1).splitlines()


def _why_no_private_network() -> str | None:
    """Why the tour cannot have a network of its own here, or None when it can."""
    for tool in ("unshare", "ip", "kcat"):
        if shutil.which(tool) is None:
            return f"the tour needs {tool} on PATH (a private network namespace, the kcat lines)"
    probe = subprocess.run(["unshare", "--map-root-user", "--net", "true"], capture_output=True,
                           text=True, timeout=30)
    if probe.returncode != 0:
        return ("the tour needs a private network namespace to own 127.0.0.1:9092 without "
                f"touching this machine's; unshare said: {probe.stderr.strip()}")
    return None


def run_tour(workdir: Path) -> dict[str, list]:  # type: ignore[type-arg]
    """Inside the namespace: the README's broker, kcat lines and Python tour (twice), as
    printed; (exit code, stdout, stderr) of each."""
    # num.cores as the file leaves it (every CPU): the README's server, ports 9092 and up.
    broker = BrokerProcess(workdir / "logs", port=TOUR_PORT, pin_cores=False,
                           config=str(ROOT / "config" / "standalone" / "server.properties")
                           ).start()
    results: dict[str, list] = {}  # type: ignore[type-arg]
    try:
        for i, line in enumerate(tour_shell_lines()):
            done = subprocess.run(line, shell=True, capture_output=True, text=True, timeout=60)
            results[f"sh-{i}"] = [done.returncode, done.stdout, done.stderr]
        script = workdir / "tour.py"
        script.write_text(python_snippets()["tour"])
        for run in ("tour-1", "tour-2"):
            done = subprocess.run([sys.executable, str(script)], cwd=workdir,
                                  capture_output=True, text=True, timeout=60)
            results[run] = [done.returncode, done.stdout, done.stderr]
    finally:
        broker.stop()
    return results


def test_tour_snippet_runs_as_printed(tmp_path: Path) -> None:
    reason = _why_no_private_network()
    if reason:
        pytest.skip(reason)
    done = subprocess.run(
        ["unshare", "--map-root-user", "--net", "sh", "-c", 'ip link set lo up && exec "$@"',
         "sh", sys.executable, "-m", "tests.test_readme", str(tmp_path)],
        capture_output=True, text=True, timeout=240, cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.splitlines()[-1])
    assert results["sh-0"][0] == 0, results
    assert results["sh-1"][:2] == [0, "hello\n"], results  # the record the snippet must not print
    for run in ("tour-1", "tour-2"):  # each run reads what it wrote, not an older record
        assert results[run][:2] == [0, "b'k' b'hi again'\n"], results


def test_embedding_snippet_runs_as_printed_beside_a_pybroker_directory(tmp_path: Path) -> None:
    # The issue: run next to a clone named pybroker, the script imported the clone directory
    # (a namespace package) instead of pybroker, "ImportError ... (unknown location)".
    # bin/_bootstrap puts the project on the venv's path so that the package wins.
    if not Path(sysconfig.get_paths()["purelib"], "pybroker-home.pth").exists():
        pytest.skip(f"{sys.executable} is not a venv made by bin/_bootstrap (no "
                    "pybroker-home.pth), which the README's advice is about")
    (tmp_path / "pybroker" / "config").mkdir(parents=True)  # a clone's shape, no __init__.py
    script = tmp_path / "embed.py"
    script.write_text(python_snippets()["embedding"])
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"bootstrap: 127\.0\.0\.1:\d+\n", done.stdout), done.stdout


if __name__ == "__main__":
    print(json.dumps(run_tour(Path(sys.argv[1]))))
