"""The bin/ shims: named as Kafka names its tools, also as .sh, each one line over a module.

A few tools are run through their shims in a subprocess, to see the whole path a person
types: the shell script, `bin/_bootstrap`, `python -m pybroker.tools.<tool>`, exit codes, and
Ctrl-C ending the console consumer with its "Processed a total of N messages".
"""
from __future__ import annotations

import importlib
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from pybroker import __version__
from tests.helpers import ROOT, venv_not_ready

BIN = ROOT / "bin"
TOOLS = {
    "kafka-topics": "topics", "kafka-console-producer": "console_producer",
    "kafka-console-consumer": "console_consumer", "kafka-consumer-groups": "consumer_groups",
    "kafka-configs": "configs", "kafka-get-offsets": "get_offsets",
    "kafka-delete-records": "delete_records", "kafka-producer-perf-test": "producer_perf_test",
    "kafka-consumer-perf-test": "consumer_perf_test", "kafka-dump-log": "dump_log",
    "kafka-leader-election": "leader_election", "kafka-log-dirs": "log_dirs",
    "kafka-reassign-partitions": "reassign_partitions", "kafka-transactions": "transactions",
    "kafka-share-groups": "share_groups",
}


_venv_ready = venv_not_ready


needs_venv = pytest.mark.skipif(_venv_ready() is not None, reason=str(_venv_ready()))


def shim(name: str, *args: str, stdin: bytes | None = None, timeout: float = 30
         ) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / name), *args], input=stdin, capture_output=True,
                          timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_each_tool_has_a_one_line_shim_and_a_dot_sh_twin(name: str) -> None:
    path = BIN / name
    assert os.access(path, os.X_OK)
    lines = path.read_text().splitlines()
    assert lines == ["#!/usr/bin/env bash",
                     'source "$(dirname "$0")/_bootstrap" && exec "$PYBROKER_PY" -m '
                     f'pybroker.tools.{TOOLS[name]} "$@"']
    twin = BIN / f"{name}.sh"
    assert twin.is_symlink() and os.readlink(twin) == name
    module = importlib.import_module(f"pybroker.tools.{TOOLS[name]}")
    assert callable(module.main)


@needs_venv
def test_topics_and_console_tools_through_the_shims(bootstrap, name) -> None:
    t = name("shim")
    done = shim("kafka-topics.sh", "--bootstrap-server", bootstrap, "--create", "--topic", t,
                "--partitions", "1")
    assert (done.returncode, done.stdout) == (0, f"Created topic {t}.\n".encode())
    assert t in shim("kafka-topics", "--bootstrap-server", bootstrap, "--list").stdout.decode()
    done = shim("kafka-console-producer.sh", "--bootstrap-server", bootstrap, "--topic", t,
                stdin=b"one\ntwo\nthree\n")
    assert (done.returncode, done.stderr) == (0, b"")

    consumer = subprocess.Popen(
        [str(BIN / "kafka-console-consumer.sh"), "--bootstrap-server", bootstrap, "--topic", t,
         "--from-beginning"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        assert consumer.stdout is not None
        got = [consumer.stdout.readline() for _ in range(3)]
        assert got == [b"one\n", b"two\n", b"three\n"]
        consumer.send_signal(signal.SIGINT)
        _, err = consumer.communicate(timeout=20)
    finally:
        consumer.kill()
    assert consumer.returncode == 130
    assert err.decode().endswith("Processed a total of 3 messages\n")


@needs_venv
def test_unreachable_broker_through_a_shim() -> None:
    start = time.monotonic()
    done = shim("kafka-consumer-groups.sh", "--bootstrap-server", "127.0.0.1:1", "--list")
    assert time.monotonic() - start < 15
    assert done.returncode == 1 and done.stdout == b""
    assert done.stderr.decode().count("\n") == 1
    assert re.fullmatch(r"Error: .*Could not connect to 127\.0\.0\.1:1 \(Connection refused\)\n",
                        done.stderr.decode())


@needs_venv
def test_bad_flag_through_a_shim() -> None:
    done = shim("kafka-get-offsets", "--bootstrap-server", "127.0.0.1:1", "--no-such-flag")
    assert done.returncode == 1
    assert done.stderr == (b"kafka-get-offsets: unrecognized arguments: --no-such-flag "
                           b"(see --help)\n")


def test_modules_run_with_python_dash_m() -> None:
    done = subprocess.run([sys.executable, "-m", "pybroker.tools.dump_log", "--help"],
                          capture_output=True, cwd=ROOT, timeout=30,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0 and b"--print-data-log" in done.stdout


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_every_tool_answers_version(name: str) -> None:
    # Kafka's tools all take --version; it answers before any required flag is checked.
    done = subprocess.run([sys.executable, "-m", f"pybroker.tools.{TOOLS[name]}", "--version"],
                          capture_output=True, text=True, cwd=ROOT, timeout=30,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{__version__} (pybroker)\n", "")


@needs_venv
def test_ctrl_c_stops_the_console_producer_cleanly(bootstrap, name) -> None:
    t = name("shim")
    assert shim("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic",
                t).returncode == 0
    producer = subprocess.Popen(
        [str(BIN / "kafka-console-producer"), "--bootstrap-server", bootstrap, "--topic", t,
         "--timeout", "10"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, cwd=ROOT)
    try:
        assert producer.stdin is not None
        producer.stdin.write(b"typed before ctrl-c\n")
        producer.stdin.flush()  # stdin stays open, as at a terminal
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            done = shim("kafka-get-offsets", "--bootstrap-server", bootstrap, "--topic", t)
            if done.stdout == f"{t}:0:1\n".encode():
                break
            time.sleep(0.1)
        producer.send_signal(signal.SIGINT)
        _, err = producer.communicate(timeout=20)
    finally:
        producer.kill()
    assert (producer.returncode, err) == (130, b"")
