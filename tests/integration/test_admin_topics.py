"""Topic administration through confluent-kafka's AdminClient, kafka-python's KafkaAdminClient
and raw requests: CreateTopics (configs, validate_only, bad replication factor, existing and
invalid names, a topic's logs made off the event loop), DeleteTopics (files removed, a topic
deleted while being created, delete.topic.enable=false) and CreatePartitions.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import trio
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from compat.wire import create_topic as create_topic_request
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.replica.deltas import SYNCFS_MIN_NEW_LOGS
from tests.helpers import serving_broker
from tests.integration.admin_helpers import (
    TIMEOUT, ck_code, high_watermark, partition_dirs, topic_name,
)
from tests.integration.clients import CONFLUENT, KAFKA_PYTHON, Rec
from tests.integration.raw import RawConnection, create_topic, known_topics, send_request


INVALID_NAMES = ["bad/name", "..", "a" * 250, "a b", ".", "", "ümlaut"]


# -- CreateTopics ------------------------------------------------------------------------------

def test_create_topics_confluent(broker, ck: AdminClient) -> None:
    name = topic_name("ct")
    fs = ck.create_topics([NewTopic(name, 3, 1, config={"retention.ms": "123456",
                                                        "cleanup.policy": "compact"})])
    assert ck_code(fs[name]) == 0
    md = ck.list_topics(name, timeout=TIMEOUT).topics[name]
    assert md.error is None
    assert sorted(md.partitions) == [0, 1, 2]
    ids = [broker_id for broker_id, _ in broker.brokers]  # a node's: any of its brokers leads
    for p in md.partitions.values():
        assert p.leader in ids and p.replicas == [p.leader] and p.isrs == [p.leader]
    assert len([d for d in partition_dirs(broker, name)]) == 3

    # validate_only: accepted, nothing created
    other = topic_name("ct-validate")
    fs = ck.create_topics([NewTopic(other, 2, 1)], validate_only=True)
    assert ck_code(fs[other]) == 0
    assert other not in ck.list_topics(timeout=TIMEOUT).topics
    assert not partition_dirs(broker, other)

    cases = {
        NewTopic(topic_name("rf3"), 1, 3): KafkaError.INVALID_REPLICATION_FACTOR,
        NewTopic(name, 1, 1): KafkaError.TOPIC_ALREADY_EXISTS,
        NewTopic(topic_name("badcfg"), 1, 1, config={"retention.ms": "soon"}):
            KafkaError.INVALID_CONFIG,
        NewTopic(topic_name("unknowncfg"), 1, 1, config={"no.such.config": "1"}):
            KafkaError.INVALID_CONFIG,
    }
    for new_topic, code in cases.items():
        fs = ck.create_topics([new_topic])
        assert ck_code(fs[new_topic.topic]) == code, new_topic.topic
    # validate_only reports the same errors
    fs = ck.create_topics([NewTopic(name, 1, 1)], validate_only=True)
    assert ck_code(fs[name]) == KafkaError.TOPIC_ALREADY_EXISTS


@pytest.mark.parametrize("bad", INVALID_NAMES[:4])
def test_create_topic_invalid_name_confluent(broker, ck: AdminClient, bad: str) -> None:
    fs = ck.create_topics([NewTopic(bad, 1, 1)])
    assert ck_code(fs[bad]) == KafkaError.TOPIC_EXCEPTION
    assert bad not in ck.list_topics(timeout=TIMEOUT).topics


def test_create_topics_kafka_python(broker, kp) -> None:
    name = topic_name("ctkp")
    result = kp.create_topics({name: {"num_partitions": 2, "replication_factor": 1,
                                      "configs": {"segment.bytes": "1048576"}}})
    assert [t["error_code"] for t in result["topics"]] == [0]
    assert len(kp.describe_topics([name])[0]["partitions"]) == 2
    # default partitions and replication factor (-1)
    dflt = topic_name("ctkp-default")
    result = kp.create_topics([dflt])
    assert result["topics"][0]["error_code"] == 0
    assert len(kp.describe_topics([dflt])[0]["partitions"]) == 1  # num.partitions=1

    validate = topic_name("ctkp-validate")
    result = kp.create_topics({validate: {"num_partitions": 1}}, validate_only=True)
    assert result["topics"][0]["error_code"] == 0
    assert validate not in kp.list_topics()

    def code_for(spec: dict) -> int:
        result = kp.create_topics(spec, raise_errors=False)
        return result["topics"][0]["error_code"]

    assert code_for({topic_name("rf3"): {"num_partitions": 1, "replication_factor": 3}}) \
        == ErrorCode.INVALID_REPLICATION_FACTOR
    assert code_for({name: {"num_partitions": 1}}) == ErrorCode.TOPIC_ALREADY_EXISTS
    assert code_for({topic_name("zero"): {"num_partitions": 0}}) == ErrorCode.INVALID_PARTITIONS
    for bad in INVALID_NAMES:
        assert code_for({bad: {"num_partitions": 1}}) == ErrorCode.INVALID_TOPIC_EXCEPTION, bad
    assert not any(t in kp.list_topics() for t in INVALID_NAMES)
    # '.' and '_' collide, as in Kafka
    dotted = topic_name("dots.and_unders")
    assert code_for({dotted: {"num_partitions": 1}}) == 0
    colliding = dotted.replace(".", "_")
    assert code_for({colliding: {"num_partitions": 1}}) == ErrorCode.INVALID_TOPIC_EXCEPTION


WIDE = SYNCFS_MIN_NEW_LOGS  # partitions: enough for the many-logs path (one syncfs a dir)


class HeldLogCreation:
    """Holds the making of topic `name`'s logs (in the replica manager's worker thread) until
    `release()`, so that a test acts while a CreateTopics is provably under way.

    These tests used to make 2,000 partitions and race their ~1.3 s of file system calls:
    under a parallel run the creation took more than 10 s, past the client's socket timeout
    (14 of 15 runs of the deletion test failed so). Held, the window is as long as the test
    needs, on any machine."""

    def __init__(self, broker, name: str) -> None:  # type: ignore[no-untyped-def]
        self.started = threading.Event()
        self._release = threading.Event()
        replicas = broker.broker.replicas
        original = replicas._create_logs

        def held(info, partitions, **kwargs):  # type: ignore[no-untyped-def]
            if info.name == name:
                self.started.set()
                self._release.wait(60)
            return original(info, partitions, **kwargs)
        replicas._create_logs = held

    def release(self) -> None:
        self._release.set()


def _create_in_background(bootstrap: str, name: str) -> threading.Thread:
    """The CreateTopics request alone, in a thread: not raw.create_topic, which then waits
    for each partition's leader to serve it, and so for a topic deleted meanwhile ran on
    past the test (and its broker) until its own deadline."""
    creator = threading.Thread(target=create_topic_request, args=(bootstrap, name, WIDE),
                               daemon=True)
    creator.start()
    return creator


def _waiting_for_topic_changes(broker) -> int:  # type: ignore[no-untyped-def]
    """Requests queued behind the broker's topic-change lock (read on its own loop)."""
    lock = broker.broker.topics.changes
    return trio.from_thread.run_sync(lambda: lock.statistics().tasks_waiting,
                                     trio_token=broker.token)


@pytest.mark.in_process(
    "holds the replica manager's log creation, patched in this process, while a CreateTopics is "
    "under way")
def test_a_wide_topic_is_created_while_other_clients_are_served(broker) -> None:
    """A topic's logs are made in a worker thread: the broker answers other connections
    while a topic's logs are being made (held there, so this cannot pass by being quick),
    and CreateTopics answers once every partition takes records."""
    name = topic_name("wide")
    held = HeldLogCreation(broker, name)
    with RawConnection(broker.bootstrap) as conn:
        creator = _create_in_background(broker.bootstrap, name)
        try:
            assert held.started.wait(TIMEOUT), f"{name}'s logs were never made"
            # Logs made on the event loop would answer none of these (the hold blocks it).
            for _ in range(20):
                assert conn.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
            assert creator.is_alive()  # CreateTopics has not answered: its logs are held
        finally:
            held.release()
        creator.join(TIMEOUT)
        assert not creator.is_alive(), "CreateTopics did not answer"
    assert len(partition_dirs(broker, name)) == WIDE
    ends = [0, WIDE - 1]
    CONFLUENT.produce(broker.bootstrap, name, [Rec(b"k", b"v", partition=p) for p in ends])
    got = KAFKA_PYTHON.consume(broker.bootstrap, name, ends, 2)
    assert sorted(g.partition for g in got) == ends


@pytest.mark.in_process(
    "holds the replica manager's log creation, patched in this process, and counts its topic "
    "lock's waiters")
def test_a_topic_deleted_while_being_created_leaves_no_log(broker) -> None:
    """DeleteTopics waits for a creation in progress instead of racing its worker thread,
    which would leave logs behind that no topic owns."""
    name = topic_name("wide-doomed")
    held = HeldLogCreation(broker, name)
    creator = _create_in_background(broker.bootstrap, name)
    answer: dict = {}

    def delete() -> None:
        answer["response"] = send_request(broker.bootstrap, ApiKey.DELETE_TOPICS, 4,
                                          {"topic_names": [name], "timeout_ms": 10000})
    deleter = threading.Thread(target=delete, daemon=True)
    try:
        assert held.started.wait(TIMEOUT), f"{name}'s logs were never made"
        deleter.start()
        deadline = time.monotonic() + TIMEOUT
        while not _waiting_for_topic_changes(broker):  # DeleteTopics queued behind it
            assert deleter.is_alive() and time.monotonic() < deadline, answer
            time.sleep(0.01)
        assert not answer  # it waits for the creation
    finally:
        held.release()
    creator.join(TIMEOUT)
    deleter.join(TIMEOUT)
    assert answer["response"].responses[0].error_code == 0
    assert name not in broker.broker.metadata.image.topics
    assert not partition_dirs(broker, name)
    assert not [tp for tp in broker.broker.logs._logs if tp[0] == name]


# -- DeleteTopics ------------------------------------------------------------------------------

def _wait_gone(broker, topic: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 5
    while partition_dirs(broker, topic):
        assert time.monotonic() < deadline, partition_dirs(broker, topic)
        time.sleep(0.05)


def test_delete_topics(broker, ck: AdminClient, kp) -> None:
    a, b = topic_name("del-ck"), topic_name("del-kp")
    for name in (a, b):
        create_topic(broker.bootstrap, name, 2)
        CONFLUENT.produce(broker.bootstrap, name,
                          [Rec(b"k", b"v" * 100, partition=p) for p in (0, 1)])
        assert len(partition_dirs(broker, name)) == 2
    assert ck_code(ck.delete_topics([a])[a]) == 0
    _wait_gone(broker, a)
    assert a not in ck.list_topics(timeout=TIMEOUT).topics

    kp.delete_topics([b])  # raises on an error code
    _wait_gone(broker, b)
    assert b not in kp.list_topics()

    missing = topic_name("del-missing")
    assert ck_code(ck.delete_topics([missing])[missing]) == KafkaError.UNKNOWN_TOPIC_OR_PART

    # a topic re-created under the same name starts empty
    create_topic(broker.bootstrap, a, 1)
    assert high_watermark(broker, a) == 0
    CONFLUENT.produce(broker.bootstrap, a, [Rec(b"new", b"life", partition=0)])
    got = KAFKA_PYTHON.consume(broker.bootstrap, a, [0], 1)
    assert [(g.offset, g.value) for g in got] == [(0, b"life")]


def test_delete_topic_enable_false(tmp_path: Path) -> None:
    """delete.topic.enable=false: DeleteTopics fails with TOPIC_DELETION_DISABLED (from v3;
    INVALID_REQUEST before, as in Kafka) and the topic keeps its data."""
    with serving_broker(tmp_path / "logs", delete_topic_enable="false") as info:
        name = topic_name("kept")
        create_topic(info.bootstrap, name, 1)
        CONFLUENT.produce(info.bootstrap, name, [Rec(b"k", b"still here", partition=0)])
        ck = AdminClient({"bootstrap.servers": info.bootstrap})
        assert ck_code(ck.delete_topics([name])[name]) == KafkaError.TOPIC_DELETION_DISABLED
        for version, code in ((1, ErrorCode.INVALID_REQUEST),
                              (3, ErrorCode.TOPIC_DELETION_DISABLED)):
            resp = send_request(info.bootstrap, ApiKey.DELETE_TOPICS, version,
                                {"topic_names": [name], "timeout_ms": 10000})
            assert resp.responses[0].error_code == code
        assert name in known_topics(info.bootstrap)
        assert [g.value for g in KAFKA_PYTHON.consume(info.bootstrap, name, [0], 1)] == \
            [b"still here"]


def test_deleted_topic_files_are_removed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """DeleteTopics removes the partitions' directories (in a worker thread) before it
    answers, leaving no `*-delete` directory behind; the brokers of a node (a cluster) once
    the deletion reaches them."""
    from protocol.api_keys import ApiKey
    from tests.helpers import serving_broker
    from tests.integration.raw import create_topic, send_request

    logs = tmp_path / "logs"
    with serving_broker(logs) as info:
        create_topic(info.bootstrap, "doomed", 3)
        assert len(partition_dirs(info, "doomed")) == 3  # on a node, in its workers' dirs
        resp = send_request(info.bootstrap, ApiKey.DELETE_TOPICS, 4,
                            {"topic_names": ["doomed"], "timeout_ms": 10000})
        assert resp.responses[0].error_code == 0
        if len(info.brokers) == 1:
            assert not [p for p in logs.iterdir() if p.name.startswith("doomed")]
        else:  # a node's brokers, as a cluster's, remove theirs once they see the deletion
            _wait_gone(info, "doomed")


# -- CreatePartitions --------------------------------------------------------------------------

def test_create_partitions(broker, ck: AdminClient, kp) -> None:
    name = topic_name("cp")
    create_topic(broker.bootstrap, name, 1)
    fs = ck.create_partitions([NewPartitions(name, 3)], validate_only=True)
    assert ck_code(fs[name]) == 0
    assert len(ck.list_topics(name, timeout=TIMEOUT).topics[name].partitions) == 1

    assert ck_code(ck.create_partitions([NewPartitions(name, 3)])[name]) == 0
    assert len(ck.list_topics(name, timeout=TIMEOUT).topics[name].partitions) == 3
    assert len(partition_dirs(broker, name)) == 3
    assert ck_code(ck.create_partitions([NewPartitions(name, 2)])[name]) == \
        KafkaError.INVALID_PARTITIONS
    assert ck_code(ck.create_partitions([NewPartitions(name, 3)])[name]) == \
        KafkaError.INVALID_PARTITIONS
    missing = topic_name("cp-missing")
    assert ck_code(ck.create_partitions([NewPartitions(missing, 3)])[missing]) == \
        KafkaError.UNKNOWN_TOPIC_OR_PART

    kp.create_partitions({name: 5})
    assert len(kp.describe_topics([name])[0]["partitions"]) == 5
    # the new partitions take writes
    CONFLUENT.produce(broker.bootstrap, name, [Rec(b"k", b"in the new partition", partition=4)])
    got = KAFKA_PYTHON.consume(broker.bootstrap, name, [4], 1)
    assert [g.value for g in got] == [b"in the new partition"]
