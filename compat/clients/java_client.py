"""Apache Kafka's Java client (kafka-clients): KafkaProducer, KafkaConsumer, Admin.

The client runs in a JVM: `compat/java/` holds a small program (`JavaClient.java`) that speaks
JSON lines, built with `mvn -q package` on first use into `~/.cache/pybroker/java-client-<hash>/`
(the hash of the pom and the source, so an edit rebuilds; a marker file says the build is
complete, a file lock keeps two workers from building at once). A JVM costs seconds to start
and a matrix run has one worker process per cell, so the JVM is a small server shared by the
whole run: the first worker to need it starts it (in its own session, so that the run's
kill of a finished worker's process group spares it), later ones find its port in a file
keyed by the run's pid. The JVM exits when that process ends, or after two minutes without a
connection; a worker's producers and group members die with its connection.
"""
from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from compat.base import (
    Adapter, Got, GroupView, Member, NotApplicable, ProduceFailed, Rec, Settings, Txn,
)

if TYPE_CHECKING:
    from compat.differential.share_scenarios import Client as ShareClient

SOURCE = Path(__file__).resolve().parent.parent / "java"
MARKER = "COMPLETE"
CALL_TIMEOUT_S = 60.0  # one request: the JVM's own timeouts are 20 s


class JavaClientUnavailable(RuntimeError):
    """The Java client cannot be built or started here (the message says what is missing)."""


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _rec(r: Rec) -> dict:
    return {"key": _b64(r.key), "value": _b64(r.value),
            "headers": [[k, _b64(v)] for k, v in r.headers],
            "timestamp": r.timestamp, "partition": r.partition}


def _got(g: dict) -> Got:
    return Got(g["partition"], g["offset"], _bytes(g["key"]), _bytes(g["value"]),
               tuple((k, _bytes(v)) for k, v in g["headers"]), g["timestamp"])


def _source_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted([SOURCE / "pom.xml", *SOURCE.glob("src/**/*.java")]):
        digest.update(path.relative_to(SOURCE).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def build_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "pybroker" / f"java-client-{_source_hash()}"


def classpath() -> str:
    """The adapter's jar and kafka-clients with its dependencies, built with Maven first if
    the cache lacks them."""
    out = build_dir()
    if not (out / MARKER).is_file():
        mvn = shutil.which("mvn")
        if mvn is None:
            raise JavaClientUnavailable("the Java client adapter is built with Maven, and `mvn` "
                                        "is not on PATH (Debian: apt-get install maven)")
        out.mkdir(parents=True, exist_ok=True)
        with open(out / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (out / MARKER).is_file():
                done = subprocess.run([mvn, "-B", "-q", "-f", str(SOURCE / "pom.xml"), "package",
                                       f"-Dout={out}"], capture_output=True, text=True,
                                      timeout=900)
                if done.returncode != 0:
                    raise JavaClientUnavailable(
                        f"mvn could not build compat/java (exit {done.returncode}):\n"
                        f"{done.stdout[-3000:]}{done.stderr[-3000:]}")
                (out / MARKER).write_text("built\n")
    jars = [out / "java-client-adapter-1.jar", *sorted((out / "lib").glob("*.jar"))]
    return os.pathsep.join(str(j) for j in jars)


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else shutil.which("java")


class Connection:
    """One session with the shared JVM: a request line, its answer line, one at a time."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=CALL_TIMEOUT_S)
        self.file = self.sock.makefile("rwb")
        self.lock = threading.Lock()

    def call(self, op: str, **args: Any) -> Any:
        line = json.dumps({"op": op, **args}).encode() + b"\n"
        with self.lock:
            self.file.write(line)
            self.file.flush()
            answer = self.file.readline()
        if not answer:
            raise RuntimeError(f"the Java client's JVM closed the connection during {op}")
        reply = json.loads(answer)
        if reply["ok"]:
            return reply["result"]
        if reply.get("produce_failed"):
            raise ProduceFailed(reply["error"])
        raise RuntimeError(f"{reply['error']}\n{reply.get('trace', '')}")


def _server_files(owner: int) -> tuple[Path, Path, Path]:
    base = Path(tempfile.gettempdir()) / f"pybroker-java-client-{os.getuid()}"
    base.mkdir(exist_ok=True)
    return base / f"{owner}.port", base / f"{owner}.lock", base / f"{owner}.log"


def connect(owner: int | None = None) -> Connection:
    """A session with the JVM shared by `owner`'s children (default: this process's parent,
    the matrix run), started if none answers."""
    owner = os.getppid() if owner is None else owner
    port_file, lock_file, log_file = _server_files(owner)
    with open(lock_file, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if port_file.is_file():
            try:
                return Connection(int(port_file.read_text()))
            except (OSError, ValueError):
                port_file.unlink(missing_ok=True)  # a JVM that is gone
        _start_jvm(port_file, owner, log_file)
        return Connection(int(port_file.read_text()))


def _start_jvm(port_file: Path, owner: int, log_file: Path) -> subprocess.Popen:
    """A JVM serving on the port it writes to `port_file`, ending itself when `owner` does."""
    java = _java()
    if java is None:
        raise JavaClientUnavailable("the Java client needs Java 17 (`java` not found)")
    cp = classpath()
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(
            [java, "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", cp,
             "pybroker.compat.JavaClient", "--serve", str(port_file), str(owner)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + 60
    while not port_file.is_file():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise JavaClientUnavailable(f"the Java client's JVM did not start (see {log_file})")
        time.sleep(0.05)
    return proc


def solo() -> tuple[Connection, subprocess.Popen]:
    """A JVM of its own (not the shared one) and a session with it: what a member that is to be
    killed -9 runs in, so the kill takes that member alone. It ends with this process."""
    port_file, _, log_file = _server_files(os.getpid())
    port_file = port_file.with_name(f"{os.getpid()}-solo-{os.urandom(4).hex()}.port")
    proc = _start_jvm(port_file, os.getpid(), log_file)
    try:
        return Connection(int(port_file.read_text())), proc
    finally:
        port_file.unlink(missing_ok=True)


class JavaMember(Member):
    """A group member living in the JVM; values() asks it what it has taken. `proc`: the JVM
    of its own that a killable member runs in (`solo`)."""

    def __init__(self, conn: Connection, id: int, label: str,
                 proc: subprocess.Popen | None = None) -> None:
        self.conn, self.id, self.label, self.proc = conn, id, label, proc
        self.last: dict = {}

    def values(self) -> list[bytes]:
        self.last = self.conn.call("member_values", id=self.id)
        return [v for v in map(_bytes, self.last["values"]) if v is not None]

    def stop(self) -> None:
        self.conn.call("member_stop", id=self.id)
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(30)

    def kill(self) -> None:
        if self.proc is None:
            super().kill()
            return
        self.proc.kill()  # SIGKILL: the member neither commits nor leaves
        self.proc.wait(10)

    def debug(self) -> str:
        return f"{self.label}: {len(self.last.get('values', []))} taken, " \
            f"error={self.last.get('error')}"


class JavaShareMessage:
    """One record a JavaShareConsumer polled, read as a confluent-kafka Message is."""

    def __init__(self, got: dict, index: int) -> None:
        self.got, self.index = _got(got), index
        self._delivery_count: int = got["delivery_count"]

    def value(self) -> bytes | None:
        return self.got.value

    def offset(self) -> int:
        return self.got.offset

    def delivery_count(self) -> int:
        return self._delivery_count

    def error(self) -> None:
        """The Java client raises errors from poll instead of handing them out as records."""
        return None


class JavaShareConsumer:
    """A KafkaShareConsumer in the JVM, called as confluent-kafka's ShareConsumer is (poll,
    acknowledge, commit_sync, close), so share_scenarios.py plays both clients. An
    acknowledgement names the record by its index in the last poll, which is the only poll
    whose records the Java client lets one acknowledge in explicit mode."""

    def __init__(self, conn: Connection, id: int, proc: subprocess.Popen | None) -> None:
        self.conn, self.id, self.proc = conn, id, proc

    def poll(self, timeout: float) -> list[JavaShareMessage]:
        return [JavaShareMessage(g, i) for i, g in
                enumerate(self.conn.call("share_poll", id=self.id,
                                         timeout_ms=int(timeout * 1000)))]

    def acknowledge(self, message: JavaShareMessage, type: Any) -> None:
        """`type`: confluent-kafka's AcknowledgeType or anything else with the Java enum
        constant's name (ACCEPT, RELEASE, REJECT) as `.name`."""
        self.conn.call("share_acknowledge", id=self.id, index=message.index, type=type.name)

    def commit_sync(self) -> dict[str, str | None]:
        """Each partition's error, None where the acknowledgements were committed."""
        result: dict[str, str | None] = self.conn.call("share_commit", id=self.id)
        return result

    def close(self) -> None:
        try:
            self.conn.call("share_close", id=self.id)
        finally:
            self.conn.sock.close()
            if self.proc is not None:
                self.proc.terminate()
                self.proc.wait(30)

    def kill(self) -> None:
        """SIGKILL to the JVM of its own (`killable`): the consumer neither acknowledges nor
        leaves, and its connections to the broker close as the process goes."""
        if self.proc is None:
            raise RuntimeError("only a killable JavaShareConsumer (a JVM of its own) is killed")
        self.proc.kill()
        self.proc.wait(10)
        self.conn.sock.close()


class JavaClient(Adapter):
    name = "java kafka-clients"
    order = 60

    def __init__(self) -> None:
        super().__init__()
        self._conn: Connection | None = None

    @property
    def conn(self) -> Connection:
        if self._conn is None:
            self._conn = connect()
        return self._conn

    def versions(self) -> dict[str, str]:
        """Read off the built classpath and `java -version`: asking the JVM would start one in
        the matrix run's own process, beside the one its workers share."""
        jars = [Path(j).name for j in classpath().split(os.pathsep)]
        clients = next((j[len("kafka-clients-"):-len(".jar")] for j in jars
                        if j.startswith("kafka-clients-")), "?")
        java = subprocess.run([_java() or "java", "-version"], capture_output=True, text=True)
        first = (java.stderr or java.stdout).splitlines()[:1]
        runtime = first[0].split('"')[1] if first and '"' in first[0] else "?"
        return {"kafka-clients": clients, "java": runtime}

    def missing(self) -> str | None:
        if _java() is None:
            return "the Java client needs Java 17 (`java` not found)"
        if not (build_dir() / MARKER).is_file() and shutil.which("mvn") is None:
            return "the Java client adapter is built with Maven, and `mvn` is not on PATH"
        return None

    # -- produce / consume ----------------------------------------------------------------------
    def produce(self, bootstrap: str, topic: str, recs: list[Rec], *, codec: str = "none",
                idempotent: bool = False, config: Settings = None) -> None:
        self.conn.call("produce", bootstrap=bootstrap, topic=topic, recs=[_rec(r) for r in recs],
                       codec=codec, idempotent=idempotent,
                       config={k: str(v) for k, v in (config or {}).items()})

    def produce_transactions(self, bootstrap: str, topic: str, txns: list[Txn],
                             transactional_id: str,
                             while_open: Callable[[int], None] | None = None) -> None:
        id = self.conn.call("txn_init", bootstrap=bootstrap, transactional_id=transactional_id)
        try:
            for i, txn in enumerate(txns):
                self.conn.call("txn_send", id=id, topic=topic, recs=[_rec(r) for r in txn.recs])
                if while_open is not None:
                    while_open(i)
                self.conn.call("txn_end", id=id, commit=txn.commit)
        finally:
            self.conn.call("txn_close", id=id)

    def _consume(self, bootstrap: str, topic: str, partitions: list[int], count: int,
                 **how: Any) -> dict:
        return self.conn.call("consume", bootstrap=bootstrap, topic=topic, partitions=partitions,
                              count=count, **how)

    def consume(self, bootstrap: str, topic: str, partitions: list[int],
                count: int) -> list[Got]:
        return [_got(g) for g in self._consume(bootstrap, topic, partitions, count)["records"]]

    def consume_to_end(self, bootstrap: str, topic: str, partitions: list[int], count: int,
                       isolation: str) -> tuple[list[Got], dict[int, int]]:
        found = self._consume(bootstrap, topic, partitions, count, isolation=isolation,
                              to_end=True)
        return [_got(g) for g in found["records"]], \
            {int(p): o for p, o in found["positions"].items()}

    def consume_from(self, bootstrap: str, topic: str, partition: int, offset: int,
                     count: int) -> list[Got]:
        return [_got(g) for g in self._consume(bootstrap, topic, [partition], count,
                                               offset=offset)["records"]]

    def consume_from_time(self, bootstrap: str, topic: str, partition: int, timestamp: int,
                          count: int) -> list[Got]:
        return [_got(g) for g in self._consume(bootstrap, topic, [partition], count,
                                               timestamp=timestamp)["records"]]

    def consume_group(self, bootstrap: str, topic: str, group: str, count: int, *,
                      protocol: str = "classic") -> list[Got]:
        return [_got(g) for g in self.conn.call("consume_group", bootstrap=bootstrap,
                                                 topic=topic, group=group, count=count,
                                                 group_protocol=protocol)]

    def share_consumer(self, bootstrap: str, group: str, topic: str, *,
                       killable: bool = False) -> "JavaShareConsumer":
        """A KafkaShareConsumer (KIP-932) of `group` subscribed to `topic`, in explicit
        acknowledgement mode, on a session of its own with the shared JVM (so that consumers
        polling in threads of their own do not wait on each other), or with `killable` in a
        JVM of its own, which JavaShareConsumer.kill ends with SIGKILL."""
        conn, proc = solo() if killable else (connect(), None)
        return JavaShareConsumer(conn, conn.call("share_start", bootstrap=bootstrap,
                                                 group=group, topic=topic), proc)

    def share_client(self) -> "ShareClient":
        from compat.differential.share_scenarios import JAVA
        return JAVA

    def committed(self, bootstrap: str, group: str, topic: str,
                  partitions: list[int]) -> dict[int, int]:
        found = self.conn.call("committed", bootstrap=bootstrap, group=group, topic=topic,
                               partitions=partitions)
        return {int(p): o for p, o in found.items()}

    def start_member(self, bootstrap: str, topic: str, group: str) -> Member:
        id = self.conn.call("member_start", bootstrap=bootstrap, topic=topic, group=group)
        return JavaMember(self.conn, id, f"java member {id} of {group}")

    def start_member_as(self, bootstrap: str, topic: str, group: str, *,
                        cooperative: bool = False, instance_id: str | None = None,
                        group_protocol: str = "classic") -> Member:
        """`group_protocol` "consumer": a KIP-848 member (group.protocol=consumer)."""
        id = self.conn.call("member_start", bootstrap=bootstrap, topic=topic, group=group,
                            cooperative=cooperative, instance_id=instance_id,
                            group_protocol=group_protocol)
        return JavaMember(self.conn, id, f"java member {id} ({instance_id}) of {group}")

    def start_consumer_member(self, bootstrap: str, group: str, *,
                              topics: Sequence[str] = (), regex: str | None = None,
                              instance_id: str | None = None, killable: bool = False) -> Member:
        conn, proc = solo() if killable else (self.conn, None)
        id = conn.call("member_start", bootstrap=bootstrap, topic="", topics=list(topics),
                       regex=regex, group=group, instance_id=instance_id,
                       group_protocol="consumer")
        return JavaMember(conn, id, f"java consumer-protocol member {id} ({instance_id}) "
                                    f"of {group}" + (" in a JVM of its own" if proc else ""), proc)

    def consume_consumer_group(self, bootstrap: str, topic: str, group: str,
                               count: int) -> list[Got]:
        return self.consume_group(bootstrap, topic, group, count, protocol="consumer")

    def offsets_for_times(self, bootstrap: str, topic: str,
                          times: dict[int, int]) -> dict[int, tuple[int, int] | None]:
        found = self.conn.call("offsets_for_times", bootstrap=bootstrap, topic=topic,
                               times={str(p): t for p, t in times.items()})
        return {int(p): None if at is None else (at[0], at[1]) for p, at in found.items()}

    # -- admin ----------------------------------------------------------------------------------
    def create_topic(self, bootstrap: str, topic: str, partitions: int,
                     configs: dict[str, str]) -> None:
        self.conn.call("create_topic", bootstrap=bootstrap, topic=topic, partitions=partitions,
                       configs=configs)

    def list_topics(self, bootstrap: str) -> set[str]:
        return set(self.conn.call("list_topics", bootstrap=bootstrap))

    def partition_count(self, bootstrap: str, topic: str) -> int:
        return int(self.conn.call("partition_count", bootstrap=bootstrap, topic=topic))

    def add_partitions(self, bootstrap: str, topic: str, total: int) -> None:
        self.conn.call("add_partitions", bootstrap=bootstrap, topic=topic, total=total)

    def delete_topic(self, bootstrap: str, topic: str) -> None:
        self.conn.call("delete_topic", bootstrap=bootstrap, topic=topic)

    def describe_configs(self, bootstrap: str, topic: str) -> dict[str, str]:
        return dict(self.conn.call("describe_configs", bootstrap=bootstrap, topic=topic))

    def set_config(self, bootstrap: str, topic: str, name: str, value: str) -> None:
        self.conn.call("set_config", bootstrap=bootstrap, topic=topic, name=name, value=value)

    def delete_config(self, bootstrap: str, topic: str, name: str) -> None:
        self.conn.call("delete_config", bootstrap=bootstrap, topic=topic, name=name)


    def list_groups(self, bootstrap: str) -> set[str]:
        return set(self.conn.call("list_groups", bootstrap=bootstrap))

    def describe_group(self, bootstrap: str, group: str) -> GroupView:
        d = self.conn.call("describe_group", bootstrap=bootstrap, group=group)
        return GroupView(d["state"], d["assignor"] or "", tuple(d["members"]))

    def alter_group_offsets(self, bootstrap: str, group: str, topic: str,
                            offsets: dict[int, int]) -> None:
        self.conn.call("alter_group_offsets", bootstrap=bootstrap, group=group, topic=topic,
                       offsets={str(p): o for p, o in offsets.items()})

    def delete_group(self, bootstrap: str, group: str) -> None:
        self.conn.call("delete_group", bootstrap=bootstrap, group=group)

    def log_dir_sizes(self, bootstrap: str, topic: str) -> dict[int, int]:
        found = self.conn.call("log_dir_sizes", bootstrap=bootstrap, topic=topic)
        return {int(p): size for p, size in found.items()}


ADAPTER = JavaClient()
