"""pybroker as a new user gets it (issue #16): a wheel built from this tree, installed with
confluent-kafka, aiokafka and pytest into a fresh virtual environment outside the repository,
runs a user's tests on the `kafka_broker` / `kafka_topic` fixtures that the `pytest11` entry
point brings; and no module of the installed package imports the project's tests/ or compat/.
Its console scripts are Kafka's tools under their names (every `kafka-*` of bin/), and the
installed `kafka-topics` lists a running broker's topics.

It needs the package registry (pip install), as CI has; pip's cache keeps it to tens of
seconds. It is not skipped when the network is missing: it fails, saying so.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

from pybroker import __version__
from pybroker.testing import Broker
from pybroker.testing.broker import StartWatch, free_port_block
from tests.helpers import ROOT

# What the wheel is built from: the library and its metadata, nothing else of the tree (so
# the build leaves no build/ or egg-info behind in the repository).
SOURCES = ["pyproject.toml", "README.md", "pybroker", "protocol"]

USER_TEST = '''
import asyncio
from confluent_kafka import Consumer, Producer


def test_confluent_round_trip(kafka_bootstrap, kafka_topic):
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(kafka_topic, b"hello")
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "user",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([kafka_topic])
    try:
        for _ in range(40):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                assert message.value() == b"hello"
                return
        raise AssertionError("nothing consumed")
    finally:
        consumer.close()


def test_aiokafka_round_trip(kafka_bootstrap, kafka_topic):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def main():
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(kafka_topic, b"from asyncio")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(kafka_topic, bootstrap_servers=kafka_bootstrap,
                                    group_id="user-aio", auto_offset_reset="earliest")
        await consumer.start()
        try:
            message = await asyncio.wait_for(consumer.getone(), 20)
        finally:
            await consumer.stop()
        assert message.value == b"from asyncio"

    asyncio.run(main())
'''

IMPORT_ALL = '''
import importlib, pkgutil, sys
import protocol, pybroker
names = []
for package in (protocol, pybroker):
    assert "site-packages" in package.__file__, package.__file__
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if info.name.endswith("__main__"):
            continue
        importlib.import_module(info.name)
        names.append(info.name)
leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("tests", "compat"))
assert not leaked, leaked
print(len(names), "modules imported")
'''


def test_every_kafka_tool_of_bin_is_a_console_script() -> None:
    """bin/kafka-X runs `python -m M`; the wheel's script kafka-X runs M's main()."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    in_bin = {}
    for path in (ROOT / "bin").glob("kafka-*"):
        if path.suffix != ".sh" and "-m pybroker.tools." in path.read_text():
            in_bin[path.name] = path.read_text().split(" -m ")[1].split()[0] + ":main"
    assert len(in_bin) >= 13
    assert {k: v for k, v in scripts.items() if k.startswith("kafka-")} == in_bin


def run(*args: str | Path, cwd: Path) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"{args}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout


def test_wheel_in_a_fresh_venv_runs_a_users_tests(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(ROOT / name, source / name)
    wheels = tmp_path / "wheels"
    run(sys.executable, "-m", "pip", "wheel", ".", "-w", wheels, "--no-deps", "-q",
        cwd=source)
    [wheel] = wheels.glob("pybroker-*.whl")
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel,
        "confluent-kafka", "aiokafka", "pytest", cwd=tmp_path)

    # The package ships the library, the plugin's entry point and the console script,
    # never the tests or the compatibility suite.
    listing = run(python, "-m", "pip", "show", "-f", "pybroker", cwd=tmp_path)
    assert "pybroker/testing/pytest_plugin.py" in listing and "protocol/" in listing
    assert "tests/" not in listing and "compat/" not in listing
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    for script in scripts:
        assert (venv / "bin" / script).exists(), script
    topics_tool = venv / "bin" / "kafka-topics"
    assert run(topics_tool, "--version", cwd=tmp_path).strip() == f"{__version__} (pybroker)"
    with Broker() as broker:
        broker.create_topic("made-before-the-tool")
        listed = run(topics_tool, "--bootstrap-server", broker.bootstrap, "--list", cwd=tmp_path)
    assert "made-before-the-tool" in listed.splitlines()
    _console_script_serves(venv, tmp_path)

    # Every module imports from site-packages alone: not the repository (cwd is elsewhere,
    # -I drops PYTHONPATH and the script's directory), and nothing of tests/ or compat/.
    assert "modules imported" in run(python, "-I", "-c", IMPORT_ALL, cwd=tmp_path)

    project = tmp_path / "project"
    project.mkdir()
    (project / "test_with_kafka.py").write_text(textwrap.dedent(USER_TEST))
    out = run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=project)
    assert "2 passed" in out, out


def _console_script_serves(venv: Path, tmp_path: Path) -> None:
    """The installed `pybroker-server` at the default num.cores (every CPU): on a machine of
    several, a node whose supervisor runs its workers as the venv's `python -m pybroker`,
    from site-packages alone (cwd elsewhere, no PYTHONPATH); the installed kafka-topics
    creates a topic through it, and SIGTERM stops it all with exit code 0."""
    cores = len(os.sched_getaffinity(0))
    port = free_port_block("127.0.0.1", cores)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    server = subprocess.Popen(
        [str(venv / "bin" / "pybroker-server"), "--defaults",
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
         "--override", f"log.dirs={tmp_path / 'server-logs'}"],
        cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        assert server.stderr is not None
        watch, serving = StartWatch(), None
        for line in server.stderr:
            lines.append(line)
            serving = watch.feed(line)
            if serving is not None:
                break
        assert serving == port, "".join(lines)
        assert watch.node == (cores > 1), "".join(lines)
        created = run(venv / "bin" / "kafka-topics", "--bootstrap-server", f"127.0.0.1:{port}",
                      "--create", "--topic", "spread", "--partitions", str(2 * cores),
                      cwd=tmp_path)
        assert "Created topic spread." in created
        server.send_signal(signal.SIGTERM)
        rest = server.communicate(timeout=60)[1]
    finally:
        server.kill()
    assert server.returncode == 0, "".join(lines) + rest


def test_the_first_run_of_the_readme_command_prints_nothing_alarming(tmp_path: Path) -> None:
    """Issue #27: the README's first command on a fresh clone sets up .venv and starts. What
    it prints while doing so is its one "setting up" line: no boxed setuptools warning, no
    pip notice. Run here as `bin/pybroker-server --version` on a copy of the checkout with no
    .venv, which bin/_bootstrap builds exactly as the README's command does."""
    clone = tmp_path / "clone"
    clone.mkdir()
    for name in [*SOURCES, "bin", "config"]:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, clone / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(ROOT / name, clone / name)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYBROKER_VENV", "PYTHONPATH", "VIRTUAL_ENV", "PYTHONWARNINGS")}
    done = subprocess.run([str(clone / "bin" / "pybroker-server"), "--version"], cwd=clone,
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip() == f"{__version__} (pybroker)"
    assert done.stderr.splitlines() == [
        f"pybroker: setting up {clone}/.venv (first run only)..."], done.stderr
