"""A kazoo-like client of the node's metadata service (`metadata_service.py`), for the brokers
("workers") of one node that runs no ZooKeeper (issue #29, design (b)).

Why a client of our own rather than kazoo
-----------------------------------------
The workers of a node run the cluster code that `tests/cluster/` faults (ZkMetadataStore, the
controller, the fetchers), and that code speaks to ZooKeeper through kazoo's client surface.
`memory_zk.MemoryZkClient` already offers exactly that surface over one in-memory tree, but only
to brokers of one process. This module offers the same surface (method names, arguments,
results, exceptions, watches delivered on the client's own thread, state listeners) and forwards
each call over a Unix socket to the service that holds that tree for the node's processes, so a
worker runs unchanged code whether its metadata lives in ZooKeeper, in memory, or on the node.

The seam with the node supervisor (`supervisor.py`, `worker.py`)
----------------------------------------------------------------
- The connect string is ``unix:<absolute socket path>`` (no chroot: the node's tree holds one
  cluster). A worker gets ``zookeeper.connect=unix:<socket>``; `Broker` sees the ``unix:``
  prefix (`is_node_connect`) and builds its `ZkMetadataStore` with this client. Nothing else in
  the broker knows about the node.
- The supervisor runs `MetadataService(socket_path, data_dir, session_timeout_ms)` (threads),
  `start()` before the workers and `close()` after they stopped.

Sessions, as ZooKeeper's (what `zk_session` relies on)
------------------------------------------------------
One session per connection. `start()` connects and asks for a session timeout (kazoo's
`timeout`, seconds); the service grants it capped at its own `session_timeout_ms`. A thread of
the client pings every third of it; the service ends a session whose connection closes or
that sent nothing for the timeout (a SIGSTOPped worker loses its registration, so the
controller fails it over). A connection that drops always ends its session (the service keeps
no session without its connection): listeners hear LOST, the calls in flight raise
ConnectionLoss, calls before the next session raise SessionExpiredError, and the client
connects again on its own (a new session: listeners hear CONNECTED), as kazoo does after an
expiry. Not modelled: SUSPENDED (a connection lost with the session kept), ACLs, chroots.

The wire: each frame is a 4-byte big-endian length and a value in `encode`'s tagged binary
form (None, bool, int, str, bytes, list, dict, ZnodeStat, kazoo exceptions); znode data stays
bytes. A request is ``[xid, op, args]``; its answer ``[xid, "ok", value]`` or
``[xid, "error", exception]``; a watch that fired ``[0, "watch", [watch_id, type, path]]``.
"""
from __future__ import annotations

import itertools
import logging
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kazoo import exceptions as kazoo_exceptions
from kazoo.exceptions import ConnectionLoss, KazooException, SessionExpiredError, \
    SystemZookeeperError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState, KeeperState, WatchedEvent, ZnodeStat

from pybroker.cluster.memory_zk import ClientEvents

__all__ = ["NodeZooKeeperClient", "NodeTransaction", "is_node_connect", "socket_path_of",
           "encode", "decode", "send_frame", "recv_frame", "close_socket", "ProtocolError",
           "MAX_FRAME"]

log = logging.getLogger(__name__)

SCHEME = "unix:"
MAX_FRAME = 64 * 1024 * 1024  # far above ZooKeeper's 1 MB jute.maxbuffer
_LEN = struct.Struct(">I")
_INT = struct.Struct(">q")
_STAT = struct.Struct(">11q")
WATCH_XID = 0

Watch = Callable[[WatchedEvent], Any]


class ProtocolError(Exception):
    """A frame that does not decode: the connection is closed."""


def is_node_connect(connect: str | None) -> bool:
    """Whether a zookeeper.connect names a node's metadata service (``unix:<path>``)."""
    return connect is not None and connect.startswith(SCHEME)


def socket_path_of(hosts: str) -> str:
    """``unix:/run/x.sock`` -> ``/run/x.sock``; ValueError for anything else."""
    if not is_node_connect(hosts):
        raise ValueError(f"not a node metadata service address (unix:<path>): {hosts!r}")
    path = hosts[len(SCHEME):]
    if not path.startswith("/"):
        raise ValueError(f"the socket path of {hosts!r} must be absolute")
    return path


# -- the tagged binary form ---------------------------------------------------------------------
def encode(value: Any) -> bytes:
    out = bytearray()
    _encode(value, out)
    return bytes(out)


def _encode(value: Any, out: bytearray) -> None:
    if value is None:
        out += b"N"
    elif value is True:
        out += b"T"
    elif value is False:
        out += b"F"
    elif isinstance(value, int):
        out += b"i" + _INT.pack(value)
    elif isinstance(value, str):
        raw = value.encode()
        out += b"s" + _LEN.pack(len(raw)) + raw
    elif isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        out += b"b" + _LEN.pack(len(raw)) + raw
    elif isinstance(value, ZnodeStat):  # before tuple: a ZnodeStat is a namedtuple
        out += b"z" + _STAT.pack(*value)
    elif isinstance(value, (list, tuple)):
        out += b"l" + _LEN.pack(len(value))
        for item in value:
            _encode(item, out)
    elif isinstance(value, dict):
        out += b"d" + _LEN.pack(len(value))
        for key, item in value.items():
            _encode(str(key), out)
            _encode(item, out)
    elif isinstance(value, KazooException):
        out += b"e"
        _encode(type(value).__name__, out)
        _encode(str(value), out)
    else:
        raise TypeError(f"cannot encode {type(value).__name__}")


def decode(data: bytes) -> Any:
    value, end = _decode(memoryview(data), 0)
    if end != len(data):
        raise ProtocolError(f"{len(data) - end} bytes after the value")
    return value


def _take(view: memoryview, at: int, size: int) -> bytes:
    if at + size > len(view):
        raise ProtocolError("truncated value")
    return bytes(view[at:at + size])


def _decode(view: memoryview, at: int) -> tuple[Any, int]:
    tag = _take(view, at, 1)
    at += 1
    if tag == b"N":
        return None, at
    if tag == b"T":
        return True, at
    if tag == b"F":
        return False, at
    if tag == b"i":
        return _INT.unpack(_take(view, at, 8))[0], at + 8
    if tag in (b"s", b"b"):
        (size,) = _LEN.unpack(_take(view, at, 4))
        raw = _take(view, at + 4, size)
        if tag == b"b":
            return raw, at + 4 + size
        try:
            return raw.decode(), at + 4 + size
        except UnicodeDecodeError as exc:
            raise ProtocolError(str(exc)) from None
    if tag == b"z":
        return ZnodeStat(*_STAT.unpack(_take(view, at, _STAT.size))), at + _STAT.size
    if tag in (b"l", b"d"):
        (count,) = _LEN.unpack(_take(view, at, 4))
        at += 4
        if tag == b"l":
            items = []
            for _ in range(count):
                item, at = _decode(view, at)
                items.append(item)
            return items, at
        mapping = {}
        for _ in range(count):
            key, at = _decode(view, at)
            mapping[key], at = _decode(view, at)
        return mapping, at
    if tag == b"e":
        name, at = _decode(view, at)
        message, at = _decode(view, at)
        return _exception(name, message), at
    raise ProtocolError(f"unknown tag {tag!r}")


def _exception(name: Any, message: Any) -> KazooException:
    """The kazoo exception the service raised (a name it does not know: SystemZookeeperError)."""
    cls = getattr(kazoo_exceptions, str(name), None)
    if isinstance(cls, type) and issubclass(cls, KazooException):
        return cls(message) if message else cls()
    return SystemZookeeperError(f"{name}: {message}")


def close_socket(sock: socket.socket) -> None:
    """Shut down, then close: a thread blocked in recv or send on it returns at once."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def send_frame(sock: socket.socket, value: Any) -> None:
    payload = encode(value)
    sock.sendall(_LEN.pack(len(payload)) + payload)


def _recv_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks = []
    while size:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def recv_frame(sock: socket.socket) -> Any:
    """The next value, or None at the end of the stream (an orderly close)."""
    head = _recv_exactly(sock, _LEN.size)
    if head is None:
        return None
    (size,) = _LEN.unpack(head)
    if size > MAX_FRAME:
        raise ProtocolError(f"a frame of {size} bytes (at most {MAX_FRAME})")
    payload = _recv_exactly(sock, size)
    if payload is None:
        raise ProtocolError("the stream ended inside a frame")
    return decode(payload)


# -- the client ---------------------------------------------------------------------------------
@dataclass
class _Pending:
    done: threading.Event = field(default_factory=threading.Event)
    ok: bool = False
    value: Any = None


class _Connection:
    """One connection, one session: a reader thread resolves the answers and queues the
    watches; whoever notices the end (EOF, an error, a silent service) closes it once."""

    def __init__(self, client: "NodeZooKeeperClient", sock: socket.socket) -> None:
        self.client = client
        self.sock = sock
        self.send_lock = threading.Lock()
        self.pending: dict[int, _Pending] = {}
        self.pending_lock = threading.Lock()
        self.closed = False
        self.last_heard = time.monotonic()
        self.session = 0
        self.timeout_ms = 0

    def request(self, xid: int, op: str, args: list) -> Any:
        slot = _Pending()
        with self.pending_lock:
            if self.closed:
                raise ConnectionLoss("the connection to the metadata service is closed")
            self.pending[xid] = slot
        try:
            with self.send_lock:
                send_frame(self.sock, [xid, op, args])
        except OSError:
            self.close()
        slot.done.wait()
        if not slot.ok:
            raise slot.value
        return slot.value

    def read(self) -> None:
        try:
            while True:
                frame = recv_frame(self.sock)
                if frame is None:
                    break
                self.last_heard = time.monotonic()
                xid, kind, value = frame
                if xid == WATCH_XID and kind == "watch":
                    self.client._watch_fired(*value)
                    continue
                with self.pending_lock:
                    slot = self.pending.pop(xid, None)
                if slot is not None:
                    slot.ok, slot.value = kind == "ok", value
                    slot.done.set()
        except (OSError, ProtocolError, ValueError, TypeError) as exc:
            if not self.closed:
                log.warning("the connection to the metadata service at %s failed: %s",
                            self.client.socket_path, exc)
        finally:
            self.close()

    def close(self) -> None:
        with self.pending_lock:
            if self.closed:
                return
            self.closed = True
            pending, self.pending = self.pending, {}
        for slot in pending.values():
            slot.value = ConnectionLoss("the connection to the metadata service was lost")
            slot.done.set()
        close_socket(self.sock)
        self.client._connection_lost(self)


class NodeZooKeeperClient(ClientEvents):
    """The part of kazoo's KazooClient the broker uses (as `memory_zk.MemoryZkClient`), served
    by the node's `MetadataService` at ``hosts`` = ``unix:<socket path>``. `timeout` is the
    session timeout asked for (seconds, kazoo's); kazoo's other arguments are accepted and
    ignored (the client reconnects on its own, forever, until `stop`)."""

    def __init__(self, hosts: str, timeout: float = 10.0, **_: Any) -> None:
        super().__init__()
        self.socket_path = socket_path_of(hosts)
        self.hosts = hosts
        self._timeout_ms = max(1, int(timeout * 1000))
        self.state: str = KazooState.LOST
        self._lock = threading.RLock()
        self._conn: _Connection | None = None
        self._wanted = False  # between start and stop: keep a session
        self._xids = itertools.count(1)
        self._keeper: threading.Thread | None = None
        self._wake = threading.Event()
        self._watch_ids: dict[Watch, int] = {}
        self._watches: dict[int, Watch] = {}

    # -- session -----------------------------------------------------------------------------------
    @property
    def client_id(self) -> tuple[int, bytes] | None:
        conn = self._conn
        return (conn.session, b"") if conn is not None else None

    @property
    def connected(self) -> bool:
        return self._conn is not None

    @property
    def session_timeout_ms(self) -> int:
        """The timeout the service granted the current session (0 without one)."""
        conn = self._conn
        return conn.timeout_ms if conn is not None else 0

    def start(self, timeout: float = 15) -> None:
        """Connect and open a session within `timeout` seconds (KazooTimeoutError if the
        service does not answer: not started yet, or gone)."""
        with self._lock:
            if self._conn is not None:
                return
            self._wanted = True
            self._start_events("node-zk-events")
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while True:
            try:
                self._connect(max(0.05, deadline - time.monotonic()))
                break
            except (OSError, ProtocolError, KazooException) as exc:
                last = exc
            if time.monotonic() >= deadline:
                self._wanted = False
                raise KazooTimeoutError(f"Connection time-out: no metadata service answered at "
                                        f"{self.socket_path} ({last})")
            time.sleep(0.05)
        with self._lock:
            if self._keeper is None or not self._keeper.is_alive():
                self._keeper = threading.Thread(target=self._keep, daemon=True,
                                                name="node-zk-keeper")
                self._keeper.start()

    def _connect(self, timeout: float) -> None:
        """One try: a connection and a new session; listeners hear CONNECTED."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(self.socket_path)
            send_frame(sock, [next(self._xids), "hello", {"timeout_ms": self._timeout_ms}])
            answer = recv_frame(sock)
            if answer is None:
                raise ConnectionLoss("the metadata service closed the connection")
            _, kind, value = answer
            if kind != "ok":
                raise value if isinstance(value, Exception) else ProtocolError(repr(value))
            sock.settimeout(None)
        except BaseException:
            sock.close()
            raise
        conn = _Connection(self, sock)
        conn.session, conn.timeout_ms = int(value["session"]), int(value["timeout_ms"])
        with self._lock:
            if not self._wanted or self._conn is not None:  # stopped, or another won
                sock.close()
                return
            self._conn = conn
            threading.Thread(target=conn.read, daemon=True,
                             name=f"node-zk-{conn.session:x}").start()
            self._state_change(KazooState.CONNECTED)

    def _keep(self) -> None:
        """Ping the live session; notice a silent service (no answer to pings for two thirds
        of the timeout, kazoo's read timeout); open a new session after a lost one."""
        backoff = 0.05
        while self._wanted:
            conn = self._conn
            if conn is not None:
                interval = conn.timeout_ms / 3000
                if time.monotonic() - conn.last_heard > conn.timeout_ms * 2 / 3000:
                    log.warning("the metadata service at %s did not answer for %d ms; "
                                "closing session 0x%x", self.socket_path,
                                conn.timeout_ms * 2 // 3, conn.session)
                    conn.close()
                    continue
                try:
                    with conn.send_lock:
                        send_frame(conn.sock, [next(self._xids), "ping", []])
                except OSError:
                    conn.close()
                    continue
                self._wake.wait(interval)
                self._wake.clear()
                continue
            try:
                self._connect(max(1.0, self._timeout_ms / 3000))
                backoff = 0.05
            except (OSError, ProtocolError, KazooException):
                self._wake.wait(backoff)
                self._wake.clear()
                backoff = min(1.0, backoff * 2)

    def _connection_lost(self, conn: _Connection) -> None:
        with self._lock:
            if self._conn is not conn:
                return
            self._conn = None
            if self._wanted:
                log.info("session 0x%x with the metadata service at %s ended",
                         conn.session, self.socket_path)
                self._state_change(KazooState.LOST)
        self._wake.set()

    def stop(self) -> None:
        """Close the session: its ephemeral znodes are gone when this returns (as kazoo's)."""
        with self._lock:
            self._wanted = False
            conn, self._conn = self._conn, None
        self._wake.set()
        if conn is None:
            return
        try:
            conn.request(next(self._xids), "close", [])
        except KazooException:
            pass
        conn.close()
        self._state_change(KazooState.LOST)

    def close(self) -> None:
        """Free the threads (after `stop`, as kazoo asks; a client still started is stopped)."""
        if self._wanted or self._conn is not None:
            self.stop()
        keeper, self._keeper = self._keeper, None
        if keeper is not None and keeper is not threading.current_thread():
            keeper.join(5)
        self._stop_events()

    def expire(self) -> None:
        """Lose the session now, as after missed pings (memory_zk's hook for tests): the
        connection closes, so the service drops the session's ephemerals and watches;
        listeners hear LOST, then CONNECTED once the client has a new session, which it has
        when this returns (or after the session timeout, ConnectionLoss)."""
        conn = self._conn
        if conn is None:
            return
        conn.close()
        deadline = time.monotonic() + max(conn.timeout_ms / 1000, 1.0)
        while self._conn is None or self._conn is conn:
            if time.monotonic() > deadline or not self._wanted:
                raise ConnectionLoss("no new session with the metadata service")
            time.sleep(0.01)

    def _watch_fired(self, watch_id: int, kind: str, path: str) -> None:
        watch = self._watches.get(watch_id)
        if watch is not None:
            self._deliver(watch, WatchedEvent(kind, KeeperState.CONNECTED, path))

    def _watch_id(self, watch: Watch | None) -> int | None:
        """One id per watch callable (equal bound methods share it), so a watch set twice on
        a path is one watch, as ZooKeeper's."""
        if watch is None:
            return None
        with self._lock:
            watch_id = self._watch_ids.get(watch)
            if watch_id is None:
                watch_id = self._watch_ids[watch] = len(self._watch_ids) + 1
                self._watches[watch_id] = watch
            return watch_id

    def _call(self, op: str, *args: Any) -> Any:
        conn = self._conn
        if conn is None:
            raise SessionExpiredError("the session is closed")
        return conn.request(next(self._xids), op, list(args))

    # -- operations --------------------------------------------------------------------------------
    def create(self, path: str, value: bytes = b"", acl: Any = None, ephemeral: bool = False,
               sequence: bool = False, makepath: bool = False,
               include_data: bool = False) -> str:
        return self._call("create", path, value, ephemeral, sequence, makepath)

    def ensure_path(self, path: str, acl: Any = None) -> bool:
        return self._call("ensure_path", path)

    def exists(self, path: str, watch: Watch | None = None) -> ZnodeStat | None:
        return self._call("exists", path, self._watch_id(watch))

    def get(self, path: str, watch: Watch | None = None) -> tuple[bytes, ZnodeStat]:
        data, stat = self._call("get", path, self._watch_id(watch))
        return data, stat

    def get_children(self, path: str, watch: Watch | None = None,
                     include_data: bool = False) -> list[str]:
        return self._call("get_children", path, self._watch_id(watch))

    def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        return self._call("set", path, value, version)

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> bool:
        return self._call("delete", path, version, recursive)

    def transaction(self) -> "NodeTransaction":
        return NodeTransaction(self)


class NodeTransaction:
    """kazoo's TransactionRequest: operations recorded, then sent and committed all or nothing
    by the service (`memory_zk.MemoryTransaction` there, so the results are kazoo's)."""

    def __init__(self, client: NodeZooKeeperClient) -> None:
        self._client = client
        self._ops: list[list[Any]] = []

    def create(self, path: str, value: bytes = b"", acl: Any = None, ephemeral: bool = False,
               sequence: bool = False) -> None:
        self._ops.append(["create", path, value, ephemeral, sequence])

    def delete(self, path: str, version: int = -1) -> None:
        self._ops.append(["delete", path, version])

    def set_data(self, path: str, value: bytes, version: int = -1) -> None:
        self._ops.append(["set_data", path, value, version])

    def check(self, path: str, version: int) -> None:
        self._ops.append(["check", path, version])

    def commit(self) -> list[Any]:
        return self._client._call("multi", self._ops)
