"""Apache Kafka itself as a reference broker (issue #15 §1): the broker every client was
written against, run on this machine beside pybroker for conformance and benchmarks.

Not part of the product. The broker comes from Maven Central, not from a tarball: the pinned
`compat/apache-kafka/pom.xml` names `org.apache.kafka:kafka_2.13` and a log4j binding, and
`mvn dependency:copy-dependencies` puts the jars in `~/.cache/pybroker/apache-kafka-<version>/`
on first use. A marker file holding the pom's hash says the copy is complete, so an
interrupted fetch is redone and a changed pom fetches again; a file lock keeps two processes
from fetching into the same directory at once.

`ApacheKafka(work_dir)` is one combined broker+controller KRaft node (static quorum of
itself) with Kafka's shipped `config/server.properties` defaults and its launch scripts' JVM
flags, on two free loopback ports. `start()` formats the storage (`kafka.tools.StorageTool`,
what `kafka-storage.sh` runs) and starts `kafka.Kafka`, returning once the port answers
ApiVersions, which Kafka only does after its request processing is enabled, i.e. once the
node has caught up with its own metadata. The JVM is never left running: `stop()` (SIGTERM,
then SIGKILL), atexit, and on Linux the kernel kills it if this process dies first.

`ApacheKafkaCluster(work_dir, nodes=3)` is that node times three, the peer of pybroker's
three brokers on ZooKeeper (issue #15 §3): every node combined, one static quorum naming all
the controllers, formatted with one cluster id, launched together, stopped together.
"""
from __future__ import annotations

import atexit
import base64
import ctypes
import fcntl
import hashlib
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Mapping, Sequence

POM = Path(__file__).resolve().parent / "apache-kafka" / "pom.xml"
MARKER = "COMPLETE"

# kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS, so the reference runs as shipped.
JVM_FLAGS = ["-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
             "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
             "-Djava.awt.headless=true"]

# Kafka's config/server.properties (4.x) less what ApacheKafka sets per node: ports, dirs, id.
SHIPPED_DEFAULTS = {
    "num.network.threads": "3",
    "num.io.threads": "8",
    "socket.send.buffer.bytes": "102400",
    "socket.receive.buffer.bytes": "102400",
    "socket.request.max.bytes": "104857600",
    "num.partitions": "1",
    "num.recovery.threads.per.data.dir": "1",
    "offsets.topic.replication.factor": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "log.retention.hours": "168",
    "log.segment.bytes": "1073741824",
    "log.retention.check.interval.ms": "300000",
}

LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
"""


class ApacheKafkaUnavailable(RuntimeError):
    """Apache Kafka cannot be fetched or run here (the message says what is missing)."""


def pom_version(pom: Path) -> str:
    """The Kafka version a pom pins (`<kafka.version>`): the one place each build writes it."""
    m = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", pom.read_text())
    assert m, f"{pom} pins no <kafka.version>"
    return m.group(1).strip()


def kafka_version() -> str:
    return pom_version(POM)


def cache_root() -> Path:
    """~/.cache/pybroker (or under $XDG_CACHE_HOME): every Maven-built piece of compat/."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pybroker"


def cache_dir() -> Path:
    return cache_root() / f"apache-kafka-{kafka_version()}"


def classpath() -> str:
    """The broker's classpath, fetching the jars with Maven first if the cache lacks them."""
    lib = fetch()
    return os.pathsep.join(str(p) for p in sorted(lib.glob("*.jar")))


def fetch() -> Path:
    """The directory of the broker's jars, complete; fetched with Maven when it is not."""
    root = cache_dir()
    lib = root / "lib"

    def install(staging: Path) -> None:
        shutil.rmtree(lib, ignore_errors=True)
        staging.rename(lib)
    maven_cached(root, hashlib.sha256(POM.read_bytes()).hexdigest(),
                 f"Apache Kafka {kafka_version()} (the reference broker)",
                 lambda staging: ["-f", str(POM), "dependency:copy-dependencies",
                                  f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
                 lambda staging: any(staging.glob("kafka_2.13-*.jar")), install)
    return lib


def maven_cached(root: Path, want: str, what: str, mvn_args: Callable[[Path], list[str]],
                 built: Callable[[Path], bool], install: Callable[[Path], None]) -> None:
    """Make `root` hold a complete Maven build stamped `want` (a hash of its inputs): unless
    its marker already says so, run `mvn -B -q` with `mvn_args(staging)` into a fresh
    staging directory under `root`, check it with `built(staging)`, move it into place with
    `install(staging)`, then write the marker. A file lock keeps two processes from building
    at once (the second waits and finds the first's build)."""
    if _complete(root, want):
        return
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ApacheKafkaUnavailable(
            f"{what} is fetched with Maven, and `mvn` is not on PATH: install it "
            "(Debian: apt-get install maven; bin/test does this)")
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building: wait for it
        if _complete(root, want):
            return
        (root / MARKER).unlink(missing_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="build-", dir=root))
        try:
            done = subprocess.run([mvn, "-B", "-q", *mvn_args(staging)],
                                  capture_output=True, text=True, timeout=900)
            if done.returncode != 0 or not built(staging):
                raise ApacheKafkaUnavailable(
                    f"mvn could not fetch {what} (exit {done.returncode}):\n"
                    f"{done.stdout[-3000:]}{done.stderr[-3000:]}")
            install(staging)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        (root / MARKER).write_text(want + "\n")


def terminate(proc: subprocess.Popen | None, timeout: float) -> None:
    """SIGTERM a JVM (its shutdown hooks run), then SIGKILL after `timeout` seconds."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def _complete(root: Path, want: str) -> bool:
    marker = root / MARKER
    return marker.is_file() and marker.read_text().strip() == want


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not Path(found).exists():
        raise ApacheKafkaUnavailable("Apache Kafka needs Java 17 or later (`java` not found)")
    return found


def free_port() -> int:
    """A loopback port free now. Kafka's controller quorum must be told its port before
    the node starts, so port 0 cannot be used; the small race is retried by start()."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster_id() -> str:
    """A Kafka cluster id: a random UUID in URL-safe base64 without padding, never starting
    with '-' (Kafka's Uuid.randomUuid avoids those: they read as command-line options)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def answers_api_versions(host: str, port: int, timeout: float = 2.0) -> bool:
    """Whether host:port answers an ApiVersions v0 request without error and lists Metadata.

    A Kafka node still starting can answer before it serves the data plane; a client that
    connects then is told Metadata is unsupported (librdkafka: "Required feature not
    supported by broker", permanently), so an answer alone is not readiness."""
    client_id = b"pybroker-probe"
    body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(struct.pack(">i", len(body)) + body)
            head = _read(s, 8)
            if head is None:
                return False
            size, correlation_id = struct.unpack(">ii", head)
            rest = _read(s, size - 4) if correlation_id == 7 and size >= 10 else None
    except OSError:
        return False
    if rest is None:
        return False
    error_code, count = struct.unpack_from(">hi", rest)
    keys = {struct.unpack_from(">h", rest, 6 + 6 * i)[0]
            for i in range(min(count, (len(rest) - 6) // 6))}
    return error_code == 0 and 3 in keys  # 3: Metadata


def _read(s: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _die_with_parent() -> None:
    """In the child before exec: the kernel sends SIGKILL when the parent dies, so a killed
    test run leaves no JVM behind (Linux's PR_SET_PDEATHSIG; elsewhere atexit must do)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class ApacheKafka:
    """One Apache Kafka node, broker and controller in one JVM, on free loopback ports.

    `overrides` are server.properties entries by Kafka's names and win over everything.
    The node's output goes to `work_dir/kafka.out` (`recent_log()` shows its tail).
    start() must be called from a thread that outlives the node (the main thread will do):
    on Linux the kernel ties the JVM's life to the thread that forked it.
    """

    def __init__(self, work_dir: Path | str, *, node_id: int = 1, heap: str = "1g",
                 overrides: Mapping[str, object] | None = None,
                 quorum: Sequence["ApacheKafka"] = (),
                 defaults: Mapping[str, str] = SHIPPED_DEFAULTS) -> None:
        self.work_dir = Path(work_dir)
        self.node_id = node_id
        self.heap = heap
        self.overrides = {k: str(v) for k, v in (overrides or {}).items()}
        # The nodes whose controllers vote (ApacheKafkaCluster's); none: a quorum of itself.
        self.quorum: Sequence[ApacheKafka] = quorum
        self.defaults = dict(defaults)  # under the per-node entries and the overrides
        self.port = 0
        self.controller_port = 0
        self.proc: subprocess.Popen | None = None
        self.start_seconds: float | None = None  # JVM launch to answering ApiVersions
        self._launched = 0.0

    @property
    def bootstrap(self) -> str:
        if not self.port:
            raise RuntimeError("ApacheKafka is not started")
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.work_dir / "kafka.out"

    def properties(self) -> dict[str, str]:
        host = "127.0.0.1"
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": ",".join(
                f"{n.node_id}@{host}:{n.controller_port}" for n in self.quorum or [self]),
            "listeners": f"PLAINTEXT://{host}:{self.port},CONTROLLER://{host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{host}:{self.port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.work_dir / "data"),
            **self.defaults,
        }
        props.update(self.overrides)
        return props

    def start(self, timeout: float = 90) -> "ApacheKafka":
        """Format the storage and start the node; returns once it answers ApiVersions."""
        if self.proc is not None:
            raise RuntimeError("ApacheKafka is already started")
        cp = classpath()
        for attempt in range(3):  # a free port may be taken before the JVM binds it
            self.pick_ports()
            self.prepare(cp, cluster_id())
            if self._launch(cp, timeout):
                return self
            if not self.port_was_taken() or attempt == 2:
                break
        raise ApacheKafkaUnavailable(
            f"Apache Kafka did not start within {timeout:.0f} s:\n" + self.recent_log(60))

    def pick_ports(self) -> None:
        self.port, self.controller_port = free_port(), free_port()

    def prepare(self, cp: str, cluster: str) -> None:
        """Write the node's config and format its storage as a member of `cluster` (every
        node of a cluster is formatted with the same id). The quorum's ports must be picked."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._format(cp, self._write_config(), cluster)

    def port_was_taken(self) -> bool:
        """Whether the last launch failed because another process took one of its ports."""
        return "Address already in use" in self.recent_log(200)

    def _write_config(self) -> Path:
        shutil.rmtree(self.work_dir / "data", ignore_errors=True)
        (self.work_dir / "log4j2.properties").write_text(LOG4J2)
        path = self.work_dir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        return path

    def _jvm(self, cp: str, heap: str) -> list[str]:
        return [java(), f"-Xmx{heap}", f"-Xms{heap}", *JVM_FLAGS,
                f"-Dlog4j2.configurationFile={self.work_dir / 'log4j2.properties'}",
                f"-Dkafka.logs.dir={self.work_dir / 'logs'}", "-cp", cp]

    def _format(self, cp: str, config: Path, cluster: str) -> None:
        # kafka-storage.sh runs the tool with kafka-run-class.sh's default 256 MB heap.
        done = subprocess.run(
            [*self._jvm(cp, "256m"), "kafka.tools.StorageTool", "format",
             "--cluster-id", cluster, "--config", str(config)],
            capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise ApacheKafkaUnavailable(
                f"kafka.tools.StorageTool format failed (exit {done.returncode}):\n"
                f"{done.stdout[-3000:]}{done.stderr[-3000:]}")

    def _launch(self, cp: str, timeout: float) -> bool:
        self.spawn(cp)
        return self.wait_ready(timeout)

    def spawn(self, cp: str) -> None:
        """Launch the prepared node's JVM without waiting for it (a node of a cluster cannot
        answer before a majority of the quorum runs)."""
        self._launched = time.monotonic()
        with open(self.log_path, "w") as out:
            self.proc = subprocess.Popen(
                [*self._jvm(cp, self.heap), "kafka.Kafka", str(self.work_dir / "server.properties")],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=self.work_dir, preexec_fn=_die_with_parent)
        atexit.register(self.stop)

    def wait_ready(self, timeout: float) -> bool:
        """Until the spawned node answers ApiVersions (True), or it died or `timeout` seconds
        passed since its launch (False, the node stopped)."""
        while time.monotonic() - self._launched < timeout:
            if self.proc is None or self.proc.poll() is not None:
                self.stop()
                return False
            if answers_api_versions("127.0.0.1", self.port):
                self.start_seconds = time.monotonic() - self._launched
                return True
            time.sleep(0.1)
        self.stop()
        return False

    def restart(self, timeout: float = 90) -> "ApacheKafka":
        """Start the stopped (or killed) node again on its ports, config and data, without
        formatting: what a restart with partitions on disk costs (issue #15 §3).
        `start_seconds` becomes this launch's time to answering ApiVersions."""
        if self.proc is not None:
            raise RuntimeError("ApacheKafka is still running")
        if not self.port:
            raise RuntimeError("ApacheKafka was never started")
        if not self._launch(classpath(), timeout):
            raise ApacheKafkaUnavailable(
                f"Apache Kafka did not start again within {timeout:.0f} s:\n"
                + self.recent_log(60))
        return self

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks, so the next start recovers its logs."""
        atexit.unregister(self.stop)
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)

    def stop(self, timeout: float = 20) -> None:
        """SIGTERM (Kafka's controlled shutdown), then SIGKILL after `timeout` seconds."""
        atexit.unregister(self.stop)
        proc, self.proc = self.proc, None
        terminate(proc, timeout)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def recent_log(self, lines: int = 50) -> str:
        try:
            return "".join(self.log_path.read_text(errors="replace").splitlines(True)[-lines:])
        except OSError:
            return ""

    def __enter__(self) -> "ApacheKafka":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# The shipped server.properties is a one-node example: it sets the internal topics'
# replication to 1. A cluster leaves them out, so Kafka's own defaults apply (3, min ISR 2),
# as pybroker's config/cluster does for __consumer_offsets.
ONE_NODE_ONLY = ("offsets.topic.replication.factor",
                 "share.coordinator.state.topic.replication.factor",
                 "share.coordinator.state.topic.min.isr",
                 "transaction.state.log.replication.factor", "transaction.state.log.min.isr")


class ApacheKafkaCluster:
    """`nodes` Apache Kafka nodes, each broker and controller in one JVM, whose controllers
    form one static quorum (controller.quorum.voters names them all), on free loopback ports.

    Each node is an ApacheKafka in `work_dir/node-<id>` with the same heap and `overrides`.
    start() and stop() act on all of them, and the JVMs are never left running (as for
    ApacheKafka). start() must be called from a thread that outlives the cluster.
    """

    def __init__(self, work_dir: Path | str, nodes: int = 3, *, heap: str = "1g",
                 overrides: Mapping[str, object] | None = None) -> None:
        if nodes < 1:
            raise ValueError("a cluster needs at least one node")
        defaults = {k: v for k, v in SHIPPED_DEFAULTS.items() if k not in ONE_NODE_ONLY}
        self.work_dir = Path(work_dir)
        self.nodes: list[ApacheKafka] = [
            ApacheKafka(self.work_dir / f"node-{i}", node_id=i, heap=heap,
                        overrides=overrides, defaults=defaults)
            for i in range(1, nodes + 1)]
        for node in self.nodes:
            node.quorum = self.nodes
        self.start_seconds: float | None = None  # first launch to every node answering

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(node.proc.pid for node in self.nodes if node.proc is not None)

    @property
    def running(self) -> bool:
        return all(node.running for node in self.nodes)

    def start(self, timeout: float = 120) -> "ApacheKafkaCluster":
        """Format every node as one cluster, launch them all, and return once each answers
        ApiVersions (a node does once the quorum has a leader and it caught up with it)."""
        if any(node.proc is not None for node in self.nodes):
            raise RuntimeError("ApacheKafkaCluster is already started")
        cp = classpath()
        for attempt in range(3):  # a free port may be taken before a JVM binds it
            for node in self.nodes:
                node.pick_ports()
            cluster = cluster_id()
            with ThreadPoolExecutor(len(self.nodes)) as pool:  # a JVM each: side by side
                list(pool.map(lambda node: node.prepare(cp, cluster), self.nodes))
            began = time.monotonic()
            for node in self.nodes:
                node.spawn(cp)
            if all(node.wait_ready(timeout) for node in self.nodes):
                self.start_seconds = time.monotonic() - began
                return self
            logs = "\n".join(f"--- node {node.node_id}:\n{node.recent_log(40)}"
                             for node in self.nodes)
            taken = any(node.port_was_taken() for node in self.nodes)
            self.stop()
            if not taken or attempt == 2:
                break
        raise ApacheKafkaUnavailable(
            f"Apache Kafka's {len(self.nodes)} nodes did not all start within "
            f"{timeout:.0f} s:\n{logs}")  # type: ignore[possibly-undefined]  # range(3) runs

    def stop(self, timeout: float = 20) -> None:
        """SIGTERM every node at once, then wait (SIGKILL after `timeout` s). Stopped one by
        one, the last node's controlled shutdown would wait for a quorum that is gone."""
        for node in self.nodes:
            if node.proc is not None and node.running:
                node.proc.terminate()
        for node in self.nodes:
            node.stop(timeout)

    def __enter__(self) -> "ApacheKafkaCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
