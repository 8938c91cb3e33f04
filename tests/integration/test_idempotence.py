"""Idempotent producers (kafka-python's default, confluent-kafka with enable.idempotence=true)
across forced reconnects: no duplicates, no gaps, order kept, offsets contiguous.

The clients reach the broker through a proxy (`proxy.Proxy`, advertised by the broker). To
force the case idempotence exists for, the proxy swallows the broker's responses while batches
are appended, then severs every connection: the producer never saw those batches acknowledged
and sends them again with the same sequence numbers, which the broker must recognise as
duplicates (answering with the original offsets) rather than append twice. A second variant
restarts the broker on the same port and log dir in that window, so the producer state has to
survive the restart.
"""
from __future__ import annotations

import time
import uuid
from contextlib import ExitStack
from pathlib import Path

import pytest

from protocol.api_keys import ApiKey
from tests.helpers import serving_broker
from tests.integration.clients import AIOKAFKA, CONFLUENT, KAFKA_PYTHON, Rec, check_same
from tests.integration.admin_helpers import high_watermark
from tests.integration.proxy import Proxy
from tests.integration.raw import create_topic, leader_address, send_request

N_BEFORE, N_DURING, N_AFTER = 40, 30, 40
TOTAL = N_BEFORE + N_DURING + N_AFTER


class ProxiedBroker:
    """A broker behind a proxy that it advertises; `restart()` keeps port and log dir."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.proxy = Proxy()
        self._stack: ExitStack | None = None
        self.info = None
        self.port = 0

    def start(self) -> None:
        self._stack = ExitStack()
        self.info = self._stack.enter_context(serving_broker(
            self.log_dir, listeners=f"PLAINTEXT://127.0.0.1:{self.port}",
            advertised_listeners=f"PLAINTEXT://127.0.0.1:{self.proxy.port}"))
        self.port = self.info.port
        self.proxy.target = ("127.0.0.1", self.port)

    def stop(self) -> None:
        assert self._stack is not None
        self._stack.close()
        self._stack = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        if self._stack is not None:
            self.stop()
        self.proxy.close()

    def log_end_offset(self, topic: str, partition: int = 0) -> int:
        plog = self.info.broker.logs.get(topic, partition)
        return plog.log_end_offset


@pytest.fixture
def proxied(tmp_path: Path):
    pb = ProxiedBroker(tmp_path / "logs")
    pb.start()
    try:
        yield pb
    finally:
        pb.close()


def _wait_for(predicate, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _records(start: int, count: int) -> list[Rec]:
    return [Rec(f"k{i}".encode(), f"value-{i:05d}".encode(), partition=0)
            for i in range(start, start + count)]


def _break_connections(pb: ProxiedBroker, topic: str, restart: bool) -> None:
    """Wait until some unacknowledged batches are in the log (a producer keeps at most five
    requests in flight, so not necessarily all of them), then break every connection
    (restarting the broker in between if asked) and let responses through again."""
    _wait_for(lambda: pb.log_end_offset(topic) > N_BEFORE, what="the unacknowledged appends")
    last, stable_since = -1, time.monotonic()
    while time.monotonic() - stable_since < 0.2:  # until appends stop: the window is full
        leo = pb.log_end_offset(topic)
        if leo != last:
            last, stable_since = leo, time.monotonic()
        time.sleep(0.01)
    if restart:
        pb.restart()
    pb.proxy.sever()
    pb.proxy.drop_responses = False


# -- the producers under test ------------------------------------------------------------------

def _kafka_python_run(pb: ProxiedBroker, topic: str, restart: bool) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=pb.proxy.bootstrap, linger_ms=0,
                             request_timeout_ms=5000, retry_backoff_ms=50)
    assert producer.config["enable_idempotence"], "kafka-python defaults to idempotence"
    try:
        def send(recs: list[Rec]) -> list:
            return [producer.send(topic, key=r.key, value=r.value, partition=0) for r in recs]

        for fut in send(_records(0, N_BEFORE)):
            fut.get(10)
        pb.proxy.drop_responses = True
        during = send(_records(N_BEFORE, N_DURING))
        _break_connections(pb, topic, restart)
        after = send(_records(N_BEFORE + N_DURING, N_AFTER))
        producer.flush(20)
        offsets = [fut.get(10).offset for fut in during + after]
        assert offsets == list(range(N_BEFORE, TOTAL)), "retried batches got new offsets"
    finally:
        producer.close(5)


def _confluent_run(pb: ProxiedBroker, topic: str, restart: bool) -> None:
    from confluent_kafka import Producer
    delivered: dict[bytes, int] = {}
    errors: list = []

    def on_delivery(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is not None:
            errors.append(err)
        else:
            delivered[msg.value()] = msg.offset()

    producer = Producer({"bootstrap.servers": pb.proxy.bootstrap, "enable.idempotence": True,
                         "linger.ms": 0, "socket.timeout.ms": 5000,
                         "reconnect.backoff.ms": 20, "retry.backoff.ms": 50,
                         "message.timeout.ms": 30000})

    def send(recs: list[Rec]) -> None:
        for r in recs:
            producer.produce(topic, key=r.key, value=r.value, partition=0,
                             on_delivery=on_delivery)
            producer.poll(0)

    send(_records(0, N_BEFORE))
    assert producer.flush(10) == 0
    pb.proxy.drop_responses = True
    send(_records(N_BEFORE, N_DURING))
    _break_connections(pb, topic, restart)
    send(_records(N_BEFORE + N_DURING, N_AFTER))
    assert producer.flush(30) == 0
    assert not errors, errors
    assert [delivered[r.value] for r in _records(0, TOTAL)] == list(range(TOTAL))


RUNS = {"kafka-python": _kafka_python_run, "confluent": _confluent_run}


@pytest.mark.in_process("reads its log's end in this process, behind one advertised proxy")
@pytest.mark.parametrize("restart", [False, True], ids=["sever", "restart"])
@pytest.mark.parametrize("client", list(RUNS))
def test_no_duplicates_across_reconnect(proxied: ProxiedBroker, client: str,
                                        restart: bool) -> None:
    topic = f"idem-{client}-{uuid.uuid4().hex[:8]}"
    create_topic(proxied.info.bootstrap, topic, 1)
    accepted_before = proxied.proxy.connections_accepted
    RUNS[client](proxied, topic, restart)
    assert proxied.proxy.connections_accepted > accepted_before + 1, "no reconnect happened"
    assert proxied.log_end_offset(topic) == TOTAL, "a retried batch was appended twice"
    got = CONFLUENT.consume(proxied.info.bootstrap, topic, [0], TOTAL)
    check_same(_records(0, TOTAL), got)
    _check_describe_producers(proxied.info.bootstrap, topic)


def _check_describe_producers(bootstrap: str, topic: str) -> None:
    """One producer, its last sequence the last record's (sequences start at 0)."""
    body = {"topics": [{"name": topic, "partition_indexes": [0]}]}
    resp = send_request(leader_address(bootstrap, topic, 0), ApiKey.DESCRIBE_PRODUCERS, 0, body)
    part = resp.topics[0].partitions[0]
    assert part.error_code == 0, part
    assert len(part.active_producers) == 1, part.active_producers
    producer = part.active_producers[0]
    assert producer.producer_id >= 0 and producer.producer_epoch >= 0
    assert producer.last_sequence == TOTAL - 1
    assert producer.last_timestamp > 0


def test_describe_producers_kafka_python_admin(broker) -> None:
    """kafka-python's admin client lists the idempotent producer and its last sequence."""
    from kafka import KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient
    topic = f"descprod-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(7):
        producer.send(topic, value=b"x%d" % i, partition=0)
    for i in range(3):
        producer.send(topic, value=b"y%d" % i, partition=1)
    producer.flush(10)
    pid = producer._transaction_manager.producer_id_and_epoch.producer_id
    producer.close(5)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        states = admin.describe_producers([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    finally:
        admin.close()
    by_partition = {tp.partition: state for tp, state in states.items()}
    assert set(by_partition) == {0, 1}
    for partition, last_seq in ((0, 6), (1, 2)):
        producers = by_partition[partition].active_producers
        assert [p.producer_id for p in producers] == [pid]
        assert producers[0].last_sequence == last_seq


def test_aiokafka_idempotent_producer(broker) -> None:
    """aiokafka's idempotent mode (InitProducerId v0, acks=all): one producer, sequences 0..n."""
    topic = f"idem-aio-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1)
    sent = _records(0, TOTAL)
    AIOKAFKA.produce(broker.bootstrap, topic, sent, idempotent=True)
    check_same(sent, CONFLUENT.consume(broker.bootstrap, topic, [0], TOTAL))
    _check_describe_producers(broker.bootstrap, topic)


@pytest.mark.parametrize("acks", [0, 1])
def test_kafka_python_non_idempotent_acks(broker, acks: int) -> None:
    """acks=0 gets no responses at all, acks=1 the leader's: both deliver everything once."""
    topic = f"acks{acks}-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1)
    sent = _records(0, 50)
    KAFKA_PYTHON.produce(broker.bootstrap, topic, sent,
                         config={"acks": acks, "enable_idempotence": False})
    _wait_for(lambda: high_watermark(broker, topic) == 50,
              what="the acks=0 appends")
    check_same(sent, CONFLUENT.consume(broker.bootstrap, topic, [0], 50))


def test_idle_producers_expire(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """producer.id.expiration.ms: a producer that has not written for that long is forgotten
    (checked on the retention schedule), as DescribeProducers then shows."""
    def active(bootstrap: str, topic: str) -> list:
        body = {"topics": [{"name": topic, "partition_indexes": [0]}]}
        part = send_request(leader_address(bootstrap, topic, 0), ApiKey.DESCRIBE_PRODUCERS, 0,
                            body).topics[0].partitions[0]
        assert part.error_code == 0, part
        return list(part.active_producers)

    with serving_broker(tmp_path / "logs", producer_id_expiration_ms="3000",
                          log_retention_check_interval_ms="100") as info:
        topic = f"expiring-{uuid.uuid4().hex[:8]}"
        create_topic(info.bootstrap, topic, 1)
        CONFLUENT.produce(info.bootstrap, topic, _records(0, 3), idempotent=True)
        assert len(active(info.bootstrap, topic)) == 1  # written just now: kept
        deadline = time.monotonic() + 15
        while active(info.bootstrap, topic):
            assert time.monotonic() < deadline, "the idle producer was never expired"
            time.sleep(0.1)


def test_init_producer_id_without_transactional_id_is_always_fresh(broker) -> None:
    """kafka-python's KIP-360 recovery (InitProducerId v3+ naming its own id and epoch, no
    transactional id) gets a new producer id at epoch 0, as from Kafka: the broker never
    bumps the epoch of an id a client merely names, so no client can fence another's
    idempotent producer. The producer carries on under the new id without loss."""
    from kafka import KafkaProducer
    topic = f"fresh-pid-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True)
    try:
        for i in range(5):
            producer.send(topic, value=b"before-%d" % i, partition=0)
        producer.flush(10)
        manager = producer._transaction_manager
        before = manager.producer_id_and_epoch
        assert before.producer_id >= 0 and before.epoch == 0
        manager.bump_producer_id_and_epoch()  # what an OutOfOrderSequence error triggers
        # The error path wakes the sender thread itself; called directly, the request would
        # wait until the sender's poll times out (flaky: 1 run in 2 timed out here).
        producer._sender.wakeup()
        _wait_for(lambda: not manager.is_bumping_epoch(), what="the InitProducerId answer")
        after = manager.producer_id_and_epoch
        assert after.producer_id != before.producer_id, (before, after)
        assert after.epoch == 0
        for i in range(5):
            producer.send(topic, value=b"after-%d" % i, partition=0)
        producer.flush(10)
    finally:
        producer.close(5)
    got = CONFLUENT.consume(broker.bootstrap, topic, [0], 10)
    assert [g.value for g in got] == [b"before-%d" % i for i in range(5)] + \
        [b"after-%d" % i for i in range(5)]
