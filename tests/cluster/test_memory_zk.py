"""The in-memory ZooKeeper keeps the semantics the store and the controller rely on:
conditional writes, all-or-nothing multi-ops with kazoo's results, ephemerals per session,
one-shot watches delivered off the caller's thread."""
from __future__ import annotations

import threading
import time

import pytest
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError, \
    RolledBackError, RuntimeInconsistency, SessionExpiredError
from kazoo.protocol.states import EventType

from pybroker.cluster.memory_zk import MemoryZooKeeper


def _client(server: MemoryZooKeeper):  # type: ignore[no-untyped-def]
    client = server.client(hosts="memory", timeout=6.0)
    client.start()
    return client


class _Events:
    def __init__(self) -> None:
        self.seen: list = []
        self.cond = threading.Condition()

    def __call__(self, event) -> None:  # type: ignore[no-untyped-def]
        with self.cond:
            self.seen.append(event if isinstance(event, str) else (event.type, event.path))
            self.cond.notify_all()

    def wait(self, count: int) -> list:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.seen) >= count, 5), self.seen
            return list(self.seen)


def test_versions_and_conditional_writes() -> None:
    zk = _client(MemoryZooKeeper())
    with pytest.raises(NoNodeError):
        zk.create("/a/b", b"x")
    assert zk.create("/a/b", b"x", makepath=True) == "/a/b"
    with pytest.raises(NodeExistsError):
        zk.create("/a/b")
    data, stat = zk.get("/a/b")
    assert (data, stat.version) == (b"x", 0)
    assert zk.set("/a/b", b"y", version=0).version == 1
    with pytest.raises(BadVersionError):
        zk.set("/a/b", b"z", version=0)
    with pytest.raises(NotEmptyError):
        zk.delete("/a")
    zk.delete("/a", recursive=True)
    assert zk.exists("/a") is None
    first = zk.create("/s/n_", makepath=True, sequence=True)
    assert (first, zk.create("/s/n_", sequence=True)) == ("/s/n_0000000000", "/s/n_0000000001")


def test_a_failed_multi_op_applies_nothing() -> None:
    zk = _client(MemoryZooKeeper())
    zk.create("/epoch", b"1")
    txn = zk.transaction()
    txn.create("/controller", b"me")
    txn.check("/epoch", 5)
    txn.set_data("/epoch", b"2")
    results = txn.commit()
    assert [type(r) for r in results] == [RolledBackError, BadVersionError,
                                          RuntimeInconsistency]
    assert zk.exists("/controller") is None and zk.get("/epoch")[0] == b"1"
    txn = zk.transaction()
    txn.check("/epoch", 0)
    txn.create("/controller", b"me")
    txn.set_data("/epoch", b"2", version=0)
    assert txn.commit()[1] == "/controller"
    assert zk.get("/epoch")[1].version == 1


def test_ephemerals_go_with_their_session_and_watches_fire_once() -> None:
    server = MemoryZooKeeper()
    broker, other = _client(server), _client(server)
    broker.create("/brokers/ids/1", b"{}", ephemeral=True, makepath=True)
    czxid = broker.exists("/brokers/ids/1").czxid
    assert other.exists("/brokers/ids/1").ephemeralOwner == broker.client_id[0]
    events = _Events()
    assert other.get_children("/brokers/ids", watch=events) == ["1"]
    other.get("/brokers/ids/1", watch=events)
    broker.stop()
    seen = events.wait(2)
    assert set(seen) == {(EventType.CHILD, "/brokers/ids"), (EventType.DELETED, "/brokers/ids/1")}
    with pytest.raises(SessionExpiredError):
        broker.get("/brokers/ids")
    broker.start()  # a new session registers again, under a new czxid (a new broker epoch)
    broker.create("/brokers/ids/1", b"{}", ephemeral=True)
    assert broker.exists("/brokers/ids/1").czxid > czxid
    time.sleep(0.05)
    assert len(events.seen) == 2  # one-shot: nothing more without re-arming
    other.stop()
    broker.stop()


def test_expiry_tells_the_listeners_and_gives_a_new_session() -> None:
    server = MemoryZooKeeper()
    zk = _client(server)
    states = _Events()
    zk.add_listener(states)
    old = zk.client_id[0]
    zk.create("/e", ephemeral=True)
    zk.expire()
    assert states.wait(2) == ["LOST", "CONNECTED"]
    assert zk.exists("/e") is None and zk.client_id[0] != old
    assert server.ephemeral_owners() == {}
