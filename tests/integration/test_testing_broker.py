"""pybroker.testing.Broker as a user's test suite sees it: a real broker that stock clients
produce to and consume from, which restarts on the same port with its data, and whose
subprocess form survives kill -9 (issue #16)."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer

from protocol.errors import ErrorCode, KafkaError
from pybroker.testing import Broker, BrokerProcess

pytestmark = pytest.mark.in_process("tests pybroker.testing.Broker's thread mode itself")


def produce(bootstrap: str, topic: str, *values: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    errors: list = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(10) == 0
    assert errors == [None] * len(values)


def consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 15
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


def test_thread_broker_serves_clients_and_restarts_with_its_data() -> None:
    with Broker(num_partitions=2) as broker:
        log_dir, port = broker.log_dir, broker.port
        assert broker.bootstrap == f"127.0.0.1:{port}" and port > 0
        broker.create_topic("orders", partitions=3, config={"retention.ms": 3600000})
        topic = broker.server_info.broker.services.metadata.image.topics["orders"]
        assert len(topic.partitions) == 3 and topic.configs["retention.ms"] == "3600000"
        with pytest.raises(KafkaError) as refused:
            broker.create_topic("orders")
        assert refused.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
        produce(broker.bootstrap, "orders", b"a", b"b")
        broker.restart()
        assert (broker.port, broker.log_dir) == (port, log_dir)
        assert sorted(consume(broker.bootstrap, "orders", 2)) == [b"a", b"b"]
        assert any("created topic orders" in line for line in broker.recent_log())
        with pytest.raises(RuntimeError, match="process=True"):
            broker.kill()
    assert not log_dir.exists()


async def test_create_topic_from_a_trio_test() -> None:
    """A blocking helper called from inside a running trio loop hops off it, not deadlocks."""
    with Broker() as broker:
        broker.create_topic("from-trio")
        assert "from-trio" in broker.server_info.broker.services.metadata.image.topics


def test_keep_leaves_the_log_dir() -> None:
    broker = Broker(keep=True).start()
    broker.stop()
    assert broker.log_dir is not None and broker.log_dir.is_dir()
    import shutil
    shutil.rmtree(broker.log_dir)


def test_process_broker_survives_kill_9_on_the_same_port() -> None:
    with Broker(process=True) as broker:
        broker.create_topic("durable")  # CreateTopics over the wire
        produce(broker.bootstrap, "durable", b"kept")
        port = broker.port
        broker.kill()
        broker.restart()
        assert broker.port == port
        assert consume(broker.bootstrap, "durable", 1) == [b"kept"]
        with pytest.raises(RuntimeError, match="thread mode"):
            broker.server_info


def test_hooks_are_reached_through_the_broker() -> None:
    """Broker.control / .requests are the broker's own RequestHooks (thread mode): a one-shot
    error reaches a raw client, and what it sent is recorded."""
    from protocol.api_keys import ApiKey
    from protocol.errors import ErrorCode
    from tests.integration.raw import send_request

    with Broker() as broker:
        assert broker.hooks is broker.server_info.hooks
        broker.control("DescribeCluster", lambda request: ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        first = send_request(broker.bootstrap, ApiKey.DESCRIBE_CLUSTER, 0,
                             {"include_cluster_authorized_operations": False})
        second = send_request(broker.bootstrap, ApiKey.DESCRIBE_CLUSTER, 0,
                              {"include_cluster_authorized_operations": False})
        assert (first.error_code, second.error_code) == (
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED, 0)
        assert [r.api_name for r in broker.requests][-2:] == ["DescribeCluster"] * 2



def test_compact_and_apply_retention_run_now() -> None:
    """The chaos verbs: a compacted topic is cleaned on demand (the newest value per key is
    what a consumer then reads), and retention deletes expired segments on demand."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    with Broker(log_cleaner_backoff_ms=3_600_000, log_retention_check_interval_ms=3_600_000
                ) as broker:
        broker.create_topic("compacted", config={
            "cleanup.policy": "compact", "segment.bytes": 4096,
            "min.cleanable.dirty.ratio": 0.01, "segment.ms": 100})
        broker.create_topic("expiring", config={"retention.ms": 1, "segment.bytes": 4096})
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        for i in range(200):
            producer.produce("compacted", key=b"k%d" % (i % 5), value=b"v%03d" % i)
            producer.produce("expiring", value=b"x" * 100)
            producer.flush(10)
        time.sleep(0.2)
        producer.produce("compacted", key=b"roll", value=b"roll")  # rolls the old segment
        producer.flush(10)
        assert broker.compact() == 1
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "verbs",
                             "enable.partition.eof": True})
        consumer.assign([TopicPartition("compacted", 0, 0)])
        seen = {}
        while True:
            msg = consumer.poll(5)
            assert msg is not None
            if msg.error():
                break
            seen.setdefault(msg.key(), []).append(msg.value())
        consumer.close()
        assert all(len(values) == 1 for values in seen.values()), seen
        assert seen[b"k4"] == [b"v199"]
        time.sleep(0.05)
        assert broker.apply_retention() > 0
        start = broker.server_info.broker.logs.get("expiring", 0).log_start_offset
        assert start > 0


class _SlowReader(BrokerProcess):
    """A BrokerProcess whose stderr reader falls behind, as a loaded machine's may: it
    starts reading half a second late."""

    def _drain(self) -> None:
        time.sleep(0.5)
        super()._drain()


def test_a_process_brokers_last_lines_are_read_once_it_is_reaped(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """BrokerProcess.wait returns the exit status once stderr is read to its end, so a test
    reading `stderr_lines` then sees what the broker wrote just before it exited (a CRITICAL
    line once went missing: the reader thread had not got to it when `proc.wait` returned)."""
    broker = _SlowReader(tmp_path / "logs").start(60)
    assert broker.proc is not None
    broker.proc.terminate()
    assert broker.wait(30) == 0
    assert any("shut down cleanly" in line for line in broker.stderr_lines), \
        broker.stderr_lines[-5:]


def test_a_process_broker_given_up_on_is_killed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`start` that gives up leaves no broker behind: it would hold its port and dir, and
    take CPU from the tests after it (a node's workers under load outlived their test)."""
    bp = BrokerProcess(tmp_path / "logs")
    with pytest.raises(RuntimeError, match="did not start in 0.001 s"):
        bp.start(timeout=0.001)
    assert bp.proc is not None and bp.proc.poll() is not None
