"""A client library driven through a helper program of its own language (Go, Node), shared by
every cell of a matrix run.

The matrix runs each cell in its own Python worker process; starting a Go or Node program per
call would cost a process start (and Node's module loading) dozens of times per scenario. So
the first cell that needs the helper starts it detached (its own session, so the runner's
kill of a cell's process group spares it) on a Unix socket named after the runner's pid, and
every later cell connects to the same one. The helper ends itself when the runner is gone or
after a minute without a connection.

Each connection speaks JSON lines: `{"op": ..., ...}` answered by `{"result": ...}` or
`{"error": ..., "kind": "produce"|"na"|"error"}` (ProduceFailed, NotApplicable, anything
else). Bytes travel as base64, null as JSON null. Building or installing the helper happens
on first use (`go build`, `npm ci`) into ~/.cache/pybroker/, keyed by a hash of its sources,
under a file lock, so four cells starting at once build it once.
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
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

from compat.base import (
    Adapter, Got, GroupView, Member, NotApplicable, ProduceFailed, Rec, Settings, Txn,
)

COMPAT = Path(__file__).resolve().parent
BUILD_TIMEOUT_S = 600  # a first build downloads modules or packages


def cache_root() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "pybroker"


def _digest(files: list[Path]) -> str:
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


class _Locked:
    """An exclusive flock on `path` for the duration of a with-block."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(path, "a+")

    def __enter__(self) -> None:
        fcntl.flock(self.file, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.file, fcntl.LOCK_UN)
        self.file.close()


def go_binary() -> Path:
    """compat/go built once per source digest (modules from the Go module proxy, pinned by
    go.sum)."""
    src = COMPAT / "go"
    files = [*src.glob("*.go"), src / "go.mod", src / "go.sum"]
    out = cache_root() / "compat-go" / _digest(files) / "compat-go"
    with _Locked(out.parent.parent / ".lock"):
        if not out.exists():
            out.parent.mkdir(parents=True, exist_ok=True)
            proc = subprocess.run(["go", "build", "-o", str(out) + ".tmp", "."], cwd=src,
                                  capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
            if proc.returncode != 0:
                raise RuntimeError(f"go build failed: {proc.stderr.strip()[-400:]}")
            os.replace(str(out) + ".tmp", out)
    return out


def node_program() -> Path:
    """compat/js copied beside its node_modules (`npm ci`: exactly package-lock.json)."""
    src = COMPAT / "js"
    files = [src / "main.js", src / "codecs.js", src / "package.json", src / "package-lock.json"]
    home = cache_root() / "compat-js" / _digest(files)
    with _Locked(home.parent / ".lock"):
        if not (home / ".installed").exists():
            home.mkdir(parents=True, exist_ok=True)
            for f in files:
                shutil.copy(f, home / f.name)
            proc = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
                                  cwd=home, capture_output=True, text=True,
                                  timeout=BUILD_TIMEOUT_S)
            if proc.returncode != 0:
                raise RuntimeError(f"npm ci failed: {proc.stderr.strip()[-400:]}")
            (home / ".installed").touch()
    return home / "main.js"


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def rec_json(r: Rec) -> dict:
    return {"key": b64(r.key), "value": b64(r.value), "partition": r.partition,
            "timestamp": r.timestamp, "headers": [{"k": k, "v": b64(v)} for k, v in r.headers]}


def got_from(d: dict) -> Got:
    return Got(d["partition"], int(d["offset"]), unb64(d["key"]), unb64(d["value"]),
               tuple((h["k"], unb64(h["v"])) for h in d.get("headers") or ()),
               int(d["timestamp"]))


class Connection:
    """One session with the helper (a transactional producer lives as long as it)."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.file = self.sock.makefile("rwb")

    def send(self, message: dict) -> None:
        self.file.write(json.dumps(message).encode() + b"\n")
        self.file.flush()

    def receive(self) -> dict:
        line = self.file.readline()
        if not line:
            raise RuntimeError("the helper closed the connection")
        return json.loads(line)

    def call(self, op: str, **args: Any) -> Any:
        self.send({"op": op, **args})
        reply = self.receive()
        if "error" in reply:
            kind, text = reply.get("kind"), reply["error"]
            if kind == "produce":
                raise ProduceFailed(text)
            if kind == "na":
                raise NotApplicable(text)
            raise RuntimeError(text)
        return reply["result"]

    def lines(self) -> Iterator[dict]:
        while line := self.file.readline():
            yield json.loads(line)

    def close(self) -> None:
        try:
            self.file.close()
        finally:
            self.sock.close()


class Helper:
    """The helper process of one client: `command()` gives its argv before SOCKET WATCH_PID."""

    def __init__(self, name: str, command: Callable[[], list[str]]) -> None:
        self.name = name
        self.command = command

    def socket_path(self) -> Path:
        # The runner (this worker's parent) owns the helper; AF_UNIX paths are short: /tmp.
        return Path("/tmp") / f"pybroker-compat-{self.name}-{os.getuid()}-{os.getppid()}.sock"

    def connect(self) -> Connection:
        path = self.socket_path()
        try:
            return Connection(path)
        except OSError:
            pass
        with _Locked(cache_root() / f"{self.name}.start.lock"):
            try:
                return Connection(path)
            except OSError:
                pass
            self._spawn(path, os.getppid())
            return Connection(path)

    def _spawn(self, path: Path, watch: int) -> subprocess.Popen:
        """The helper listening on `path`, ending when `watch` (a pid) is gone."""
        log = open(cache_root() / f"{self.name}.log", "ab")
        proc = subprocess.Popen([*self.command(), str(path), str(watch)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=log, start_new_session=True)
        assert proc.stdout is not None
        ready = proc.stdout.readline()  # "ready" once it listens
        if ready.strip() != b"ready":
            raise RuntimeError(f"{self.name} helper did not start (see "
                               f"{cache_root() / (self.name + '.log')})")
        threading.Thread(target=proc.stdout.read, daemon=True).start()
        return proc

    def solo(self) -> tuple[Connection, subprocess.Popen]:
        """A helper process of its own (not the shared one) and a connection to it: what a
        member that is to be killed -9 runs in. It ends with this process, as the shared one
        ends with the runner."""
        path = Path("/tmp") / f"pybroker-compat-{self.name}-solo-{os.getpid()}-" \
                              f"{os.urandom(4).hex()}.sock"
        proc = self._spawn(path, os.getpid())
        return Connection(path), proc

    def call(self, op: str, **args: Any) -> Any:
        conn = self.connect()
        try:
            return conn.call(op, **args)
        finally:
            conn.close()


class HelperMember(Member):
    """A group member living in the helper, on its own connection: values stream back as
    lines until `stop()` asks it to commit and leave."""

    def __init__(self, helper: Helper, *, killable: bool = False, **args: Any) -> None:
        self.proc: subprocess.Popen | None = None
        if killable:
            self.conn, self.proc = helper.solo()
        else:
            self.conn = helper.connect()
        self.conn.send({"op": "member", **args})
        self._taken: list[bytes] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self.error: str | None = None
        first = self.conn.receive()
        if "error" in first:
            raise RuntimeError(first["error"])
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for message in self.conn.lines():
                if "value" in message:
                    with self._lock:
                        self._taken.append(unb64(message["value"]) or b"")
                elif "error" in message:
                    self.error = message["error"]
                elif "result" in message:
                    break
        finally:
            self._stopped.set()

    def values(self) -> list[bytes]:
        with self._lock:
            return list(self._taken)

    def stop(self) -> None:
        try:
            self.conn.send({"op": "stop"})
        except OSError:
            pass
        stopped = self._stopped.wait(30)
        self.conn.close()
        if not stopped:
            raise RuntimeError("the member did not stop within 30 s")
        if self.error:
            raise RuntimeError(f"the member failed: {self.error}")

    def kill(self) -> None:
        if self.proc is None:
            super().kill()
            return
        self.proc.kill()
        self.proc.wait(10)
        self._stopped.wait(10)
        self.conn.close()

    def debug(self) -> str:
        return f"{len(self._taken)} taken, error={self.error!r}"


def have(tool: str) -> str | None:
    """Why a helper cannot run here: its toolchain is missing."""
    return None if shutil.which(tool) else f"{tool} is not installed"


class HelperAdapter(Adapter):
    """An adapter whose every method is one request to its helper (see the module doc)."""

    helper: Helper
    tool = "?"  # the toolchain the helper needs (go, node)

    def missing(self) -> str | None:
        return have(self.tool)

    def prepare(self) -> None:
        if self.missing() is None:
            self.helper.command()  # builds (go build) or installs (npm ci) on first use

    def _call(self, op: str, **args: Any) -> Any:
        return self.helper.call(op, **args)

    def versions(self) -> dict[str, str]:
        # Run apart (not through the shared helper): the runner asks in its own process.
        out = subprocess.run([*self.helper.command(), "versions", "0"], capture_output=True,
                             text=True, timeout=BUILD_TIMEOUT_S)
        if out.returncode != 0:
            raise RuntimeError(out.stderr.strip()[-200:])
        return dict(json.loads(out.stdout))

    def produce(self, bootstrap: str, topic: str, recs: list[Rec], *, codec: str = "none",
                idempotent: bool = False, config: Settings = None) -> None:
        self._call("produce", bootstrap=bootstrap, topic=topic, codec=codec,
                   idempotent=idempotent, recs=[rec_json(r) for r in recs],
                   config={k: str(v) for k, v in (config or {}).items()})

    def produce_transactions(self, bootstrap: str, topic: str, txns: list[Txn],
                             transactional_id: str,
                             while_open: Callable[[int], None] | None = None) -> None:
        if reason := self.cannot("transactions"):
            raise NotApplicable(reason)
        conn = self.helper.connect()
        try:
            for i, txn in enumerate(txns):
                conn.call("txn_begin", bootstrap=bootstrap, transactional_id=transactional_id)
                conn.call("txn_produce", bootstrap=bootstrap, topic=topic,
                          recs=[rec_json(r) for r in txn.recs])
                if while_open is not None:
                    while_open(i)
                conn.call("txn_end", bootstrap=bootstrap, commit=txn.commit)
        finally:
            conn.close()

    def _consume(self, **args: Any) -> tuple[list[Got], dict[int, int]]:
        out = self._call("consume", **args)
        return ([got_from(d) for d in out["records"]],
                {int(p): int(o) for p, o in (out.get("positions") or {}).items()})

    def consume(self, bootstrap: str, topic: str, partitions: list[int],
                count: int) -> list[Got]:
        return self._consume(bootstrap=bootstrap, topic=topic, partitions=partitions,
                             start="beginning", count=count)[0]

    def consume_to_end(self, bootstrap: str, topic: str, partitions: list[int], count: int,
                       isolation: str) -> tuple[list[Got], dict[int, int]]:
        return self._consume(bootstrap=bootstrap, topic=topic, partitions=partitions,
                             start="beginning", count=count, isolation=isolation, to_end=True)

    def consume_from(self, bootstrap: str, topic: str, partition: int, offset: int,
                     count: int) -> list[Got]:
        return self._consume(bootstrap=bootstrap, topic=topic, partitions=[partition],
                             start="offset", at=offset, count=count)[0]

    def consume_from_time(self, bootstrap: str, topic: str, partition: int, timestamp: int,
                          count: int) -> list[Got]:
        return self._consume(bootstrap=bootstrap, topic=topic, partitions=[partition],
                             start="timestamp", at=timestamp, count=count)[0]

    def consume_group(self, bootstrap: str, topic: str, group: str, count: int) -> list[Got]:
        return [got_from(d) for d in self._call("consume_group", bootstrap=bootstrap,
                                                  topic=topic, group=group, count=count)]

    def committed(self, bootstrap: str, group: str, topic: str,
                  partitions: list[int]) -> dict[int, int]:
        out = self._call("committed", bootstrap=bootstrap, group=group, topic=topic,
                         partitions=partitions)
        return {int(p): int(o) for p, o in out.items()}

    def start_member(self, bootstrap: str, topic: str, group: str) -> Member:
        return HelperMember(self.helper, bootstrap=bootstrap, topic=topic, group=group)

    def start_member_as(self, bootstrap: str, topic: str, group: str, *,
                        cooperative: bool = False, instance_id: str | None = None) -> Member:
        return HelperMember(self.helper, bootstrap=bootstrap, topic=topic, group=group,
                            cooperative=cooperative, instance_id=instance_id)

    def offsets_for_times(self, bootstrap: str, topic: str,
                          times: dict[int, int]) -> dict[int, tuple[int, int] | None]:
        found = self._call("offsets_for_times", bootstrap=bootstrap, topic=topic,
                           times={str(p): t for p, t in times.items()})
        return {int(p): None if at is None else (int(at[0]), int(at[1]))
                for p, at in found.items()}

    def create_topic(self, bootstrap: str, topic: str, partitions: int,
                     configs: dict[str, str]) -> None:
        self._call("create_topic", bootstrap=bootstrap, topic=topic, total=partitions,
                   configs=configs)

    def list_topics(self, bootstrap: str) -> set[str]:
        return set(self._call("list_topics", bootstrap=bootstrap))

    def partition_count(self, bootstrap: str, topic: str) -> int:
        return int(self._call("partition_count", bootstrap=bootstrap, topic=topic))

    def add_partitions(self, bootstrap: str, topic: str, total: int) -> None:
        self._call("add_partitions", bootstrap=bootstrap, topic=topic, total=total)

    def delete_topic(self, bootstrap: str, topic: str) -> None:
        self._call("delete_topic", bootstrap=bootstrap, topic=topic)

    def describe_configs(self, bootstrap: str, topic: str) -> dict[str, str]:
        return dict(self._call("describe_configs", bootstrap=bootstrap, topic=topic))

    def set_config(self, bootstrap: str, topic: str, name: str, value: str) -> None:
        self._call("set_config", bootstrap=bootstrap, topic=topic, name=name, value=value)

    def delete_config(self, bootstrap: str, topic: str, name: str) -> None:
        self._call("delete_config", bootstrap=bootstrap, topic=topic, name=name)

    def list_groups(self, bootstrap: str) -> set[str]:
        return set(self._call("list_groups", bootstrap=bootstrap))

    def describe_group(self, bootstrap: str, group: str) -> GroupView:
        d = self._call("describe_group", bootstrap=bootstrap, group=group)
        return GroupView(d["state"], d["assignor"] or "",
                         tuple({t: [int(p) for p in ps] for t, ps in m.items()}
                               for m in d["members"]))

    def alter_group_offsets(self, bootstrap: str, group: str, topic: str,
                            offsets: dict[int, int]) -> None:
        self._call("alter_group_offsets", bootstrap=bootstrap, group=group, topic=topic,
                   offsets={str(p): o for p, o in offsets.items()})

    def delete_group(self, bootstrap: str, group: str) -> None:
        self._call("delete_group", bootstrap=bootstrap, group=group)

    def log_dir_sizes(self, bootstrap: str, topic: str) -> dict[int, int]:
        found = self._call("log_dir_sizes", bootstrap=bootstrap, topic=topic)
        return {int(p): int(size) for p, size in found.items()}
