"""A new topic's partition states are written in one ZooKeeper multi-op (or a few, by size),
with their parents, and read back once each, rather than one multi-op and two parent creates
per partition: on the node's metadata service every call is a round trip over its socket and
a worker-thread hop, and five concurrent creations of 100 partitions outlasted a client's
15 s (issue #29). Round trips are counted on a counting client of the in-memory ZooKeeper,
with the production store and controller. The guarantees stay: fenced by the controller
epoch, conditional on the topic's version, a state already there read rather than
overwritten, and the others still written."""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio

from pybroker.cluster import zk_data as zd
from pybroker.cluster.memory_zk import MemoryTransaction, MemoryZkClient, MemoryZooKeeper
from pybroker.cluster.zk_store import ZkMetadataStore
from pybroker.controller import controller as controller_module
from pybroker.controller.controller import Controller, ControllerFenced

PARTITIONS = 100


class CountingClient(MemoryZkClient):
    """A kazoo-like client that counts its calls: each is a round trip to a real store."""

    def __init__(self, server: MemoryZooKeeper) -> None:
        super().__init__(server)
        self.calls: Counter[str] = Counter()
        self.failed_multis = 0
        self.multi_sizes: list[int] = []

    def create(self, *args: Any, **kwargs: Any) -> str:
        self.calls["create"] += 1
        return super().create(*args, **kwargs)

    def ensure_path(self, *args: Any, **kwargs: Any) -> bool:
        self.calls["ensure_path"] += 1
        return super().ensure_path(*args, **kwargs)

    def exists(self, *args: Any, **kwargs: Any) -> Any:
        self.calls["exists"] += 1
        return super().exists(*args, **kwargs)

    def get(self, *args: Any, **kwargs: Any) -> Any:
        self.calls["get"] += 1
        return super().get(*args, **kwargs)

    def get_children(self, *args: Any, **kwargs: Any) -> list[str]:
        self.calls["get_children"] += 1
        return super().get_children(*args, **kwargs)

    def set(self, *args: Any, **kwargs: Any) -> Any:
        self.calls["set"] += 1
        return super().set(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> bool:
        self.calls["delete"] += 1
        return super().delete(*args, **kwargs)

    def transaction(self) -> "CountingTransaction":
        return CountingTransaction(self)


class CountingTransaction(MemoryTransaction):
    def commit(self) -> list[Any]:
        client = self._client
        assert isinstance(client, CountingClient)
        client.calls["multi"] += 1
        client.multi_sizes.append(len(self._ops))
        results = super().commit()
        if any(isinstance(r, Exception) for r in results):
            client.failed_multis += 1
        return results


class NewTopic:
    """Broker 2, the controller, with topic t's assignment of PARTITIONS partitions (replicas
    2 and 0) in ZooKeeper and no partition state yet (as any broker writes a new topic);
    broker 0 is registered too."""

    def __init__(self, tmp_path: Path) -> None:
        self.server = MemoryZooKeeper()
        self.zk = self.server.client()
        self.zk.start()
        for path in zd.PERSISTENT_PATHS:
            self.zk.ensure_path(path)
        self.zk.create(zd.topic_path("t"), zd.encode_topic(zd.TopicAssignment(
            {i: (2, 0) for i in range(PARTITIONS)})), makepath=True)
        self.zk.create(zd.broker_path(0), zd.encode_broker(
            0, {"PLAINTEXT": ("127.0.0.1", 9)}, {"PLAINTEXT": "PLAINTEXT"}), ephemeral=True)
        self.client: CountingClient | None = None

        def client_class(hosts: str = "memory", **_: Any) -> CountingClient:
            self.client = CountingClient(self.server)
            return self.client

        self.store = ZkMetadataStore("memory", 2, rack=None, session_timeout_ms=6000,
                                     connection_timeout_ms=6000, client_class=client_class)
        self.store.attach(tmp_path, None)
        self.store.set_endpoints({"PLAINTEXT": ("127.0.0.1", 10)})
        self.store.register()
        self.controller = Controller(self.store)

    @property
    def calls(self) -> Counter[str]:
        assert self.client is not None
        return self.client.calls

    async def elect(self) -> None:
        await self.store.refresh_now(("brokers",), ("topics",))
        await self.controller._try_elect()
        assert self.controller.active
        assert self.client is not None
        self.client.calls.clear()
        self.client.multi_sizes.clear()
        self.client.failed_multis = 0

    def states(self) -> dict[int, zd.LeaderAndIsr]:
        out = {}
        for index in range(PARTITIONS):
            stat = self.zk.exists(zd.state_path("t", index))
            if stat is not None:
                out[index] = zd.decode_state(self.zk.get(zd.state_path("t", index))[0])
        return out

    def close(self) -> None:
        self.store.close()
        self.zk.stop()


@pytest.fixture
def topic(tmp_path: Path) -> Any:
    made = NewTopic(tmp_path)
    yield made
    made.close()


def test_a_new_topic_s_states_take_one_multi_op_and_one_read_each(topic: NewTopic) -> None:
    """One look at which parents exist, one multi-op making the parents and all 100 states,
    then the read-back: the topic and each state once. It took 100 multi-ops, 200 parent
    creates and two reads of each state."""
    async def main() -> None:
        await topic.elect()
        await topic.controller._reconcile(topic.store.image)

    trio.run(main)
    states = topic.states()
    assert sorted(states) == list(range(PARTITIONS))
    assert {(s.leader, s.leader_epoch, s.isr) for s in states.values()} == {(2, 0, (2, 0))}
    assert topic.store.image.has_states("t", PARTITIONS)
    assert dict(topic.calls) == {"get_children": 1, "multi": 1, "get": 1 + PARTITIONS}
    assert topic.client is not None and topic.client.failed_multis == 0


def test_a_topic_too_large_for_one_request_is_written_in_several(
        topic: NewTopic, monkeypatch: pytest.MonkeyPatch) -> None:
    """ZooKeeper refuses a request over jute.maxbuffer: the states go in multi-ops of at most
    MULTI_OP_BYTES, each conditional on the topic, the parents' root made once."""
    monkeypatch.setattr(controller_module, "MULTI_OP_BYTES", 4096)

    async def main() -> None:
        await topic.elect()
        await topic.controller._reconcile(topic.store.image)

    trio.run(main)
    assert sorted(topic.states()) == list(range(PARTITIONS))
    assert topic.client is not None
    assert topic.calls["multi"] > 1 and topic.client.failed_multis == 0
    # The epoch check, the topic check, the root once, and per partition its dir and state.
    assert sum(topic.client.multi_sizes) == 2 * topic.calls["multi"] + 1 + 2 * PARTITIONS
    assert topic.calls["create"] == 0


def test_a_state_already_there_is_read_and_the_others_are_still_written(
        topic: NewTopic) -> None:
    """Partition 7's state was written (by an earlier controller) after this controller's
    image was read: the batch's create of it fails, so the batch is tried again without it.
    Its state is kept, not overwritten, and read into the image; the other 99 land."""
    async def main() -> None:
        await topic.elect()
        topic.zk.create(zd.state_path("t", 7), zd.encode_state(zd.LeaderAndIsr(0, 3, (0,), 1)),
                        makepath=True)
        assert topic.store.image.partition("t", 7).leader_epoch == -1
        await topic.controller._reconcile(topic.store.image)

    trio.run(main)
    states = topic.states()
    assert sorted(states) == list(range(PARTITIONS))
    assert (states[7].leader, states[7].leader_epoch) == (0, 3)
    assert all((s.leader, s.leader_epoch) == (2, 0) for i, s in states.items() if i != 7)
    assert topic.calls["multi"] == 2
    assert topic.client is not None and topic.client.failed_multis == 1
    assert topic.store.image.partition("t", 7).leader_epoch == 3
    assert topic.store.image.has_states("t", PARTITIONS)


def test_a_topic_changed_since_the_image_gets_no_state_until_the_next_image(
        topic: NewTopic) -> None:
    """The topic's znode moved on (partitions added, or the topic deleted and made again)
    after the image the decisions came from: nothing is written for it; the next reconcile,
    from an image that has the change, writes every state."""
    async def main() -> None:
        await topic.elect()
        data, stat = topic.zk.get(zd.topic_path("t"))
        topic.zk.set(zd.topic_path("t"), data, version=stat.version)
        assert await topic.controller._write_states(
            topic.controller._new_partitions(topic.store.image,
                                             frozenset(topic.store.image.brokers)),
            create=True) == 0
        assert topic.states() == {}
        await topic.store.refresh_now(("topic", "t"))
        await topic.controller._reconcile(topic.store.image)

    trio.run(main)
    assert sorted(topic.states()) == list(range(PARTITIONS))


def test_a_replaced_controller_writes_no_state(topic: NewTopic) -> None:
    async def main() -> None:
        await topic.elect()
        _, stat = topic.zk.get(zd.CONTROLLER_EPOCH)
        topic.zk.set(zd.CONTROLLER_EPOCH, b"99", version=stat.version)
        with pytest.raises(ControllerFenced):
            await topic.controller._reconcile(topic.store.image)

    trio.run(main)
    assert topic.states() == {}
    assert topic.zk.exists(zd.partitions_path("t")) is None
