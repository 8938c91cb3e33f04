"""The in-memory ZooKeeper keeps the semantics the store and the controller rely on:
conditional writes, all-or-nothing multi-ops with kazoo's results, ephemerals per session,
one-shot watches delivered off the caller's thread; and so does the node's metadata service
(pybroker/node), the same tree served over a Unix socket to its `NodeZooKeeperClient`s: every
test runs on both (`tree`). In-process, no ZooKeeper: the fast tier."""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError, \
    RolledBackError, RuntimeInconsistency, SessionExpiredError
from kazoo.protocol.states import EventType

from pybroker.cluster.memory_zk import MemoryZooKeeper
from pybroker.node.metadata_client import NodeZooKeeperClient
from pybroker.node.metadata_service import MetadataService
from tests.cluster.zk_events import Events


class _Tree:
    """A tree and the started clients made of it, stopped at the end."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.service: MetadataService | None = None
        self.memory: MemoryZooKeeper | None = None
        if kind == "memory":
            self.memory = MemoryZooKeeper()
        else:
            self.service = MetadataService(tmp_path / "meta.sock", tmp_path / "data", 6000)
            self.service.start()
        self.clients: list[Any] = []

    def client(self) -> Any:
        if self.memory is not None:
            client = self.memory.client(hosts="memory", timeout=6.0)
        else:
            assert self.service is not None
            client = NodeZooKeeperClient(hosts=self.service.connect, timeout=6.0)
        client.start()
        self.clients.append(client)
        return client

    def ephemeral_owners(self) -> dict[str, int]:
        tree = self.memory if self.memory is not None else self.service and self.service.tree
        assert tree is not None
        return tree.ephemeral_owners()

    def close(self) -> None:
        for client in self.clients:
            client.stop()
            client.close()
        if self.service is not None:
            self.service.close()


@pytest.fixture(params=["memory", "node-service"])
def tree(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[_Tree]:
    made = _Tree(request.param, tmp_path)
    yield made
    made.close()


def test_versions_and_conditional_writes(tree: _Tree) -> None:
    zk = tree.client()
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
    assert zk.ensure_path("/x/y/z") and zk.get_children("/x") == ["y"]


def test_a_failed_multi_op_applies_nothing(tree: _Tree) -> None:
    zk = tree.client()
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
    txn.delete("/controller")
    results = txn.commit()
    assert results[:2] == [True, "/controller"] and results[2].version == 1
    assert results[3] is True and zk.exists("/controller") is None
    assert zk.get("/epoch")[1].version == 1


def test_ephemerals_go_with_their_session_and_watches_fire_once(tree: _Tree) -> None:
    broker, other = tree.client(), tree.client()
    broker.create("/brokers/ids/1", b"{}", ephemeral=True, makepath=True)
    czxid = broker.exists("/brokers/ids/1").czxid
    assert other.exists("/brokers/ids/1").ephemeralOwner == broker.client_id[0]
    events = Events()
    assert other.get_children("/brokers/ids", watch=events) == ["1"]
    other.get("/brokers/ids/1", watch=events)
    other.get("/brokers/ids/1", watch=events)  # the same watch twice: still one watch
    broker.stop()
    assert other.exists("/brokers/ids/1") is None  # gone when stop returned
    seen = events.wait(2)
    assert threading.current_thread().name not in events.threads
    assert set(seen) == {(EventType.CHILD, "/brokers/ids"), (EventType.DELETED, "/brokers/ids/1")}
    with pytest.raises(SessionExpiredError):
        broker.get("/brokers/ids")
    broker.start()  # a new session registers again, under a new czxid (a new broker epoch)
    broker.create("/brokers/ids/1", b"{}", ephemeral=True)
    assert broker.exists("/brokers/ids/1").czxid > czxid
    time.sleep(0.05)
    assert len(events.seen) == 2  # one-shot: nothing more without re-arming


def test_expiry_tells_the_listeners_and_gives_a_new_session(tree: _Tree) -> None:
    zk = tree.client()
    states = Events()
    zk.add_listener(states)
    old = zk.client_id[0]
    zk.create("/e", ephemeral=True)
    zk.expire()
    assert states.wait(2) == ["LOST", "CONNECTED"]
    assert zk.exists("/e") is None and zk.client_id[0] != old
    assert tree.ephemeral_owners() == {}
