"""An in-memory ZooKeeper for brokers that share one process (pybroker.testing's `Cluster`).

Why a fake of the client rather than a third store
--------------------------------------------------
A cluster's correctness lives in `zk_store` and `controller`: conditional writes on znode
versions, the controller's epoch check in every multi-op, ephemeral registrations that vanish
with their session, one-shot watches that re-arm on re-read. A store of its own would run other
code than production's. This module instead offers the part of kazoo's `KazooClient` those
modules call (create, get, exists, get_children, set, delete, ensure_path, transaction with
check/create/set_data/delete, listeners, sessions), backed by one tree shared by every client
of a `MemoryZooKeeper`; the store and the controller run unchanged on it. kazoo ships no such
fake (its `kazoo.testing` harness starts a real ZooKeeper server).

What it keeps of ZooKeeper's semantics, because the callers depend on it:
- versions: `set`/`delete`/`check` with a version fail with BadVersionError unless it matches;
  czxid (a broker's registration epoch) grows with every creation;
- multi-ops are all or nothing, with kazoo's results on failure (RolledBackError before the
  failing op, its own error, RuntimeInconsistency after);
- ephemeral znodes belong to a session and go when it closes or expires;
- ctime and mtime are wall-clock ms (the ACL store ages its change notifications by ctime);
- watches are one-shot and per client, set by get/exists (data) and get_children (children),
  and are delivered on the client's own thread, never under the tree's lock, as kazoo delivers
  them on its event thread;
- a session expiry (`expire`) drops the session's ephemerals and watches and tells the
  client's listeners LOST, then CONNECTED with a new session, as kazoo reconnects.
Not modelled: ACLs, chroots, connection loss without expiry (SUSPENDED), network latency.
"""
from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import BadArgumentsError, BadVersionError, NoChildrenForEphemeralsError, \
    NodeExistsError, NoNodeError, NotEmptyError, RolledBackError, RuntimeInconsistency, \
    SessionExpiredError
from kazoo.protocol.states import EventType, KeeperState, KazooState, WatchedEvent, ZnodeStat

Watch = Callable[[WatchedEvent], Any]
log = logging.getLogger(__name__)


@dataclass
class _Node:
    data: bytes
    czxid: int
    mzxid: int
    owner: int = 0  # the session of an ephemeral znode, else 0
    version: int = 0
    ctime: int = 0  # creation, wall-clock ms (Kafka purges old change notifications by it)
    mtime: int = 0
    cversion: int = 0
    children: set[str] = field(default_factory=set)

    def copy(self) -> "_Node":
        return _Node(self.data, self.czxid, self.mzxid, self.owner, self.version,
                     self.ctime, self.mtime, self.cversion, set(self.children))

    def stat(self) -> ZnodeStat:
        return ZnodeStat(self.czxid, self.mzxid, self.ctime, self.mtime, self.version,
                         self.cversion, 0,
                         self.owner, len(self.data), len(self.children), self.mzxid)


def _parent(path: str) -> str:
    head = path.rsplit("/", 1)[0]
    return head or "/"


def _normalize(path: str) -> str:
    if not path.startswith("/"):
        raise BadArgumentsError(f"path must start with '/': {path!r}")
    return "/" + path.strip("/") if path != "/" else "/"


class MemoryZooKeeper:
    """One ZooKeeper ensemble's tree, shared by the clients it makes (`client`)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._nodes: dict[str, _Node] = {"/": _Node(b"", 0, 0)}
        self._zxid = 0
        self._sessions = itertools.count(0x1000)
        # path -> {(client, watch)}, in the order set; one-shot.
        self._data_watches: dict[str, dict[tuple[MemoryZkClient, Watch], None]] = {}
        self._child_watches: dict[str, dict[tuple[MemoryZkClient, Watch], None]] = {}

    def client(self, hosts: str = "memory", **_: Any) -> "MemoryZkClient":
        """A kazoo-like client of this tree; `hosts` and kazoo's other arguments (timeout,
        connection_retry) are accepted and ignored. Usable as `ZkMetadataStore`'s client
        class."""
        return MemoryZkClient(self)

    # -- the tree (all under the lock) -----------------------------------------------------------
    def _next_session(self) -> int:
        return next(self._sessions)

    def _node(self, path: str) -> _Node:
        node = self._nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        return node

    def _create(self, path: str, data: bytes, owner: int, sequence: bool,
                makepath: bool, events: list) -> str:
        parent_path = _parent(path)
        if parent_path not in self._nodes:
            if not makepath:
                raise NoNodeError(parent_path)
            self._create(parent_path, b"", 0, False, True, events)
        parent = self._nodes[parent_path]
        if parent.owner:
            raise NoChildrenForEphemeralsError(parent_path)
        if sequence:
            path = f"{path}{parent.cversion:010d}"
        if path in self._nodes:
            raise NodeExistsError(path)
        self._zxid += 1
        now = int(time.time() * 1000)
        self._nodes[path] = _Node(bytes(data), self._zxid, self._zxid, owner, ctime=now,
                                  mtime=now)
        parent.children.add(path.rsplit("/", 1)[1])
        parent.cversion += 1
        events.append((self._data_watches, path, EventType.CREATED))
        events.append((self._child_watches, parent_path, EventType.CHILD))
        return path

    def _set(self, path: str, data: bytes, version: int, events: list) -> ZnodeStat:
        node = self._node(path)
        if version != -1 and node.version != version:
            raise BadVersionError(path)
        self._zxid += 1
        node.data, node.mzxid, node.version = bytes(data), self._zxid, node.version + 1
        node.mtime = int(time.time() * 1000)
        events.append((self._data_watches, path, EventType.CHANGED))
        return node.stat()

    def _delete(self, path: str, version: int, events: list) -> bool:
        if path == "/":
            raise BadArgumentsError("cannot delete the root")
        node = self._node(path)
        if version != -1 and node.version != version:
            raise BadVersionError(path)
        if node.children:
            raise NotEmptyError(path)
        del self._nodes[path]
        parent = self._nodes[_parent(path)]
        parent.children.discard(path.rsplit("/", 1)[1])
        parent.cversion += 1
        events.append((self._data_watches, path, EventType.DELETED))
        events.append((self._child_watches, path, EventType.DELETED))
        events.append((self._child_watches, _parent(path), EventType.CHILD))
        return True

    def _check(self, path: str, version: int) -> bool:
        node = self._node(path)
        if version != -1 and node.version != version:
            raise BadVersionError(path)
        return True

    def _committed(self, events: list) -> None:
        """Called under the lock once a change is applied (`events` names the znodes it
        touched), before any watch fires and before the caller has its answer: where a
        durable tree (`pybroker.node.metadata_service`) logs the change. Nothing here."""

    def _fire(self, events: list) -> None:
        """Take the watches `events` trigger (one-shot) and hand each to its client's thread."""
        self._committed(events)
        due = []
        for table, path, kind in events:
            watchers = table.pop(path, None)
            if watchers:
                due += [(client, watch, WatchedEvent(kind, KeeperState.CONNECTED, path))
                        for client, watch in watchers]
        for client, watch, event in due:
            client._deliver(watch, event)

    def _run(self, op: Callable[[list], Any]) -> Any:
        events: list = []
        with self._lock:
            result = op(events)
            self._fire(events)
        return result

    def _watch(self, table: dict, path: str, client: "MemoryZkClient",
               watch: Watch | None) -> None:
        if watch is not None:
            table.setdefault(path, {})[(client, watch)] = None

    def _end_session(self, client: "MemoryZkClient", session: int) -> None:
        """Drop the session's ephemeral znodes (their watches fire for the others) and the
        client's watches."""
        with self._lock:
            events: list = []
            for path in sorted((p for p, n in self._nodes.items() if n.owner == session),
                               reverse=True):
                self._delete(path, -1, events)
            for table in (self._data_watches, self._child_watches):
                for path in list(table):
                    for key in [k for k in table[path] if k[0] is client]:
                        del table[path][key]
                    if not table[path]:
                        del table[path]
            self._fire(events)

    def ephemeral_owners(self) -> dict[str, int]:
        """Every ephemeral znode and its session (for assertions)."""
        with self._lock:
            return {p: n.owner for p, n in self._nodes.items() if n.owner}


class ClientEvents:
    """kazoo's event thread, for a kazoo-like client (this module's, and the node metadata
    service's `NodeZooKeeperClient`): state listeners and watches run on one thread of the
    client, in order, never on the caller's thread nor under a lock, and a callback that
    raises does not stop the others."""

    state: str

    def __init__(self) -> None:
        self._listeners: list[Callable[[str], Any]] = []
        self._events: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None

    def _start_events(self, name: str) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._dispatch, daemon=True, name=name)
            self._thread.start()

    def _stop_events(self) -> None:
        if self._thread is not None:
            self._events.put(None)
            self._thread = None

    def add_listener(self, listener: Callable[[str], Any]) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[str], Any]) -> None:
        self._listeners.remove(listener)

    def _state_change(self, state: str) -> None:
        self.state = state
        for listener in list(self._listeners):
            self._events.put((listener, state))

    def _deliver(self, watch: Watch, event: WatchedEvent) -> None:
        self._events.put((watch, event))

    def _dispatch(self) -> None:
        while True:
            item = self._events.get()
            if item is None:
                return
            fn, arg = item
            try:
                fn(arg)
            except Exception:  # as kazoo: a failing callback does not stop the others
                log.exception("watch callback failed")


class MemoryZkClient(ClientEvents):
    """The part of kazoo's KazooClient the broker uses, on a `MemoryZooKeeper`."""

    def __init__(self, server: MemoryZooKeeper) -> None:
        super().__init__()
        self._server = server
        self._session = 0
        self.state = KazooState.LOST

    # -- session -----------------------------------------------------------------------------------
    @property
    def client_id(self) -> tuple[int, bytes] | None:
        return (self._session, b"") if self._session else None

    def start(self, timeout: float = 15) -> None:
        if self._session:
            return
        self._session = self._server._next_session()
        self.state = KazooState.CONNECTED
        self._start_events(f"memory-zk-{self._session:x}")

    def stop(self) -> None:
        """Close the session: its ephemeral znodes go at once (as kazoo's close does)."""
        if not self._session:
            return
        session, self._session = self._session, 0
        self._server._end_session(self, session)
        self._state_change(KazooState.LOST)

    def close(self) -> None:
        self._stop_events()

    def expire(self) -> None:
        """Expire the session as ZooKeeper would after a broker went silent: ephemerals and
        watches go, listeners hear LOST, then the client has a new session (CONNECTED)."""
        if not self._session:
            return
        session, self._session = self._session, 0
        self._server._end_session(self, session)
        self._state_change(KazooState.LOST)
        self._session = self._server._next_session()
        self._state_change(KazooState.CONNECTED)

    def _live(self) -> None:
        if not self._session:
            raise SessionExpiredError("the session is closed")

    # -- operations --------------------------------------------------------------------------------
    def create(self, path: str, value: bytes = b"", acl: Any = None, ephemeral: bool = False,
               sequence: bool = False, makepath: bool = False,
               include_data: bool = False) -> str:
        self._live()
        owner = self._session if ephemeral else 0
        return self._server._run(lambda ev: self._server._create(
            _normalize(path), value, owner, sequence, makepath, ev))

    def ensure_path(self, path: str, acl: Any = None) -> bool:
        self._live()
        path = _normalize(path)

        def op(events: list) -> bool:
            if path not in self._server._nodes:
                self._server._create(path, b"", 0, False, True, events)
            return True
        return self._server._run(op)

    def exists(self, path: str, watch: Watch | None = None) -> ZnodeStat | None:
        self._live()
        path = _normalize(path)
        server = self._server
        with server._lock:
            server._watch(server._data_watches, path, self, watch)
            node = server._nodes.get(path)
            return None if node is None else node.stat()

    def get(self, path: str, watch: Watch | None = None) -> tuple[bytes, ZnodeStat]:
        self._live()
        path = _normalize(path)
        server = self._server
        with server._lock:
            node = server._node(path)  # no watch on a missing node, as ZooKeeper
            server._watch(server._data_watches, path, self, watch)
            return node.data, node.stat()

    def get_children(self, path: str, watch: Watch | None = None,
                     include_data: bool = False) -> list[str]:
        self._live()
        path = _normalize(path)
        server = self._server
        with server._lock:
            node = server._node(path)
            server._watch(server._child_watches, path, self, watch)
            return sorted(node.children)

    def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        self._live()
        return self._server._run(lambda ev: self._server._set(_normalize(path), value,
                                                              version, ev))

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> bool:
        self._live()
        path = _normalize(path)
        server = self._server

        def op(events: list) -> bool:
            if recursive:
                server._node(path)
                for child in sorted((p for p in server._nodes
                                     if p.startswith(path + "/")), reverse=True):
                    server._delete(child, -1, events)
            return server._delete(path, version, events)
        return server._run(op)

    def transaction(self) -> "MemoryTransaction":
        return MemoryTransaction(self)


class MemoryTransaction:
    """kazoo's TransactionRequest: operations recorded, then committed all or nothing."""

    def __init__(self, client: MemoryZkClient) -> None:
        self._client = client
        self._ops: list[Callable[[list], Any]] = []

    def create(self, path: str, value: bytes = b"", acl: Any = None, ephemeral: bool = False,
               sequence: bool = False) -> None:
        server, client = self._client._server, self._client
        self._ops.append(lambda ev: server._create(
            _normalize(path), value, client._session if ephemeral else 0, sequence, False, ev))

    def delete(self, path: str, version: int = -1) -> None:
        server = self._client._server
        self._ops.append(lambda ev: server._delete(_normalize(path), version, ev))

    def set_data(self, path: str, value: bytes, version: int = -1) -> None:
        server = self._client._server
        self._ops.append(lambda ev: server._set(_normalize(path), value, version, ev))

    def check(self, path: str, version: int) -> None:
        server = self._client._server
        self._ops.append(lambda ev: server._check(_normalize(path), version))

    def commit(self) -> list[Any]:
        """Each op's result; if one fails, nothing is applied and the results are kazoo's:
        RolledBackError before it, its error, RuntimeInconsistency after."""
        self._client._live()
        server = self._client._server
        with server._lock:
            saved = {path: node.copy() for path, node in server._nodes.items()}
            zxid = server._zxid
            events: list = []
            results: list[Any] = []
            for index, op in enumerate(self._ops):
                try:
                    results.append(op(events))
                except (NoNodeError, NodeExistsError, BadVersionError, NotEmptyError,
                        NoChildrenForEphemeralsError, BadArgumentsError) as exc:
                    server._nodes, server._zxid = saved, zxid
                    return ([RolledBackError() for _ in range(index)] + [exc]
                            + [RuntimeInconsistency() for _ in self._ops[index + 1:]])
            server._fire(events)
            return results
