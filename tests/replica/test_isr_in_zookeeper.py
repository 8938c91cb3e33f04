"""The leader's ISR writes against ZooKeeper's partition state, with the production store
(`ZkMetadataStore` on the in-memory ZooKeeper) and replica manager, and a controller's write
placed exactly between the leader's write and its reading back (issue #31: the CI failure of
`test_paused_follower_leaves_the_isr_and_rejoins`); and a log dir failed by a worker thread
while the leader's event loop is inside an append or holds a log's descriptor."""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from pybroker.cluster import zk_data as zd
from pybroker.cluster.memory_zk import MemoryZkClient, MemoryZooKeeper
from pybroker.cluster.topic_configs import TopicConfigs
from pybroker.cluster.zk_store import ZkMetadataStore
from pybroker.config import load_broker_config
from pybroker.replica.manager import ReplicaManager
from pybroker.replica.purgatory import Purgatory
from pybroker.storage.log_manager import LogManager
from tests.controller.helpers import seed_partition

TOPIC = "t"
LAG_MS = 30_000


class Leader:
    """Broker 0 leading t-0 (replicas 0, 1, 2) in ZooKeeper: its store, its replica manager
    following the store's images, and a client of the same ZooKeeper for the test's own
    writes (the controller's). Two log dirs, t-0 in the first: with the first failed, the
    broker goes on (with none left it would exit)."""

    def __init__(self, tmp_path: Path, isr: tuple[int, ...]) -> None:
        self.server = MemoryZooKeeper()
        self.zk: MemoryZkClient = self.server.client()
        self.zk.start()
        seed_partition(self.zk, TOPIC, (0, 1, 2), zd.LeaderAndIsr(0, 0, isr, 1))
        for follower in (1, 2):  # alive: registered (the ISR's eligibility reads it)
            self.register(follower)
        self.store = ZkMetadataStore("memory", 0, rack=None, session_timeout_ms=6000,
                                     connection_timeout_ms=6000,
                                     client_class=self.server.client)
        self.store.attach(tmp_path / "log", None)
        config = load_broker_config(overrides={"broker.id": 0, "log.dirs": str(tmp_path / "log"),
                                               "zookeeper.connect": "memory"})
        topic_configs = TopicConfigs(config, self.store)
        self.logs = LogManager([str(tmp_path / "log"), str(tmp_path / "log2")],
                               config_for=topic_configs.log_config)
        self.manager = ReplicaManager(0, self.store, self.logs, topic_configs, Purgatory())
        self.store.listeners.append(self.manager.apply_delta)
        self.manager.load_image(self.store.image)

    def register(self, broker: int, *, shutting_down: bool = False) -> None:
        """`broker` registered (its session's ephemeral znode), or its registration
        rewritten."""
        data = zd.encode_broker(broker, {"PLAINTEXT": ("127.0.0.1", 9092 + broker)}, {},
                                shutting_down=shutting_down)
        if self.zk.exists(zd.broker_path(broker)):
            self.zk.set(zd.broker_path(broker), data)
        else:
            self.zk.create(zd.broker_path(broker), data, ephemeral=True, makepath=True)

    @property
    def part(self) -> Any:
        return self.manager.hosted_partition(TOPIC, 0)

    def state(self) -> tuple[zd.LeaderAndIsr, int]:
        raw, stat = self.zk.get(zd.state_path(TOPIC, 0))
        return zd.decode_state(raw), stat.version

    def catch_up(self, replica: int) -> None:
        """`replica` fetched from the log end: it may join the ISR."""
        self.part.update_follower_fetch(replica, self.part.log.log_end_offset,
                                        int(time.time() * 1000))

    def controller_writes_after_the_leaders_next_write(self, state: zd.LeaderAndIsr) -> None:
        """The next ISR write of the leader lands, then at once (before the leader reads it
        back) the controller's `state`, conditionally on the version the leader's write made:
        the controller decided from the leader's state."""
        client = self.store.zk
        original = client.set

        def set_then_controller(path: str, value: bytes, version: int = -1) -> Any:
            client.set = original
            stat = original(path, value, version)
            self.zk.set(path, zd.encode_state(state), version=stat.version)
            return stat
        client.set = set_then_controller

    def close(self) -> None:
        self.store.close()
        self.zk.stop()
        self.logs.close()


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[Leader]:
    made = Leader(tmp_path, isr=(0, 2))
    yield made
    made.close()


def test_a_controller_write_right_after_an_expansion_is_not_overridden(leader: Leader) -> None:
    """The CI failure: the leader wrote its expansion [0, 1, 2], the controller at once moved
    the leader epoch to 1 with ISR [0, 2] (broker 1 had died for it), and the leader read
    that back before it adopted what it had written. It adopted its own ISR over the newer
    one, so it believed 1 in the ISR at epoch 1 while ZooKeeper said [0, 2], and never wrote
    again: ZooKeeper held [0, 2] for good. The leader must keep the newer state, and once 1
    has caught up at epoch 1, expand again."""
    assert leader.part.isr == frozenset({0, 2})
    leader.catch_up(1)
    leader.controller_writes_after_the_leaders_next_write(
        zd.LeaderAndIsr(0, 1, (0, 2), 2))

    async def main() -> None:
        await leader.manager._maybe_change_isr((TOPIC, 0), LAG_MS, expand=True)
    trio.run(main)

    state, _ = leader.state()
    assert (state.leader_epoch, state.isr) == (1, (0, 2))
    assert leader.part.leader_epoch == 1
    assert leader.part.isr == frozenset({0, 2}), "the leader believes an ISR ZooKeeper lacks"

    leader.catch_up(1)
    trio.run(main)
    state, _ = leader.state()
    assert (state.leader_epoch, sorted(state.isr)) == (1, [0, 1, 2])
    assert leader.part.isr == frozenset({0, 1, 2})


def test_a_broker_in_controlled_shutdown_does_not_rejoin_the_isr(leader: Leader) -> None:
    """Kafka's isReplicaIsrEligible (KIP-841): broker 1 asked for a controlled shutdown (its
    registration says so) and is out of the ISR; its fetches until it closes must not put it
    back, or the leader's own controlled shutdown would wait for it to go. Registered again,
    not shutting down, it may rejoin."""
    async def expand(shutting_down: bool) -> None:
        await leader.store.refresh_now(("brokers",))
        assert leader.store.image.brokers[1].shutting_down is shutting_down
        leader.catch_up(1)
        await leader.manager._maybe_change_isr((TOPIC, 0), LAG_MS, expand=True)

    leader.register(1, shutting_down=True)
    trio.run(expand, True)
    assert leader.state()[0].isr == (0, 2)
    assert leader.part.isr == frozenset({0, 2})

    leader.register(1)
    trio.run(expand, False)
    assert leader.state()[0].isr == (0, 1, 2)
    assert leader.part.isr == frozenset({0, 1, 2})


def test_a_broker_not_registered_does_not_rejoin_the_isr(leader: Leader) -> None:
    """Kafka's isReplicaIsrEligible asks hasAliveBroker too: broker 1's session ended (its
    registration gone, so the controller took it out of the ISR), and a fetch of it that the
    leader counted before must not make a dead broker electable. Registered again, it may
    rejoin."""
    async def expand(registered: bool) -> None:
        await leader.store.refresh_now(("brokers",))
        assert (1 in leader.store.image.brokers) is registered
        leader.catch_up(1)
        await leader.manager._maybe_change_isr((TOPIC, 0), LAG_MS, expand=True)

    leader.zk.delete(zd.broker_path(1))
    trio.run(expand, False)
    assert leader.state()[0].isr == (0, 2)
    assert leader.part.isr == frozenset({0, 2})

    leader.register(1)
    trio.run(expand, True)
    assert leader.state()[0].isr == (0, 1, 2)
    assert leader.part.isr == frozenset({0, 1, 2})


@pytest.mark.parametrize("write", ["produce", "marker"])
def test_a_dir_failed_by_another_thread_during_an_append_answers_storage_error(
        leader: Leader, write: str) -> None:
    """A flush or checkpoint worker thread finds the dir failed while the event loop is inside
    an append that has already passed the offline check, and the dir's logs are closed before
    the write: `fail_dir` closed them at once then (seen once in 11 runs of
    tests/cluster/test_log_dir_failure.py under load); now only where no event loop takes the
    close (no listener, as here, or a broker closing). The append's ValueError left the
    handler as UNKNOWN_SERVER_ERROR, which kafka-python's producer takes for fatal. Kafka
    answers KAFKA_STORAGE_ERROR for a log in an offline dir, and the client goes to the new
    leader."""
    from protocol.errors import ErrorCode
    from protocol.records.record import Record, build_batch

    leader.logs.on_dir_offline = None  # the event loop's part (`_take_dir_offline`) is later
    log_dir = leader.logs.log_dirs[0]
    check = leader.logs.is_offline

    def checked_just_before_the_failure(topic: str, partition: int) -> bool:
        online = check(topic, partition)
        leader.logs.fail_dir(log_dir, OSError(5, "Input/output error"))  # the worker, now
        return online
    leader.logs.is_offline = checked_just_before_the_failure  # type: ignore[method-assign]
    if write == "produce":
        result = leader.manager.append(TOPIC, 0, build_batch([Record(None, b"x")]))
    else:
        result = leader.manager.write_txn_marker(TOPIC, 0, 1, 0, 0, True)
    assert result.error == ErrorCode.KAFKA_STORAGE_ERROR
    assert log_dir in leader.logs.offline_dirs


def test_a_dir_failed_by_a_worker_leaves_the_loops_descriptor_open_until_the_loop_lets_go(
        leader: Leader, tmp_path: Path) -> None:
    """The event loop has taken a segment's descriptor (an append holds `segment.fd` until its
    `os.write`, a FileRegion its `fileno()` until `sendfile`) when a worker thread (a flush, a
    checkpoint) finds the dir failed. `fail_dir` closed the dir's logs there and then, so the
    loop's number was closed under it: EBADF, or, once any thread opened a file, a write or
    sendfile through that other file. The logs are closed on the loop, once it has let their
    partitions go, as Kafka closes a failed dir's logs after taking its partitions offline."""
    from protocol.records.record import Record, build_batch

    assert leader.manager.append(TOPIC, 0, build_batch([Record(None, b"x")])).error == 0
    plog = leader.part.log
    segment = plog.segments[-1]
    log_dir = leader.logs.log_dir_of(TOPIC, 0)
    assert log_dir == tmp_path / "log"
    loop_holds_fd = threading.Event()
    reported = threading.Event()  # the worker's fail_dir has reached the listener
    listener = leader.logs.on_dir_offline
    assert listener is not None

    def report(failed: Path) -> None:
        reported.set()
        listener(failed)
    leader.logs.on_dir_offline = report

    running = trio.Event()

    def worker() -> None:
        trio.from_thread.run_sync(running.set)
        assert loop_holds_fd.wait(30)
        leader.logs.fail_dir(log_dir, OSError(5, "Input/output error"))

    seen: list[int] = []

    async def holder() -> None:
        await running.wait()
        fd = segment.fileno()
        loop_holds_fd.set()
        # The worker runs while the loop is still between taking the number and using it (a
        # thread switch under the GIL), here until it has reported the failure: with the
        # logs closed in the worker, they are closed by then.
        assert reported.wait(30)
        other = os.open(tmp_path / "another-file", os.O_RDWR | os.O_CREAT)  # any thread's
        try:
            seen.append(os.fstat(fd).st_ino)
        except OSError as exc:
            seen.append(-exc.errno)
        finally:
            os.close(other)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.to_thread.run_sync, worker)
            nursery.start_soon(holder)

    trio.run(main)
    assert seen == [os.stat(segment.log_path).st_ino], \
        "the loop's descriptor was closed (or reused) under it"
    assert plog.closed and segment.closed  # closed all the same, on the loop
    assert leader.part is None and leader.logs.is_offline(TOPIC, 0)
    assert leader.logs.online_dirs == [tmp_path / "log2"]
