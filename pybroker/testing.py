"""Real brokers for test suites: in-process on a background thread, or as a subprocess that a
test can kill -9.

The beginning of the testing kit (issue #16 builds on it): pybroker's own tests and the
compatibility suite (`compat/`) use these, so neither imports the other. Brokers listen on
an ephemeral loopback port and get test-friendly defaults: no initial rebalance delay (a
group forms at once) and five `__consumer_offsets` and `__transaction_state` partitions
instead of fifty (less to create). Everything else is the broker's real defaults.
"""
from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Iterator

import trio

from pybroker.config import load_broker_config
from pybroker.request_hooks import RequestHooks
from pybroker.server import ServerInfo, serve

__all__ = ["broker_config", "broker_in_thread", "BrokerProcess"]

# The directory holding the pybroker package: a subprocess broker imports the same code.
_SOURCE = Path(__file__).resolve().parents[1]


def broker_config(log_dir: Path, **overrides: str):  # type: ignore[no-untyped-def]
    """A config on an ephemeral loopback port; overrides as keywords, `_` for `.`."""
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(log_dir),
             "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "5",
             "transaction.state.log.num.partitions": "5"}
    props.update({k.replace("_", "."): v for k, v in overrides.items()})
    return load_broker_config(None, props)


@contextmanager
def broker_in_thread(log_dir: Path, hooks: RequestHooks | bool = False,
                     **overrides: str) -> Iterator[ServerInfo]:
    """A real broker on an ephemeral port, served by trio in a background thread. With
    `hooks` (True for a fresh `RequestHooks`, or one to share) it records requests and
    serves `info.broker.services.hooks` (pybroker.request_hooks)."""
    config = broker_config(log_dir, **overrides)
    if hooks is True:
        hooks = RequestHooks()
    started = threading.Event()
    box: dict = {}

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            box["info"] = await nursery.start(partial(serve, config, hooks=hooks or None))
            box["token"] = trio.lowlevel.current_trio_token()
            box["cancel"] = nursery.cancel_scope.cancel
            started.set()

    def run() -> None:
        try:
            trio.run(main)
        except BaseException as exc:  # pragma: no cover - reported below
            box["error"] = exc
        finally:
            started.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait(30)
    if "error" in box:
        raise box["error"]
    try:
        yield box["info"]
    finally:
        trio.from_thread.run_sync(box["cancel"], trio_token=box["token"])
        thread.join(30)


class BrokerProcess:
    """`python -m pybroker` as a child process, so a test can kill -9 it."""

    def __init__(self, log_dir: Path, port: int = 0, config: str | None = None,
                 open_files: int | None = None, file_size_limit: int | None = None,
                 **overrides: str) -> None:
        """With `config`, the file is used as given but for port and log dir. `open_files`
        sets the child's RLIMIT_NOFILE, soft and hard (`ulimit -Hn`: the broker raises its
        soft limit to the hard one); `file_size_limit` its RLIMIT_FSIZE (`ulimit -f`: a
        write past it fails, as on a full disk)."""
        self.config = config
        self.open_files = open_files
        self.file_size_limit = file_size_limit
        self.log_dir = log_dir
        self.port = port
        self.overrides = overrides
        self.proc: subprocess.Popen | None = None
        self.stderr_lines: list[str] = []

    def start(self, timeout: float = 30) -> "BrokerProcess":
        args = [sys.executable, "-m", "pybroker",
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "--override", f"log.dirs={self.log_dir}"]
        if self.config is not None:
            args.insert(3, self.config)
        else:
            args += ["--defaults", "--override", "group.initial.rebalance.delay.ms=0",
                     "--override", "offsets.topic.num.partitions=5",
                     "--override", "transaction.state.log.num.partitions=5"]
        for k, v in self.overrides.items():
            args += ["--override", f"{k.replace('_', '.')}={v}"]
        env = dict(os.environ, PYTHONPATH=str(_SOURCE))
        limited = self.open_files is not None or self.file_size_limit is not None
        self.proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, env=env, cwd=_SOURCE,
                                     preexec_fn=self._limit if limited else None)
        deadline = time.monotonic() + timeout
        assert self.proc.stderr is not None
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError("broker exited early:\n" + "".join(self.stderr_lines))
            self.stderr_lines.append(line)
            m = re.search(r"listening on [\d.]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                threading.Thread(target=self._drain, daemon=True).start()
                return self
        raise RuntimeError("broker did not start:\n" + "".join(self.stderr_lines))

    def _limit(self) -> None:
        if self.open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files, self.open_files))
        if self.file_size_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE,
                               (self.file_size_limit, self.file_size_limit))

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(20)
