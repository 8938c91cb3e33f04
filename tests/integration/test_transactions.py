"""Transactions with stock clients against a real broker (issue #12): transactional producers
of confluent-kafka, kafka-python and aiokafka commit and abort; read_committed consumers see
exactly the committed records in order, read_uncommitted ones see everything; the last stable
offset holds at an open transaction's first offset; fencing of zombies and of transactions
that outlive their timeout; offsets committed inside a transaction.
"""
from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from tests.integration.raw import create_topic
from tests.integration.txn_clients import (
    READ_COMMITTED, READ_UNCOMMITTED, _raw_txn_batch, ck_producer, ck_read, ck_watermarks,
)


def _topic(prefix: str = "txn") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- confluent-kafka -----------------------------------------------------------------------------

def test_confluent_commit_and_abort_read_committed_sees_only_committed(broker) -> None:
    topic = _topic()
    create_topic(broker.bootstrap, topic, 2)
    producer = ck_producer(broker.bootstrap, f"tx-{topic}")
    from confluent_kafka import Producer
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    expected: dict[int, list[bytes]] = {0: [], 1: []}
    everything: dict[int, list[bytes]] = {0: [], 1: []}
    for round_, commit in enumerate([True, False, True, False, True]):
        producer.begin_transaction()
        for i in range(6):
            value = f"r{round_}-{i}".encode()
            producer.produce(topic, value=value, partition=i % 2)
            everything[i % 2].append(value)
            if commit:
                expected[i % 2].append(value)
        producer.flush(10)
        # A non-transactional write between the transaction's records and its marker.
        value = f"plain-{round_}".encode()
        plain.produce(topic, value=value, partition=0)
        assert plain.flush(10) == 0
        everything[0].append(value)
        expected[0].append(value)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    assert ck_read(broker.bootstrap, topic, READ_COMMITTED, 2) == expected
    assert ck_read(broker.bootstrap, topic, READ_UNCOMMITTED, 2) == everything


def test_last_stable_offset_holds_at_the_open_transaction(broker) -> None:
    topic = _topic()
    create_topic(broker.bootstrap, topic, 1)
    from confluent_kafka import Producer
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"before", partition=0)
    assert plain.flush(10) == 0
    producer = ck_producer(broker.bootstrap, f"tx-{topic}")
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=b"open-%d" % i, partition=0)
    producer.flush(10)
    plain.produce(topic, value=b"after", partition=0)
    assert plain.flush(10) == 0
    _, hw = ck_watermarks(broker.bootstrap, topic, READ_UNCOMMITTED)
    _, lso = ck_watermarks(broker.bootstrap, topic, READ_COMMITTED)
    assert (lso, hw) == (1, 5)  # the open transaction starts at offset 1
    assert ck_read(broker.bootstrap, topic, READ_COMMITTED) == {0: [b"before"]}
    producer.commit_transaction(30)
    _, hw = ck_watermarks(broker.bootstrap, topic, READ_UNCOMMITTED)
    _, lso = ck_watermarks(broker.bootstrap, topic, READ_COMMITTED)
    assert lso == hw == 6  # the marker took one offset
    assert ck_read(broker.bootstrap, topic, READ_COMMITTED) == {
        0: [b"before", b"open-0", b"open-1", b"open-2", b"after"]}


def test_zombie_is_fenced_and_its_open_transaction_aborted(broker) -> None:
    from confluent_kafka import KafkaException

    topic = _topic()
    create_topic(broker.bootstrap, topic, 1)
    txn_id = f"tx-{topic}"
    zombie = ck_producer(broker.bootstrap, txn_id)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie", partition=0)
    zombie.flush(10)
    successor = ck_producer(broker.bootstrap, txn_id)  # fences the zombie, aborts its txn
    successor.begin_transaction()
    successor.produce(topic, value=b"successor", partition=0)
    successor.commit_transaction(30)
    with pytest.raises(KafkaException) as failed:
        zombie.produce(topic, value=b"late", partition=0)
        zombie.commit_transaction(10)
    assert failed.value.args[0].fatal() or failed.value.args[0].txn_requires_abort()
    assert ck_read(broker.bootstrap, topic, READ_COMMITTED) == {0: [b"successor"]}


def test_transaction_older_than_its_timeout_is_aborted(tmp_path) -> None:
    from confluent_kafka import KafkaException
    from tests.helpers import serving_broker

    with serving_broker(
            tmp_path / "logs",
            transaction_abort_timed_out_transaction_cleanup_interval_ms="200") as info:
        topic = _topic()
        create_topic(info.bootstrap, topic, 1)
        producer = ck_producer(info.bootstrap, f"tx-{topic}", **{"transaction.timeout.ms": 1000})
        producer.begin_transaction()
        producer.produce(topic, value=b"too-slow", partition=0)
        producer.flush(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the broker aborts it: the LSO moves past it
            _, lso = ck_watermarks(info.bootstrap, topic, READ_COMMITTED)
            if lso == 2:
                break
            time.sleep(0.2)
        assert lso == 2
        with pytest.raises(KafkaException):
            producer.commit_transaction(10)
        assert ck_read(info.bootstrap, topic, READ_COMMITTED) == {0: []}


def test_timeout_above_the_maximum_is_refused(broker) -> None:
    from confluent_kafka import KafkaException, Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "too-long",
                         "transaction.timeout.ms": 2147483647})
    with pytest.raises(KafkaException) as failed:
        producer.init_transactions(20)
    assert "INVALID_TRANSACTION_TIMEOUT" in str(failed.value) or \
        failed.value.args[0].name() == "INVALID_TRANSACTION_TIMEOUT"


def test_send_offsets_to_transaction_commits_with_the_transaction(broker) -> None:
    from confluent_kafka import Consumer, TopicPartition

    source, sink = _topic("src"), _topic("sink")
    create_topic(broker.bootstrap, source, 1)
    create_topic(broker.bootstrap, sink, 1)
    from confluent_kafka import Producer
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        plain.produce(source, value=b"in-%d" % i, partition=0)
    assert plain.flush(10) == 0
    group = f"g-{source}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": READ_COMMITTED})
    consumer.assign([TopicPartition(source, 0, 0)])
    producer = ck_producer(broker.bootstrap, f"tx-{source}")
    for commit, count in ((True, 4), (False, 3), (True, 3)):
        producer.begin_transaction()
        taken = []
        while len(taken) < count:
            msg = consumer.poll(5)
            assert msg is not None and not msg.error()
            taken.append(msg)
            producer.produce(sink, value=msg.value().replace(b"in", b"out"), partition=0)
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, taken[-1].offset() + 1)],
            consumer.consumer_group_metadata(), 30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
            consumer.seek(TopicPartition(source, 0, taken[0].offset()))
    committed = consumer.committed([TopicPartition(source, 0)], timeout=10)[0].offset
    consumer.close()
    # 4 committed, 3 aborted (re-read), then those 3 committed again: 7 in, 7 out.
    assert committed == 7
    assert ck_read(broker.bootstrap, sink, READ_COMMITTED) == {
        0: [b"out-%d" % i for i in range(7)]}


# -- kafka-python --------------------------------------------------------------------------------

def test_kafka_python_transactions(broker) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = _topic()
    create_topic(broker.bootstrap, topic, 1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap,
                             transactional_id=f"kp-{topic}", enable_idempotence=True)
    producer.init_transactions()
    for round_, commit in enumerate([True, False, True]):
        producer.begin_transaction()
        for i in range(3):
            producer.send(topic, value=f"{round_}-{i}".encode(), partition=0)
        producer.flush()  # else an abort drops the unsent batches in the client
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    producer.close()

    def read(isolation: str) -> list[bytes]:
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level=isolation,
                                 enable_auto_commit=False, consumer_timeout_ms=3000)
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        values = [m.value for m in consumer]
        consumer.close()
        return values

    committed = [f"{r}-{i}".encode() for r in (0, 2) for i in range(3)]
    assert read(READ_COMMITTED) == committed
    assert read(READ_UNCOMMITTED) == [f"{r}-{i}".encode() for r in range(3) for i in range(3)]


# -- aiokafka ------------------------------------------------------------------------------------

def test_aiokafka_transactions(broker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = _topic()
    create_topic(broker.bootstrap, topic, 1)

    async def main() -> tuple[list[bytes], list[bytes]]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap,
                                    transactional_id=f"ak-{topic}")
        await producer.start()
        try:
            for round_, commit in enumerate([True, False, True]):
                await producer.begin_transaction()
                for i in range(3):
                    await producer.send_and_wait(topic, f"{round_}-{i}".encode(), partition=0)
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()

        async def read(isolation: str) -> list[bytes]:
            consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap,
                                        isolation_level=isolation, enable_auto_commit=False)
            await consumer.start()
            try:
                tp = TopicPartition(topic, 0)
                consumer.assign([tp])
                await consumer.seek_to_beginning(tp)
                values: list[bytes] = []
                end = (await consumer.end_offsets([tp]))[tp]
                deadline = time.monotonic() + 15
                while await consumer.position(tp) < end and time.monotonic() < deadline:
                    batch = await consumer.getmany(tp, timeout_ms=1000)
                    values += [m.value for m in batch.get(tp, [])]
                return values
            finally:
                await consumer.stop()
        return await read(READ_COMMITTED), await read(READ_UNCOMMITTED)

    committed, everything = asyncio.run(main())
    assert committed == [f"{r}-{i}".encode() for r in (0, 2) for i in range(3)]
    assert everything == [f"{r}-{i}".encode() for r in range(3) for i in range(3)]


# -- bad input -----------------------------------------------------------------------------------


def _raw_produce(bootstrap: str, topic: str, txn_id: str, batch: bytes, version: int) -> int:
    return _raw_produce_to(bootstrap, topic, 0, txn_id, batch, version)


def _raw_produce_to(bootstrap: str, topic: str, partition: int, txn_id: str, batch: bytes,
                    version: int) -> int:
    from protocol.api_keys import ApiKey
    from tests.integration.raw import send_request

    body = {"transactional_id": txn_id, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}
    response = send_request(bootstrap, ApiKey.PRODUCE, version, body)
    return response.responses[0].partition_responses[0].error_code


def _raw(bootstrap: str, api: str, version: int, body: dict):  # type: ignore[no-untyped-def]
    from protocol.api_keys import ApiKey
    from tests.integration.raw import send_request

    return send_request(bootstrap, getattr(ApiKey, api), version, body)


def test_bad_transactional_requests_get_kafka_errors_and_store_nothing(broker) -> None:
    from protocol.errors import ErrorCode

    topic = _topic("bad")
    create_topic(broker.bootstrap, topic, 1)
    bootstrap = broker.bootstrap
    # As a client routes them: the partition's records to its leader, the transaction's
    # requests to its coordinator (on a node, each may be any of its brokers).
    from tests.integration.raw import coordinator_address, leader_address
    leader = leader_address(bootstrap, topic, 0)
    coordinator = coordinator_address(bootstrap, "bad-txn", 1)
    # The leader verifies a transactional batch with its id's coordinator: once that one has
    # loaded (before, the leader answers NOT_ENOUGH_REPLICAS, which a client retries).
    coordinator_address(bootstrap, "ghost", 1)
    # Transactional records without a transactional id: the whole request fails (Kafka).
    from protocol.api_keys import ApiKey
    from tests.integration.raw import send_request
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": 0, "records": _raw_txn_batch(123456, 0)}]}]}
    response = send_request(leader, ApiKey.PRODUCE, 9, body)
    assert response.responses[0].partition_responses[0].error_code == \
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # A transactional batch from a producer no coordinator knows (as Kafka 4.1.1 answers it:
    # test_a_refused_batch_gets_the_coordinators_answer_wherever_the_leader_is).
    assert _raw_produce(leader, topic, "ghost", _raw_txn_batch(123456, 0), 9) == \
        ErrorCode.INVALID_PRODUCER_ID_MAPPING
    find = _raw(bootstrap, "FIND_COORDINATOR", 3, {"key": "bad-txn", "key_type": 1})
    assert find.error_code == 0 and f"{find.host}:{find.port}" == coordinator
    init = _raw(coordinator, "INIT_PRODUCER_ID", 4, {
        "transactional_id": "bad-txn", "transaction_timeout_ms": 60000,
        "producer_id": -1, "producer_epoch": -1})
    assert init.error_code == 0
    pid, epoch = init.producer_id, init.producer_epoch
    # A client's batch without a sequence number (only the broker's own go without one).
    assert _raw_produce(leader, topic, "bad-txn", _raw_txn_batch(pid, epoch, sequence=-1),
                        9) in (ErrorCode.INVALID_RECORD, ErrorCode.INVALID_TXN_STATE)
    # Its partition was never added to the transaction.
    assert _raw_produce(leader, topic, "bad-txn", _raw_txn_batch(pid, epoch), 9) == \
        ErrorCode.INVALID_TXN_STATE
    # A partition of a topic that does not exist fails the request; the others are skipped.
    add = _raw(coordinator, "ADD_PARTITIONS_TO_TXN", 3, {
        "v3_and_below_transactional_id": "bad-txn", "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": [
            {"name": "no-such-topic", "partitions": [0]}, {"name": topic, "partitions": [0]}]})
    codes = {t.name: t.results_by_partition[0].partition_error_code
             for t in add.results_by_topic_v3_and_below}
    assert codes == {"no-such-topic": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                     topic: ErrorCode.OPERATION_NOT_ATTEMPTED}
    # Ending a transaction that is not ongoing.
    end = _raw(coordinator, "END_TXN", 3, {"transactional_id": "bad-txn", "producer_id": pid,
                                         "producer_epoch": epoch, "committed": True})
    assert end.error_code == ErrorCode.INVALID_TXN_STATE
    # A wrong epoch: PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for clients before v2.
    for version, expected in ((1, ErrorCode.INVALID_PRODUCER_EPOCH),
                              (3, ErrorCode.PRODUCER_FENCED)):
        end = _raw(coordinator, "END_TXN", version, {
            "transactional_id": "bad-txn", "producer_id": pid, "producer_epoch": epoch + 5,
            "committed": False})
        assert end.error_code == expected
    # A wrong producer id.
    end = _raw(coordinator, "END_TXN", 3, {"transactional_id": "bad-txn", "producer_id": pid + 1,
                                         "producer_epoch": epoch, "committed": True})
    assert end.error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    # A timeout above transaction.max.timeout.ms.
    init = _raw(coordinator_address(bootstrap, "bad-timeout", 1), "INIT_PRODUCER_ID", 4, {
        "transactional_id": "bad-timeout", "transaction_timeout_ms": 900001,
        "producer_id": -1, "producer_epoch": -1})
    assert init.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    # A fenced epoch after the transaction was added: the coordinator bumped the epoch.
    add = _raw(coordinator, "ADD_PARTITIONS_TO_TXN", 3, {
        "v3_and_below_transactional_id": "bad-txn", "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
    assert add.results_by_topic_v3_and_below[0].results_by_partition[0] \
        .partition_error_code == 0
    for _ in range(50):  # fences the open transaction: aborted, then the epoch bumped again
        again = _raw(coordinator, "INIT_PRODUCER_ID", 4, {
            "transactional_id": "bad-txn", "transaction_timeout_ms": 60000,
            "producer_id": -1, "producer_epoch": -1})
        if again.error_code != ErrorCode.CONCURRENT_TRANSACTIONS:
            break
        time.sleep(0.05)
    assert again.error_code == 0 and again.producer_epoch == epoch + 2
    assert _raw_produce(leader, topic, "bad-txn", _raw_txn_batch(pid, epoch), 9) in (
        ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.INVALID_TXN_STATE,
        ErrorCode.PRODUCER_FENCED)
    # Nothing was stored but the abort marker of the fenced transaction, and the broker
    # serves on.
    assert ck_watermarks(bootstrap, topic, READ_UNCOMMITTED)[1] == 1
    assert ck_read(bootstrap, topic, READ_COMMITTED) == {0: []}


def _settled_coordinator(addresses: list[str], txn_id: str, timeout: float = 30) -> str:
    """host:port of the id's coordinator once every broker names it and it serves the id.
    Before, a leader may not know the coordinator yet (its Produce answers NOT_ENOUGH_REPLICAS,
    which a client retries), and the one named may not have loaded the id or learnt of its
    leadership (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR: a client finds it again)."""
    from tests.integration.raw import find_coordinator
    from protocol.errors import ErrorCode

    deadline = time.monotonic() + timeout
    while True:
        named = {find_coordinator(address, txn_id, 1) for address in addresses}
        if len(named) == 1 and None not in named:
            ((_, coordinator),) = named
            code = _raw(coordinator, "DESCRIBE_TRANSACTIONS", 0, {
                "transactional_ids": [txn_id]}).transaction_states[0].error_code
            if code not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR):
                return coordinator
        assert time.monotonic() < deadline, f"{txn_id}'s coordinator: {named}"
        time.sleep(0.1)


@pytest.mark.parametrize("cores", ["1", "2"])
def test_a_refused_batch_gets_the_coordinators_answer_wherever_the_leader_is(
        tmp_path, cores: str) -> None:
    """The leader of a partition asks the transactional id's coordinator whether a
    transactional batch may go there (KIP-890 verification) and answers with what the
    coordinator said. Apache Kafka 4.1.1, run with two nodes, each leading two of four
    partitions and one coordinating both ids: the same answer from a leader that is the
    coordinator (its AddPartitionsToTxnManager asks itself over the wire) and from one that
    is not, to Produce v9 and v11: an id it does not know, a producer id not the id's, or the
    id's producer id under an id it does not know: INVALID_PRODUCER_ID_MAPPING; a later epoch:
    INVALID_PRODUCER_EPOCH (the coordinator's PRODUCER_FENCED, translated); a partition not
    in the transaction: INVALID_TXN_STATE to v9, TRANSACTION_ABORTABLE to v11. On a node of
    two (num.cores=2) a pybroker leader that is not the id's coordinator asks it over the
    wire too; the one that is, and a single broker, ask in process."""
    from protocol.errors import ErrorCode as E
    from tests.helpers import serving_broker
    from tests.integration.raw import leader_id

    with serving_broker(tmp_path / "logs", num_cores=cores) as broker:
        bootstrap = broker.bootstrap
        topic = _topic("refused")
        create_topic(bootstrap, topic, 4)
        addresses = {node: f"{broker.host}:{port}" for node, port in broker.brokers}
        leaders = {p: leader_id(bootstrap, topic, p) for p in range(4)}
        # On a node, each broker leads some partitions: both placements are asked below.
        assert set(leaders.values()) == set(addresses)
        known = _settled_coordinator(list(addresses.values()), "known")
        _settled_coordinator(list(addresses.values()), "ghost")
        init = _raw(known, "INIT_PRODUCER_ID", 4, {
            "transactional_id": "known", "transaction_timeout_ms": 60000, "producer_id": -1,
            "producer_epoch": -1})
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch
        for version, not_added in ((9, E.INVALID_TXN_STATE), (11, E.TRANSACTION_ABORTABLE)):
            expected = {"unknown id": E.INVALID_PRODUCER_ID_MAPPING,
                        "another producer id": E.INVALID_PRODUCER_ID_MAPPING,
                        "its producer id, unknown id": E.INVALID_PRODUCER_ID_MAPPING,
                        "a later epoch": E.INVALID_PRODUCER_EPOCH,
                        "not added": not_added}
            for partition, leader in leaders.items():
                def produce(txn_id: str, producer_id: int, producer_epoch: int) -> int:
                    return _raw_produce_to(addresses[leader], topic, partition, txn_id,
                                           _raw_txn_batch(producer_id, producer_epoch),
                                           version)
                answers = {"unknown id": produce("ghost", 123456, 0),
                           "another producer id": produce("known", pid + 77, 0),
                           "its producer id, unknown id": produce("ghost", pid, epoch),
                           "a later epoch": produce("known", pid, epoch + 3),
                           "not added": produce("known", pid, epoch)}
                assert answers == expected, (version, partition, leader)
        for partition, leader in leaders.items():  # nothing was stored
            end = _raw(addresses[leader], "LIST_OFFSETS", 4, {
                "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
                    {"partition_index": partition, "current_leader_epoch": -1,
                     "timestamp": -1}]}]}).topics[0].partitions[0]
            assert (end.error_code, end.offset) == (0, 0)


@pytest.mark.parametrize("cores", ["1", "2"])
def test_a_transactional_batch_before_any_transaction_state_is_retriable(
        tmp_path, cores: str) -> None:
    """Before `__transaction_state` exists no coordinator can say whether the partition is in
    the transaction: the leader answers as Kafka 4.1.1 does to Produce v9 and v11,
    NOT_ENOUGH_REPLICAS (its verification's COORDINATOR_NOT_AVAILABLE, translated so that
    every client retries), naming that error, and the topic is still not created (the
    producer's FindCoordinator creates it)."""
    from protocol.api_keys import ApiKey
    from protocol.errors import ErrorCode as E
    from tests.helpers import serving_broker
    from tests.integration.raw import known_topics, leader_address, send_request

    with serving_broker(tmp_path / "logs", num_cores=cores) as broker:
        bootstrap = broker.bootstrap
        topic = _topic("stateless")
        create_topic(bootstrap, topic, 2)
        init = _raw(bootstrap, "INIT_PRODUCER_ID", 4, {
            "transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1,
            "producer_epoch": -1})
        assert init.error_code == 0
        for version in (9, 11):
            for partition in (0, 1):
                body = {"transactional_id": "no-state-yet", "acks": -1, "timeout_ms": 5000,
                        "topic_data": [{"name": topic, "partition_data": [{
                            "index": partition, "records": _raw_txn_batch(
                                init.producer_id, init.producer_epoch)}]}]}
                answer = send_request(leader_address(bootstrap, topic, partition),
                                      ApiKey.PRODUCE, version, body)
                got = answer.responses[0].partition_responses[0]
                assert (got.error_code, got.error_message) == (
                    E.NOT_ENOUGH_REPLICAS, "Unable to verify the partition has been added to "
                    "the transaction. Underlying error: COORDINATOR_NOT_AVAILABLE"), \
                    (version, partition)
        assert "__transaction_state" not in known_topics(bootstrap)


def test_transaction_state_topic_and_expiry_follow_the_broker_keys(tmp_path) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource

    from protocol.errors import ErrorCode
    from tests.helpers import serving_broker

    with serving_broker(tmp_path / "logs", transaction_state_log_num_partitions="3",
                          transaction_state_log_segment_bytes="1048576",
                          transactional_id_expiration_ms="1000",
                          transaction_abort_timed_out_transaction_cleanup_interval_ms="200"
                          ) as info:
        topic = _topic()
        create_topic(info.bootstrap, topic, 1)
        producer = ck_producer(info.bootstrap, "expiring")
        producer.begin_transaction()
        producer.produce(topic, value=b"v", partition=0)
        producer.commit_transaction(30)
        admin = AdminClient({"bootstrap.servers": info.bootstrap})
        meta = admin.list_topics(timeout=10).topics["__transaction_state"]
        assert len(meta.partitions) == 3
        resource = ConfigResource("topic", "__transaction_state")
        configs = admin.describe_configs([resource])[resource].result(10)
        assert configs["segment.bytes"].value == "1048576"
        assert configs["cleanup.policy"].value == "compact"
        from tests.integration.raw import coordinator_address
        coordinator = coordinator_address(info.bootstrap, "expiring", 1)  # a node's: any broker
        described = _raw(coordinator, "DESCRIBE_TRANSACTIONS", 0,
                         {"transactional_ids": ["expiring"]}).transaction_states[0]
        assert described.error_code == 0 and described.transaction_state == "CompleteCommit"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # unused for transactional.id.expiration.ms: gone
            described = _raw(coordinator, "DESCRIBE_TRANSACTIONS", 0,
                             {"transactional_ids": ["expiring"]}).transaction_states[0]
            if described.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                break
            time.sleep(0.2)
        assert described.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


def test_read_committed_long_poll_wakes_when_the_transaction_commits(broker) -> None:
    """A read_committed fetch waiting at the last stable offset is answered when the commit
    moves it, not at the end of its max_wait_ms."""
    import threading

    topic = _topic()
    create_topic(broker.bootstrap, topic, 1)
    producer = ck_producer(broker.bootstrap, f"tx-{topic}")
    producer.begin_transaction()
    producer.produce(topic, value=b"pending", partition=0)
    producer.flush(10)
    got: dict[str, object] = {}
    from tests.integration.raw import leader_address
    leader = leader_address(broker.bootstrap, topic, 0)  # a node's worker leads it

    def long_poll() -> None:
        started = time.monotonic()
        response = _raw(leader, "FETCH", 11, {
            "replica_id": -1, "max_wait_ms": 10000, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 1, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        got["after"] = time.monotonic() - started
        got["partition"] = response.responses[0].partitions[0]

    thread = threading.Thread(target=long_poll)
    thread.start()
    time.sleep(0.5)
    assert thread.is_alive()  # nothing stable to read yet: it waits
    producer.commit_transaction(30)
    thread.join(15)
    part = got["partition"]
    assert got["after"] < 5  # type: ignore[operator]
    assert part.last_stable_offset == part.high_watermark == 2  # type: ignore[attr-defined]
    assert part.records and part.aborted_transactions == []  # type: ignore[attr-defined]
