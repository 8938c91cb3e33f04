"""The node's shared metadata store: one `memory_zk` tree served to the node's broker processes
over a Unix socket, durable in a data dir (issue #29, design (b), standalone).

Why
---
A node of N brokers ("workers", one per core) is one cluster; with `zookeeper.connect` set its
workers use that ZooKeeper. Without it (the standalone default) they still need one store that
all of them see, with ZooKeeper's semantics, because they run the ZooKeeper code of the cluster
(ZkMetadataStore, the controller, failover) that the cluster tests already fault. That store
is `memory_zk.MemoryZooKeeper`, the tree pybroker.testing's in-process clusters use; this module
adds only what a tree shared across processes needs: a socket, sessions that end when their
process dies or stops answering, and durability. The supervisor runs it in its own process
(threads, not trio); workers reach it with `metadata_client.NodeZooKeeperClient` (see there
for the connect string and the wire).

Sessions
--------
One per connection, opened by the client's hello, which asks for a session timeout; the
service grants it capped at `session_timeout_ms` (and at least MIN_SESSION_TIMEOUT_MS), as
ZooKeeper caps it at maxSessionTimeout. The session ends, its ephemeral znodes going and their
watches firing for the others, when its connection closes (a worker killed, or its client's
`stop`) or when nothing (a ping, a request) came from it for the granted timeout (a SIGSTOPped
worker: the controller then fails it over, as with a real ZooKeeper). Its connection is then
closed, so a worker that wakes up learns it lost its session and registers again.

Durability
----------
Every change of the tree is appended to `metadata.log.<gen>` in `data_dir` as the final state
of each persistent znode it touched (data, czxid, mzxid, version, ctime, mtime, cversion; a
removed or ephemeral one as a removal), with the zxid, under the tree's lock and with one
write(2) before the caller has its answer (so in the page cache: a kill -9 of the service
loses no acknowledged change; a machine crash loses what the kernel had not written back, as
Kafka's defaults do for its logs). Physical records, not the operations, because replaying
operations would not give back the same zxids, versions and sequence numbers once ephemerals
(not persisted) took their share of them. After COMPACT_ENTRIES entries or COMPACT_BYTES the
whole persistent tree is written to `metadata.snapshot.<gen+1>` (fsynced, renamed into place),
a new log starts, and the old generation is removed. At start the tree is the newest snapshot
plus its log; a last entry cut short (a kill during the write) is dropped, logged, and cut from
the file. Ephemeral znodes and sessions are not persisted: after a restart of the service every
worker has lost its session (its client says LOST, reconnects and registers again), as after a
ZooKeeper ensemble's total loss of sessions. A failed append (disk full, I/O error) leaves the
tree ahead of its log, so the service stops at once (`failure`, every connection closed)
rather than answer from a state it could not keep.

Not kept of ZooKeeper: ACLs, chroots, quotas, the 1 MB znode limit, sessions that survive a
reconnect (SUSPENDED), a replicated ensemble (the node is one machine: its disk is the store's).
"""
from __future__ import annotations

import argparse
import fcntl
import itertools
import logging
import os
import signal
import socket
import struct
import sys
import threading
import time
import zlib
from pathlib import Path
from typing import Any, Mapping

from kazoo.exceptions import BadArgumentsError, KazooException, UnimplementedError
from kazoo.protocol.states import WatchedEvent

from pybroker.cluster.memory_zk import MemoryZkClient, MemoryZooKeeper, _Node
from pybroker.node.metadata_client import ProtocolError, WATCH_XID, close_socket, decode, \
    encode, recv_frame, send_frame

__all__ = ["MetadataService", "MetadataLogCorrupt", "MIN_SESSION_TIMEOUT_MS", "write_tree"]

log = logging.getLogger(__name__)

MIN_SESSION_TIMEOUT_MS = 100
COMPACT_ENTRIES = 10_000
COMPACT_BYTES = 16 * 1024 * 1024
LOG_PREFIX = "metadata.log."
SNAPSHOT_PREFIX = "metadata.snapshot."
LOCK_FILE = "metadata.lock"
_HEADER = struct.Struct(">II")  # payload length, crc32 of the payload


class MetadataLogCorrupt(RuntimeError):
    """A snapshot that does not read back (written whole and renamed, so not a torn write)."""


def _frame(value: Any) -> bytes:
    payload = encode(value)
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def _read_frames(raw: bytes) -> tuple[list[Any], int]:
    """The whole entries of a log and the length they take; what follows is torn."""
    entries, at = [], 0
    while at + _HEADER.size <= len(raw):
        size, crc = _HEADER.unpack_from(raw, at)
        payload = raw[at + _HEADER.size:at + _HEADER.size + size]
        if len(payload) < size or zlib.crc32(payload) != crc:
            break
        try:
            entries.append(decode(payload))
        except ProtocolError:
            break
        at += _HEADER.size + size
    return entries, at


Record = list  # [data, czxid, mzxid, version, ctime, mtime, cversion]


def _record(node: _Node) -> Record:
    return [node.data, node.czxid, node.mzxid, node.version, node.ctime, node.mtime,
            node.cversion]


class _Journal:
    """`metadata.snapshot.<gen>` and `metadata.log.<gen>` in one directory."""

    def __init__(self, data_dir: Path) -> None:
        self.dir = data_dir
        self.gen = 0
        self.entries = 0
        self.bytes = 0
        self._fd = -1

    def _path(self, prefix: str, gen: int) -> Path:
        return self.dir / f"{prefix}{gen:020d}"

    def _gens(self, prefix: str) -> list[int]:
        return sorted(int(p.name[len(prefix):]) for p in self.dir.glob(prefix + "*")
                      if p.name[len(prefix):].isdigit())

    def load(self) -> tuple[int, dict[str, Record]]:
        """The zxid and the persistent znodes (path -> record) of the newest snapshot plus its
        log; opens that log for appending."""
        snapshots = self._gens(SNAPSHOT_PREFIX)
        self.gen = snapshots[-1] if snapshots else 0
        zxid, nodes = 0, {}
        if snapshots:
            path = self._path(SNAPSHOT_PREFIX, self.gen)
            raw = path.read_bytes()
            entries, end = _read_frames(raw)
            if len(entries) != 1 or end != len(raw):
                raise MetadataLogCorrupt(f"{path} does not read back whole; the node's metadata "
                                         "cannot be rebuilt from it")
            zxid, items = entries[0]
            nodes = {p: r for p, r in items}
        log_path = self._path(LOG_PREFIX, self.gen)
        raw = log_path.read_bytes() if log_path.exists() else b""
        entries, end = _read_frames(raw)
        if end != len(raw):
            log.warning("%s: dropping %d bytes after entry %d, a write cut short (the service "
                        "was killed while writing it; it was never acknowledged)",
                        log_path, len(raw) - end, len(entries))
            os.truncate(log_path, end)
        for entry_zxid, changes in entries:
            zxid = entry_zxid
            for path, record in changes:
                if record is None:
                    nodes.pop(path, None)
                else:
                    nodes[path] = record
        self.entries, self.bytes = len(entries), end
        for prefix in (LOG_PREFIX, SNAPSHOT_PREFIX):  # an older generation a kill left behind
            for gen in self._gens(prefix):
                if gen < self.gen:
                    self._path(prefix, gen).unlink()
        self._fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return zxid, nodes

    def append(self, zxid: int, changes: list[list[Any]]) -> None:
        data = _frame([zxid, changes])
        written = os.write(self._fd, data)
        if written != len(data):
            raise OSError(f"short write to the metadata log ({written} of {len(data)} bytes)")
        self.entries += 1
        self.bytes += len(data)

    def due(self) -> bool:
        return self.entries >= COMPACT_ENTRIES or self.bytes >= COMPACT_BYTES

    def compact(self, zxid: int, nodes: list[list[Any]]) -> None:
        """A snapshot of every persistent znode starts generation gen+1 with an empty log."""
        gen = self.gen + 1
        final = self._path(SNAPSHOT_PREFIX, gen)
        temp = final.with_name(final.name + ".tmp")
        with open(temp, "wb") as out:
            out.write(_frame([zxid, nodes]))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, final)
        dir_fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        fd = os.open(self._path(LOG_PREFIX, gen), os.O_WRONLY | os.O_APPEND | os.O_CREAT
                     | os.O_TRUNC, 0o644)
        os.close(self._fd)
        self._fd, old, self.gen = fd, self.gen, gen
        self.entries = self.bytes = 0
        for prefix in (LOG_PREFIX, SNAPSHOT_PREFIX):
            self._path(prefix, old).unlink(missing_ok=True)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class _DurableTree(MemoryZooKeeper):
    """memory_zk's tree, rebuilt from the journal and logging every change to it."""

    def __init__(self, journal: _Journal) -> None:
        super().__init__()
        # Session ids differ from those of an earlier run of the service (as ZooKeeper's
        # carry the server's start time), so no stale ephemeralOwner matches a new session.
        self._sessions = itertools.count(int(time.time() * 1000) << 16)
        self.journal = journal
        self.failure: BaseException | None = None
        zxid, records = journal.load()
        self._zxid = zxid
        for path, (data, czxid, mzxid, version, ctime, mtime, cversion) in sorted(
                records.items()):
            self._nodes[path] = _Node(data, czxid, mzxid, 0, version, ctime, mtime, cversion)
        for path in sorted(self._nodes):
            if path != "/":
                parent = self._nodes.get(path.rsplit("/", 1)[0] or "/")
                if parent is None:
                    raise MetadataLogCorrupt(f"{path} has no parent in the metadata log")
                parent.children.add(path.rsplit("/", 1)[1])

    def _committed(self, events: list) -> None:
        if self.failure is not None:
            raise self.failure
        if not events:
            return
        changes = []
        for path in dict.fromkeys(path for _, path, _ in events):
            node = self._nodes.get(path)
            changes.append([path, None if node is None or node.owner else _record(node)])
        try:
            self.journal.append(self._zxid, changes)
            if self.journal.due():
                self.journal.compact(self._zxid, [[p, _record(n)] for p, n in
                                                  sorted(self._nodes.items()) if not n.owner])
        except OSError as exc:
            self.failure = exc
            raise

    def persistent(self) -> dict[str, tuple[bytes, int]]:
        """Every persistent znode's data and version (for assertions)."""
        with self._lock:
            return {p: (n.data, n.version) for p, n in self._nodes.items() if not n.owner}


def write_tree(data_dir: Path, znodes: Mapping[str, bytes]) -> None:
    """Make `data_dir` (new or empty) a store holding the persistent `znodes` (path -> data;
    parents made empty, as makepath makes them), through the service's own tree and journal,
    compacted into one fsynced snapshot that `MetadataService.start` reads back. The node's
    import of a single broker's metadata (metadata_import.py) writes its tree with it."""
    data_dir.mkdir(parents=True, exist_ok=True)
    tree = _DurableTree(_Journal(data_dir))
    try:
        client = tree.client()
        client.start()
        for path, data in sorted(znodes.items()):  # a parent sorts before its children
            client.create(path, data, makepath=True)
        client.stop()
        client.close()
        with tree._lock:
            tree.journal.compact(tree._zxid, [[p, _record(n)] for p, n in
                                              sorted(tree._nodes.items()) if not n.owner])
    finally:
        tree.journal.close()


def _arg(value: Any, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise BadArgumentsError(f"bad argument {value!r}")
    return value


def _watch_arg(value: Any) -> int | None:
    return None if value is None else _arg(value, int)


class _Session:
    """One client connection and its session on the tree (a MemoryZkClient of it)."""

    def __init__(self, service: "MetadataService", sock: socket.socket) -> None:
        self.service = service
        self.sock = sock
        self.send_lock = threading.Lock()
        self.last_heard = time.monotonic()
        self.timeout_ms = 0
        self.client: MemoryZkClient | None = None
        self.id = 0
        self._watches: dict[int, Any] = {}
        self._ended = threading.Lock()
        self.ended = False

    def send(self, value: Any) -> None:
        try:
            with self.send_lock:
                send_frame(self.sock, value)
        except OSError:
            self.end("its connection failed")

    def serve(self) -> None:
        why = "its connection closed"
        try:
            while not self.ended:
                frame = recv_frame(self.sock)
                if frame is None:
                    break
                self.last_heard = time.monotonic()
                if not isinstance(frame, list) or len(frame) != 3:
                    raise ProtocolError(f"not a request: {frame!r}")
                xid, op, args = frame
                if op == "hello" and self.client is None:
                    granted = self._hello(args)
                    self.sock.settimeout(None)  # the reaper watches it from now on
                    self.send([xid, "ok", granted])
                    continue
                if self.client is None:
                    raise ProtocolError("a request before the hello")
                if op == "close":  # answered once its ephemerals are gone, as ZooKeeper's
                    self.end("the client closed it", answer=[xid, "ok", True])
                    break
                try:
                    result = [xid, "ok", self._op(op, args)]
                except KazooException as exc:
                    result = [xid, "error", exc]
                except OSError:
                    if self.service.tree is None or self.service.tree.failure is None:
                        raise
                    self.service._fail()
                    break
                except (TypeError, ValueError) as exc:
                    result = [xid, "error", BadArgumentsError(str(exc))]
                self.send(result)
        except (OSError, ProtocolError) as exc:
            why = f"its connection failed ({exc})"
        finally:
            self.end(why)

    def _hello(self, args: Any) -> dict[str, int]:
        asked = args.get("timeout_ms") if isinstance(args, dict) else None
        limit = self.service.session_timeout_ms
        self.timeout_ms = (min(max(asked, MIN_SESSION_TIMEOUT_MS), limit)
                           if isinstance(asked, int) and asked > 0 else limit)
        assert self.service.tree is not None
        self.client = self.service.tree.client()
        self.client.start()
        self.id = self.client._session
        self.service._opened(self)
        return {"session": self.id, "timeout_ms": self.timeout_ms}

    def _watch(self, watch_id: int | None) -> Any:
        """The same callable for the same id, so the tree keeps one watch per path (its
        watches are keyed by client and callable)."""
        if watch_id is None:
            return None
        watch = self._watches.get(watch_id)
        if watch is None:
            def watch(event: WatchedEvent) -> None:
                self.send([WATCH_XID, "watch", [watch_id, event.type, event.path]])
            self._watches[watch_id] = watch
        return watch

    def _op(self, op: str, args: Any) -> Any:
        zk = self.client
        assert zk is not None
        _arg(args, list)
        if op == "ping":
            return None
        if op == "create":
            path, value, ephemeral, sequence, makepath = args
            return zk.create(_arg(path, str), _arg(value, bytes), ephemeral=_arg(ephemeral, bool),
                             sequence=_arg(sequence, bool), makepath=_arg(makepath, bool))
        if op == "ensure_path":
            (path,) = args
            return zk.ensure_path(_arg(path, str))
        if op in ("exists", "get", "get_children"):
            path, watch_id = args
            return getattr(zk, op)(_arg(path, str), watch=self._watch(_watch_arg(watch_id)))
        if op == "set":
            path, value, version = args
            return zk.set(_arg(path, str), _arg(value, bytes), version=_arg(version, int))
        if op == "delete":
            path, version, recursive = args
            return zk.delete(_arg(path, str), version=_arg(version, int),
                             recursive=_arg(recursive, bool))
        if op == "multi":
            (ops,) = args
            txn = zk.transaction()
            for item in _arg(ops, list):
                name, *rest = _arg(item, list)
                if name == "create":
                    path, value, ephemeral, sequence = rest
                    txn.create(_arg(path, str), _arg(value, bytes),
                               ephemeral=_arg(ephemeral, bool), sequence=_arg(sequence, bool))
                elif name == "delete":
                    path, version = rest
                    txn.delete(_arg(path, str), _arg(version, int))
                elif name == "set_data":
                    path, value, version = rest
                    txn.set_data(_arg(path, str), _arg(value, bytes), _arg(version, int))
                elif name == "check":
                    path, version = rest
                    txn.check(_arg(path, str), _arg(version, int))
                else:
                    raise UnimplementedError(f"no multi-op {name!r}")
            return txn.commit()
        raise UnimplementedError(f"no operation {op!r}")

    def end(self, why: str, answer: Any = None) -> None:
        """End the session once: its ephemerals go (their watches fire for the others), its
        watches go, `answer` (if any) is sent, its connection closes."""
        with self._ended:
            if self.ended:
                return
            self.ended = True
        if self.client is not None:
            log.info("session 0x%x ended: %s", self.id, why)
            try:
                self.client.stop()
            except OSError:  # the log failed, so the service is stopping (`failure` says why)
                pass
            self.client.close()
        # Out of the table before the connection closes: a client that sees its connection
        # closed, or asks for the sessions after, must not still find this one.
        self.service._closed(self)
        if answer is not None:
            try:
                with self.send_lock:
                    send_frame(self.sock, answer)
            except OSError:
                pass
        close_socket(self.sock)


class MetadataService:
    """The node's metadata store, served at `socket_path` (connect string
    ``unix:<socket_path>``), kept in `data_dir`; sessions granted at most
    `session_timeout_ms`. `start` and `close` from a plain (non-trio) thread. `stopped` is
    set once it stops serving, by `close` or because its log failed (`failure` then says
    why): a supervisor watching it stops the node loudly, as its workers cannot go on."""

    def __init__(self, socket_path: Path, data_dir: Path, session_timeout_ms: int) -> None:
        if session_timeout_ms < MIN_SESSION_TIMEOUT_MS:
            raise ValueError(f"session_timeout_ms must be at least {MIN_SESSION_TIMEOUT_MS}")
        self.socket_path = Path(socket_path)
        self.data_dir = Path(data_dir)
        self.session_timeout_ms = session_timeout_ms
        self.tree: _DurableTree | None = None
        self.failure: BaseException | None = None
        self.stopped = threading.Event()
        self._listener: socket.socket | None = None
        self._sessions: dict[int, _Session] = {}
        self._lock = threading.Lock()
        self._closing = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._lock_fd = -1
        # Set when the reaper must look again before the deadline it sleeps to: a session
        # opened (its deadline may come first) or the service closes.
        self._reap_wake = threading.Event()

    @property
    def connect(self) -> str:
        """The zookeeper.connect of the node's workers."""
        return f"unix:{self.socket_path}"

    def start(self) -> None:
        """Lock the data dir, rebuild the tree, listen; returns once clients can connect."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(self.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            # Named as a broker's log dir lock names its holder: the pid to look for. Imported
            # here, on this refusal only: the storage package is no part of a node's supervisor.
            from pybroker.storage.log_dir_lock import lock_owner
            owner = lock_owner(self._lock_fd)
            os.close(self._lock_fd)
            self._lock_fd = -1
            who = f"another node's metadata service (pid {owner})" if owner \
                else "another node's metadata service"
            raise RuntimeError(f"{self.data_dir} is in use by {who}; two nodes must never "
                               "share a log dir (see log.dirs)") from None
        os.ftruncate(self._lock_fd, 0)
        os.pwrite(self._lock_fd, f"{os.getpid()}\n".encode(), 0)
        try:
            self.tree = _DurableTree(_Journal(self.data_dir))
            self._listener = self._listen()
        except BaseException:
            self.close()
            raise
        log.info("metadata service at %s: %d znodes from %s, sessions at most %d ms",
                 self.socket_path, len(self.tree.persistent()), self.data_dir,
                 self.session_timeout_ms)
        for target, name in ((self._accept, "metadata-accept"), (self._reap, "metadata-reap")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def _listen(self) -> socket.socket:
        path = str(self.socket_path)
        if len(os.fsencode(path)) > 107:  # sun_path: 108 bytes with its NUL
            raise ValueError(f"the metadata service's socket path is {len(os.fsencode(path))} "
                             f"bytes, more than a Unix socket takes (107): {path}")
        if self.socket_path.exists():  # a live service answers; a dead one's file is stale
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(path)
            except OSError:
                self.socket_path.unlink()
            else:
                raise RuntimeError(f"a metadata service already listens at {path}")
            finally:
                probe.close()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(path)
            os.chmod(path, 0o600)  # the node's processes run as one user
            sock.listen(128)
        except BaseException:
            sock.close()
            raise
        return sock

    def _accept(self) -> None:
        """Blocks in accept(2) until a worker connects: `close` shuts the listener down,
        which ends the wait (no timeout to poll the stop with: an idle node wakes for nothing)."""
        listener = self._listener
        while listener is not None and not self.stopped.is_set():
            try:
                sock, _ = listener.accept()
            except OSError:
                break
            # Until its hello, a connection has no session for the reaper to watch: one that
            # says nothing for the longest session timeout is dropped.
            sock.settimeout(self.session_timeout_ms / 1000)
            session = _Session(self, sock)
            threading.Thread(target=session.serve, daemon=True, name="metadata-session").start()

    def _reap(self) -> None:
        """End every session silent for its timeout. Sleeps until the first session's
        deadline (its last word + its timeout; a ping moves it on, so with pings every third
        of the timeout it wakes about once per two thirds of it), woken early only by a
        session opening or the service closing: no fixed tick for an idle node to pay."""
        while not self.stopped.is_set():
            self._reap_wake.clear()  # before the look, so a wake during it is not lost
            now = time.monotonic()
            with self._lock:
                deadlines = [(s.last_heard + s.timeout_ms / 1000, s)
                             for s in self._sessions.values()]
            for deadline, session in deadlines:
                if now > deadline:
                    session.end(f"no ping for {session.timeout_ms} ms (the session expired)")
            ahead = [deadline - now for deadline, _ in deadlines if deadline >= now]
            # A hair past the deadline, so the session is silent *for* its timeout on waking.
            self._reap_wake.wait(min(ahead) + 0.001 if ahead else None)

    def _opened(self, session: _Session) -> None:
        with self._lock:
            self._sessions[session.id] = session
        self._reap_wake.set()
        if self.stopped.is_set():
            session.end("the service is closing")

    def _closed(self, session: _Session) -> None:
        with self._lock:
            self._sessions.pop(session.id, None)

    def _fail(self) -> None:
        """The journal could not take a change: stop serving (see the module docstring)."""
        if self.failure is not None or self.tree is None:
            return
        self.failure = self.tree.failure
        log.critical("metadata service at %s stops: the metadata log in %s failed (%s)",
                     self.socket_path, self.data_dir, self.failure)
        threading.Thread(target=self.close, name="metadata-fail", daemon=True).start()

    def sessions(self) -> list[int]:
        with self._lock:
            return sorted(self._sessions)

    def close(self) -> None:
        """Stop listening, end every session, close the log and unlock the dir. Safe to call
        twice and from two threads at once (a failed log closes it from its own thread)."""
        with self._closing:
            self._close()

    def _close(self) -> None:
        self.stopped.set()
        self._reap_wake.set()
        if self._listener is not None:
            close_socket(self._listener)  # shutdown(2) ends the accept thread's wait
            self._listener = None
            self.socket_path.unlink(missing_ok=True)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(5)
        self._threads = []
        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            session.end("the service is closing")
        if self.tree is not None:
            with self.tree._lock:
                self.tree.journal.close()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1


def main(argv: list[str] | None = None) -> int:
    """`python -m pybroker.node.metadata_service SOCKET DATA_DIR`: serve until SIGTERM/SIGINT
    (tests; a node's supervisor runs MetadataService in its own process)."""
    parser = argparse.ArgumentParser(prog="python -m pybroker.node.metadata_service",
                                     description=main.__doc__)
    parser.add_argument("socket", type=Path)
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--session-timeout-ms", type=int, default=18000)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)")
    service = MetadataService(args.socket, args.data_dir, args.session_timeout_ms)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: service.stopped.set())
    service.start()
    print(f"metadata service ready at {service.connect}", flush=True)
    service.stopped.wait()
    service.close()
    return 1 if service.failure is not None else 0


if __name__ == "__main__":
    sys.exit(main())
