"""A real ZooKeeper server for cluster tests, started the way a person starts one.

The server is `bin/zookeeper-server-start.sh` in the foreground (the script `exec`s the JVM,
so the child's pid is ZooKeeper's and SIGKILL reaches it), on a generated properties file:
a private data dir, a free loopback port, and a 500 ms tick so that session timeouts from
1 s to 10 s are accepted (ZooKeeper clamps a session to 2..20 ticks). The script is the one
place that finds ZooKeeper and its classpath; when the package is missing it says so and
exits 127, which `run_zookeeper` turns into `ZooKeeperNotInstalled`.

Ready means the server answers the four-letter word `ruok` with `imok` and `srvr` with its
mode: `imok` alone comes a moment before the server serves requests (`srvr` then answers
"This ZooKeeper instance is not currently serving requests").
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

START_SCRIPT = Path(__file__).resolve().parents[2] / "bin" / "zookeeper-server-start.sh"
TICK_MS = 500
_NOT_INSTALLED = 127  # bin/_zookeeper's exit code when the package is missing


class ZooKeeperNotInstalled(RuntimeError):
    """Debian's zookeeper package (or ZOOKEEPER_HOME) is missing; the message says which."""


def four_letter_word(host: str, port: int, word: str, timeout: float = 2.0) -> str:
    """Send a four-letter word and read the answer to the end (the server then closes)."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode())
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode()


def serving(port: int) -> bool:
    """Whether a server on this loopback port answers and serves requests."""
    try:
        return (four_letter_word("127.0.0.1", port, "ruok") == "imok"
                and "Mode: " in four_letter_word("127.0.0.1", port, "srvr"))
    except OSError:
        return False


def free_port() -> int:
    """A loopback port nothing listens on now. ZooKeeper cannot report a port it picked
    itself, so the port is chosen here; the window for a race is the JVM's start."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ZooKeeperProcess:
    """One standalone ZooKeeper server; `restart()` keeps its data dir and port."""

    def __init__(self, work_dir: Path, port: int | None = None) -> None:
        self.work_dir = work_dir
        self.port = port if port is not None else free_port()
        self.data_dir = work_dir / "data"
        self.config_file = work_dir / "zookeeper.properties"
        self.log_file = work_dir / "zookeeper.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.config_file.write_text(
            f"dataDir={self.data_dir}\nclientPort={self.port}\nclientPortAddress=127.0.0.1\n"
            f"tickTime={TICK_MS}\nmaxClientCnxns=0\nadmin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,stat\n")

    @property
    def connect(self) -> str:
        """The connection string brokers and kazoo take (zookeeper.connect)."""
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> ZooKeeperProcess:
        """Start the server and wait until it answers `ruok`. Raises ZooKeeperNotInstalled,
        or RuntimeError with the server's output if it exits or stays silent."""
        if self._log is None:
            self._log = self.log_file.open("ab")
        env = dict(os.environ, KAFKA_HEAP_OPTS=os.environ.get("KAFKA_HEAP_OPTS", "-Xmx256M"))
        self.proc = subprocess.Popen([str(START_SCRIPT), str(self.config_file)], env=env,
                                     stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code == _NOT_INSTALLED:
                raise ZooKeeperNotInstalled(self._output().strip().splitlines()[-1])
            if code is not None:
                raise RuntimeError(f"zookeeper exited with {code}:\n{self._output()}")
            if self.is_ok():
                return self
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"zookeeper was not serving after {timeout} s:\n{self._output()}")

    def is_ok(self) -> bool:
        return serving(self.port)

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM, as zookeeper-server-stop.sh sends; returns the exit code."""
        return self._signal(signal.SIGTERM, timeout)

    def kill(self) -> int:
        """SIGKILL: the server dies with whatever it had not written yet."""
        return self._signal(signal.SIGKILL, 10.0)

    def restart(self, timeout: float = 30.0) -> ZooKeeperProcess:
        """Stop (if running) and start again on the same data dir and port."""
        self.stop()
        return self.start(timeout)

    def close(self) -> None:
        """Kill the server if it runs; for teardown, whatever the test did."""
        self.kill()
        if self._log is not None:
            self._log.close()
            self._log = None

    def _signal(self, signum: int, timeout: float) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)

    def _output(self) -> str:
        return self.log_file.read_text(errors="replace")


@contextmanager
def run_zookeeper(work_dir: Path, port: int | None = None) -> Iterator[ZooKeeperProcess]:
    """A started ZooKeeperProcess in `work_dir`, killed on the way out."""
    work_dir.mkdir(parents=True, exist_ok=True)
    server = ZooKeeperProcess(work_dir, port)
    try:
        yield server.start()
    finally:
        server.close()
