"""Kafka's names for starting and stopping the broker: bin/kafka-server-start.sh runs the same
program as bin/pybroker-server (in the background with -daemon, Kafka's flag), and
bin/kafka-server-stop.sh stops the broker -daemon started.

The scripts run through bin/_bootstrap; here it is handed a ready venv (this interpreter, with
an install stamp newer than pyproject.toml) so that it installs nothing, and PYTHONPATH makes
the broker this clone's code.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers import ROOT

BIN = ROOT / "bin"


def _env(tmp_path: Path) -> dict[str, str]:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"  # a script, not a symlink: the venv's own must find
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')  # its pyvenv.cfg
    python.chmod(0o755)
    (venv / ".installed").touch()
    return dict(os.environ, PYBROKER_VENV=str(venv), PYTHONPATH=str(ROOT),
                LOG_DIR=str(tmp_path / "logs"))


def test_kafka_server_start_is_pybroker_server(tmp_path: Path) -> None:
    env = _env(tmp_path)
    ours = subprocess.run([str(BIN / "pybroker-server")], capture_output=True, text=True,
                          env=env, timeout=60)
    kafkas = subprocess.run([str(BIN / "kafka-server-start.sh")], capture_output=True,
                            text=True, env=env, timeout=60)
    assert (kafkas.returncode, kafkas.stdout, kafkas.stderr) == \
        (ours.returncode, ours.stdout, ours.stderr)
    assert kafkas.returncode == 1 and kafkas.stderr.startswith("USAGE: pybroker-server ")


def test_daemon_start_and_stop(tmp_path: Path) -> None:
    env = _env(tmp_path)
    config = tmp_path / "server.properties"
    config.write_text(f"listeners=PLAINTEXT://127.0.0.1:0\nlog.dirs={tmp_path / 'data'}\n")
    started = subprocess.run([str(BIN / "kafka-server-start.sh"), "-daemon", str(config)],
                             capture_output=True, text=True, env=env, timeout=60)
    assert started.returncode == 0, started.stderr
    out = tmp_path / "logs" / "kafkaServer.out"
    pid = int((tmp_path / "logs" / "kafkaServer.pid").read_text())
    try:
        _wait_for(lambda: "listening on 127.0.0.1:" in out.read_text())
        stopped = subprocess.run([str(BIN / "kafka-server-stop.sh")], capture_output=True,
                                 text=True, env=env, timeout=30)
        assert stopped.returncode == 0, stopped.stderr
        _wait_for(lambda: "shut down cleanly" in out.read_text())
    finally:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


def _wait_for(condition, timeout: float = 30) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")
