"""A real ZooKeeper server as a subprocess, for tests: `Cluster(zookeeper=True)` and the
project's cluster tests start theirs with this module.

The server is Debian's `zookeeper` package (ZOOKEEPER_HOME, default /usr/share/zookeeper)
run in the foreground on a generated properties file: a private data dir, a free loopback
port, and a 500 ms tick so that session timeouts from 1 s to 10 s are accepted (ZooKeeper
clamps a session to 2..20 ticks). The package's `bin/zkEnv.sh` says what it runs with (JAVA,
CLASSPATH: Debian's zookeeper.jar, whose manifest lists its dependencies), so the launcher
sources it rather than computing a classpath; the project's `bin/zookeeper-server-start.sh`
does the same for a person, and its tests pass that script as `command` to start the server
the way a person does. The child `exec`s the JVM, so its pid is ZooKeeper's and SIGKILL
reaches it. A missing package (or java) raises `ZooKeeperNotInstalled` saying what to install,
before anything is started.

Ready means the server answers the four-letter word `ruok` with `imok` and `srvr` with its
mode: `imok` alone comes a moment before the server serves requests (`srvr` then answers
"This ZooKeeper instance is not currently serving requests").
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

__all__ = ["ZooKeeperNotInstalled", "ZooKeeperProcess", "run_zookeeper", "zookeeper_home",
           "four_letter_word", "serving", "free_port"]

TICK_MS = 500
_NOT_INSTALLED = 127  # the launchers' exit code when the package is missing

# What bin/_zookeeper does, for an installed package that has no bin/: source zkEnv.sh for
# JAVA and CLASSPATH, add slf4j's simple binding (Debian's libslf4j-java, a dependency of the
# package; without a binding ZooKeeper logs nothing), exec the JVM on the properties file.
_LAUNCHER = r"""
ZOOBINDIR="$ZOOKEEPER_HOME/bin"
source "$ZOOKEEPER_HOME/bin/zkEnv.sh" || exit 127
JAVA="${JAVA:-java}"
if [ -f /usr/share/java/slf4j-simple.jar ]; then
    CLASSPATH="$CLASSPATH:/usr/share/java/slf4j-simple.jar"
fi
exec "$JAVA" ${KAFKA_HEAP_OPTS:--Xmx256M} $KAFKA_OPTS -cp "$CLASSPATH"     org.apache.zookeeper.server.quorum.QuorumPeerMain "$1"
"""


def zookeeper_home() -> Path:
    """Where ZooKeeper is installed; raises ZooKeeperNotInstalled, saying what to install,
    when it (or the java it runs on) is missing."""
    home = Path(os.environ.get("ZOOKEEPER_HOME") or "/usr/share/zookeeper")
    if not (home / "bin" / "zkEnv.sh").is_file():
        raise ZooKeeperNotInstalled(f"zookeeper is not installed (no {home}/bin/zkEnv.sh): "
                                    "apt-get install zookeeper")
    if shutil.which(os.environ.get("JAVA") or "java") is None:
        raise ZooKeeperNotInstalled("zookeeper needs java, which is not on PATH: "
                                    "apt-get install zookeeper (it brings a JRE)")
    return home


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


def serving(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server on this port (of loopback, or `host`) answers and serves requests."""
    try:
        return (four_letter_word(host, port, "ruok") == "imok"
                and "Mode: " in four_letter_word(host, port, "srvr"))
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

    def __init__(self, work_dir: Path, port: int | None = None,
                 command: Sequence[str | Path] | None = None, host: str = "127.0.0.1",
                 wrap: Callable[[Sequence[str]], list[str]] | None = None) -> None:
        """`command`: what runs the server, given the properties file as its last argument
        (default: Debian's ZooKeeper through zkEnv.sh). `host`: the address it listens on
        and is reached at; `wrap` turns the command line into the one that runs it
        elsewhere (`Network.command`: in a network namespace whose address is `host`)."""
        self.work_dir = work_dir
        self.command = [str(c) for c in command] if command is not None else None
        self.host = host
        self.wrap = wrap
        # A port of our own: free on loopback, and any port is free at a namespace's address.
        self.port = port if port is not None else free_port()
        self.data_dir = work_dir / "data"
        self.config_file = work_dir / "zookeeper.properties"
        self.log_file = work_dir / "zookeeper.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.config_file.write_text(
            f"dataDir={self.data_dir}\nclientPort={self.port}\nclientPortAddress={host}\n"
            f"tickTime={TICK_MS}\nmaxClientCnxns=0\nadmin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,stat\n")

    @property
    def connect(self) -> str:
        """The connection string brokers and kazoo take (zookeeper.connect)."""
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> ZooKeeperProcess:
        """Start the server and wait until it answers `ruok`. Raises ZooKeeperNotInstalled,
        or RuntimeError with the server's output if it exits or stays silent."""
        home = zookeeper_home()
        if self._log is None:
            self._log = self.log_file.open("ab")
        env = dict(os.environ, KAFKA_HEAP_OPTS=os.environ.get("KAFKA_HEAP_OPTS", "-Xmx256M"),
                   ZOOKEEPER_HOME=str(home))
        command = self.command if self.command is not None else \
            ["bash", "-c", _LAUNCHER, "zookeeper"]
        argv = [*command, str(self.config_file)]
        self.proc = subprocess.Popen(self.wrap(argv) if self.wrap else argv, env=env,
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
        return serving(self.port, self.host)

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
def run_zookeeper(work_dir: Path, port: int | None = None,
                  command: Sequence[str | Path] | None = None, host: str = "127.0.0.1",
                  wrap: Callable[[Sequence[str]], list[str]] | None = None,
                  ) -> Iterator[ZooKeeperProcess]:
    """A started ZooKeeperProcess in `work_dir`, killed on the way out."""
    work_dir.mkdir(parents=True, exist_ok=True)
    server = ZooKeeperProcess(work_dir, port, command, host, wrap)
    try:
        yield server.start()
    finally:
        server.close()
