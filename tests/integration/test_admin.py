"""Admin APIs through confluent-kafka's AdminClient and kafka-python's KafkaAdminClient, and
the broker's answers to bad or unusual requests sent raw.

Covers CreateTopics (configs, validate_only, bad replication factor, existing and invalid
names), Metadata (list/describe, auto-create on and off), DeleteTopics (files removed),
CreatePartitions, DescribeConfigs (topic and broker, with sources and synonyms), AlterConfigs
and IncrementalAlterConfigs (reflected in DescribeConfigs and in behaviour), DeleteRecords,
DescribeCluster, DescribeLogDirs, ElectLeaders, ListOffsets (every spec, through the consumer
and the admin client), OffsetForLeaderEpoch; Produce errors (unknown partition, corrupt CRC,
zstd before v7, too large); and ApiVersions, which must advertise exactly what is served.
"""
from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewPartitions,
    NewTopic, OffsetSpec,
)

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import APIS
from protocol.records.batch import Compression
from protocol.records.record import build_batch
from protocol.records.record import Record
from pybroker.handlers import REGISTRY
from tests.helpers import broker_in_thread
from tests.integration.clients import CONFLUENT, KAFKA_PYTHON, Rec
from tests.integration.raw import RawConnection, create_topic, send_request

TIMEOUT = 10
INVALID_NAMES = ["bad/name", "..", "a" * 250, "a b", ".", "", "ümlaut"]


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def ck(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.fixture
def kp(broker):
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    yield admin
    admin.close()


def ck_code(future) -> int:  # type: ignore[no-untyped-def]
    """The Kafka error code a confluent admin future failed with (0 when it succeeded)."""
    try:
        future.result(TIMEOUT)
    except KafkaException as exc:
        return exc.args[0].code()
    return 0


def log_dir(broker) -> Path:  # type: ignore[no-untyped-def]
    return broker.broker.log_dirs[0]


def partition_dirs(broker, topic: str) -> list[Path]:  # type: ignore[no-untyped-def]
    return [p for p in log_dir(broker).iterdir() if p.name.startswith(topic + "-")
            or p.name.startswith(topic + ".")]


def raw_produce(bootstrap: str, topic: str, partition: int, records: bytes | None, *,
                version: int = 9, acks: int = -1, conn: RawConnection | None = None):
    body = {"transactional_id": None, "acks": acks, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]}
    if conn is not None:
        resp = conn.request(ApiKey.PRODUCE, version, body)
    else:
        resp = send_request(bootstrap, ApiKey.PRODUCE, version, body)
    return resp.responses[0].partition_responses[0]


def high_watermark(broker, topic: str, partition: int = 0) -> int:  # type: ignore[no-untyped-def]
    return broker.broker.logs.get(topic, partition).high_watermark


# -- CreateTopics ------------------------------------------------------------------------------

def test_create_topics_confluent(broker, ck: AdminClient) -> None:
    name = topic_name("ct")
    fs = ck.create_topics([NewTopic(name, 3, 1, config={"retention.ms": "123456",
                                                        "cleanup.policy": "compact"})])
    assert ck_code(fs[name]) == 0
    md = ck.list_topics(name, timeout=TIMEOUT).topics[name]
    assert md.error is None
    assert sorted(md.partitions) == [0, 1, 2]
    for p in md.partitions.values():
        assert p.leader == 0 and p.replicas == [0] and p.isrs == [0]
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


WIDE = 2000  # partitions: ~1.3 s of file system calls to create here


def _create_in_background(bootstrap: str, name: str) -> threading.Thread:
    creator = threading.Thread(target=create_topic, args=(bootstrap, name, WIDE), daemon=True)
    creator.start()
    return creator


def _wait_registered(broker, name: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + TIMEOUT
    while name not in broker.broker.metadata.image.topics:
        assert time.monotonic() < deadline, f"{name} never registered"
        time.sleep(0.001)


def test_a_wide_topic_is_created_while_other_clients_are_served(broker) -> None:
    """A topic's logs are made in a worker thread: the broker answers other connections
    while a 2,000-partition topic is being created, and CreateTopics answers once every
    partition takes records."""
    name = topic_name("wide")
    with RawConnection(broker.bootstrap) as conn:
        conn.request(ApiKey.API_VERSIONS, 0, {})
        creator = _create_in_background(broker.bootstrap, name)
        _wait_registered(broker, name)
        answered_meanwhile = 0
        while creator.is_alive():
            assert conn.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
            answered_meanwhile += creator.is_alive()
        creator.join()
    # Creating the logs on the event loop answered none (at most one or two in the gap
    # between the CreateTopics answer and its reader noticing).
    assert answered_meanwhile >= 10
    assert len(partition_dirs(broker, name)) == WIDE
    ends = [0, WIDE - 1]
    CONFLUENT.produce(broker.bootstrap, name, [Rec(b"k", b"v", partition=p) for p in ends])
    got = KAFKA_PYTHON.consume(broker.bootstrap, name, ends, 2)
    assert sorted(g.partition for g in got) == ends


def test_a_topic_deleted_while_being_created_leaves_no_log(broker) -> None:
    """DeleteTopics waits for a creation in progress instead of racing its worker thread,
    which would leave logs behind that no topic owns."""
    name = topic_name("wide-doomed")
    creator = _create_in_background(broker.bootstrap, name)
    _wait_registered(broker, name)
    resp = send_request(broker.bootstrap, ApiKey.DELETE_TOPICS, 4,
                        {"topic_names": [name], "timeout_ms": 10000})
    assert resp.responses[0].error_code == 0
    creator.join()
    assert name not in broker.broker.metadata.image.topics
    assert not partition_dirs(broker, name)
    assert not [tp for tp in broker.broker.logs._logs if tp[0] == name]


# -- Metadata ----------------------------------------------------------------------------------

def test_list_and_describe_topics(broker, ck: AdminClient, kp) -> None:
    from confluent_kafka import TopicCollection
    names = [topic_name("lt") for _ in range(3)]
    for i, name in enumerate(names):
        create_topic(broker.bootstrap, name, i + 1)
    listed = ck.list_topics(timeout=TIMEOUT)
    assert set(names) <= set(listed.topics)
    assert listed.cluster_id == broker.broker.metadata.image.cluster_id
    assert list(listed.brokers) == [0]
    assert listed.brokers[0].port == broker.port
    assert set(names) <= set(kp.list_topics())

    described = ck.describe_topics(TopicCollection(names))
    for i, name in enumerate(names):
        desc = described[name].result(TIMEOUT)
        assert desc.name == name and not desc.is_internal
        assert desc.topic_id is not None
        assert [p.id for p in desc.partitions] == list(range(i + 1))
        assert all(p.leader.id == 0 and [r.id for r in p.replicas] == [0]
                   for p in desc.partitions)
    missing = topic_name("missing")
    assert ck_code(ck.describe_topics(TopicCollection([missing]))[missing]) == \
        KafkaError.UNKNOWN_TOPIC_OR_PART

    kp_desc = {t["name"]: t for t in kp.describe_topics(names)}
    assert [len(kp_desc[n]["partitions"]) for n in names] == [1, 2, 3]
    assert all(t["error_code"] == 0 for t in kp_desc.values())


def _metadata(bootstrap: str, topic: str, *, version: int = 12, allow: bool = True):
    body = {"topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
            "allow_auto_topic_creation": allow,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False}
    return send_request(bootstrap, ApiKey.METADATA, version, body)


def test_broker_rack_is_reported(tmp_path: Path) -> None:
    """broker.rack reaches clients through Metadata and DescribeCluster."""
    with broker_in_thread(tmp_path / "logs", broker_rack="zone-a") as info:
        ck = AdminClient({"bootstrap.servers": info.bootstrap})
        cluster = ck.describe_cluster().result(TIMEOUT)
        assert [n.rack for n in cluster.nodes] == ["zone-a"]
        resp = _metadata(info.bootstrap, topic_name("rack"), allow=False)
        assert [b.rack for b in resp.brokers] == ["zone-a"]


def test_metadata_auto_create(broker) -> None:
    created = topic_name("auto")
    resp = _metadata(broker.bootstrap, created, allow=True)
    assert resp.topics[0].error_code == 0
    assert len(resp.topics[0].partitions) == 1
    assert created in broker.broker.metadata.image.topics

    refused = topic_name("noauto")
    resp = _metadata(broker.bootstrap, refused, allow=False)
    assert resp.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert refused not in broker.broker.metadata.image.topics

    # v1-3 have no flag: auto-creation is implied
    old = topic_name("auto-v1")
    body = {"topics": [{"name": old}]}
    resp = send_request(broker.bootstrap, ApiKey.METADATA, 1, body)
    assert resp.topics[0].error_code == 0 and old in broker.broker.metadata.image.topics

    resp = _metadata(broker.bootstrap, "bad/name", allow=True)
    assert resp.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_metadata_auto_create_disabled(tmp_path: Path) -> None:
    with broker_in_thread(tmp_path / "logs", auto_create_topics_enable="false") as info:
        name = topic_name("noauto")
        resp = _metadata(info.bootstrap, name, allow=True)
        assert resp.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert name not in info.broker.metadata.image.topics
        # and a stock producer is told so rather than the topic appearing
        from confluent_kafka import Producer
        errors: list = []
        producer = Producer({"bootstrap.servers": info.bootstrap, "message.timeout.ms": 1500})
        producer.produce(name, b"x", on_delivery=lambda err, msg: errors.append(err))
        producer.flush(5)
        assert errors and errors[0] is not None
        assert errors[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._MSG_TIMED_OUT,
                                    KafkaError._UNKNOWN_TOPIC)
        assert name not in info.broker.metadata.image.topics


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


# -- DescribeConfigs ---------------------------------------------------------------------------

VALID_SOURCES = {ConfigSource.DYNAMIC_TOPIC_CONFIG.value, ConfigSource.STATIC_BROKER_CONFIG.value,
                 ConfigSource.DEFAULT_CONFIG.value, ConfigSource.DYNAMIC_BROKER_CONFIG.value,
                 ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value}
TOPIC_KEYS = {"cleanup.policy", "compression.type", "retention.ms", "retention.bytes",
              "segment.bytes", "segment.ms", "max.message.bytes", "min.insync.replicas",
              "message.timestamp.type", "delete.retention.ms", "min.cleanable.dirty.ratio",
              "unclean.leader.election.enable", "segment.index.bytes", "flush.messages"}


def _ck_describe(ck: AdminClient, rtype, name: str) -> dict:  # type: ignore[no-untyped-def]
    fs = ck.describe_configs([ConfigResource(rtype, name)])
    return next(iter(fs.values())).result(TIMEOUT)


def test_describe_configs_topic(broker, ck: AdminClient, kp) -> None:
    from confluent_kafka.admin import ResourceType
    name = topic_name("dc")
    create_topic(broker.bootstrap, name, 1, {"retention.ms": "3600000", "segment.bytes": "2000000"})
    entries = _ck_describe(ck, ResourceType.TOPIC, name)
    assert TOPIC_KEYS <= set(entries), TOPIC_KEYS - set(entries)
    for key, entry in entries.items():
        assert entry.name == key
        assert entry.source in VALID_SOURCES, (key, entry.source)
        assert entry.is_sensitive or entry.value is not None, key
    retention = entries["retention.ms"]
    assert retention.value == "3600000"
    assert retention.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not retention.is_default
    synonyms = list(retention.synonyms.values())
    assert synonyms[0].name == "retention.ms" and synonyms[0].value == "3600000"
    assert synonyms[0].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    policy = entries["cleanup.policy"]
    assert policy.value == "delete" and policy.is_default
    assert policy.source in (ConfigSource.DEFAULT_CONFIG.value,
                             ConfigSource.STATIC_BROKER_CONFIG.value)
    segment = entries["segment.bytes"]
    assert segment.value == "2000000"
    assert [(s.name, s.value, s.source) for s in segment.synonyms.values()] == [
        ("segment.bytes", "2000000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        ("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG.value)]

    # kafka-python: all entries, with synonyms and the same sources
    result = kp.describe_configs([_kp_resource("TOPIC", name)], include_synonyms=True,
                                 config_filter="all")
    kp_entries = result["topic"][name]
    assert set(kp_entries) == set(entries)
    assert kp_entries["retention.ms"]["value"] == "3600000"
    assert kp_entries["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert kp_entries["retention.ms"]["synonyms"][0]["name"] == "retention.ms"
    modified = kp.describe_configs([_kp_resource("TOPIC", name)])["topic"][name]
    assert set(modified) == {"retention.ms", "segment.bytes"}

    missing = topic_name("dc-missing")
    fs = ck.describe_configs([ConfigResource(ResourceType.TOPIC, missing)])
    assert ck_code(next(iter(fs.values()))) == KafkaError.UNKNOWN_TOPIC_OR_PART


def _kp_resource(rtype: str, name: str, configs=None):  # type: ignore[no-untyped-def]
    from kafka.admin import ConfigResource as KpResource
    return KpResource(rtype, name, configs)


def test_describe_configs_broker(broker, ck: AdminClient, kp) -> None:
    from confluent_kafka.admin import ResourceType
    entries = _ck_describe(ck, ResourceType.BROKER, "0")
    for key in ("num.partitions", "log.retention.hours", "log.segment.bytes", "log.dirs",
                "auto.create.topics.enable", "message.max.bytes", "broker.id"):
        assert key in entries, key
    for key, entry in entries.items():
        assert entry.source in VALID_SOURCES, (key, entry.source)
        assert entry.is_read_only, key  # no dynamic broker configs here
        if entry.source == ConfigSource.STATIC_BROKER_CONFIG.value:
            assert entry.value is not None, key  # unset keys (advertised.listeners) are null
    assert entries["log.dirs"].value == str(log_dir(broker))
    assert entries["log.dirs"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert entries["num.partitions"].value == "1"
    result = kp.describe_configs([_kp_resource("BROKER", "0")], include_synonyms=True,
                                 config_filter="all")
    assert set(result["broker"]["0"]) == set(entries)


# -- AlterConfigs / IncrementalAlterConfigs ----------------------------------------------------

def _overrides(ck: AdminClient, name: str) -> dict[str, str]:
    from confluent_kafka.admin import ResourceType
    entries = _ck_describe(ck, ResourceType.TOPIC, name)
    return {k: e.value for k, e in entries.items()
            if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def _incremental(ck: AdminClient, name: str, *ops: tuple[str, str | None, object]) -> int:
    from confluent_kafka.admin import ResourceType
    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=op) for key, value, op in ops])
    return ck_code(next(iter(ck.incremental_alter_configs([resource]).values())))


def test_incremental_alter_configs(broker, ck: AdminClient) -> None:
    name = topic_name("iac")
    create_topic(broker.bootstrap, name, 1, {"segment.bytes": "2000000"})
    SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE
    APPEND, SUBTRACT = AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT
    assert _incremental(ck, name, ("retention.ms", "5000", SET)) == 0
    assert _overrides(ck, name) == {"segment.bytes": "2000000", "retention.ms": "5000"}
    assert _incremental(ck, name, ("segment.bytes", None, DELETE)) == 0
    assert _overrides(ck, name) == {"retention.ms": "5000"}
    assert _incremental(ck, name, ("cleanup.policy", "compact", APPEND)) == 0
    assert _overrides(ck, name)["cleanup.policy"] == "delete,compact"
    assert _incremental(ck, name, ("cleanup.policy", "delete", SUBTRACT)) == 0
    assert _overrides(ck, name)["cleanup.policy"] == "compact"
    # errors leave everything unchanged
    assert _incremental(ck, name, ("retention.ms", "10", APPEND)) != 0
    assert _incremental(ck, name, ("retention.ms", "never", SET)) == KafkaError.INVALID_CONFIG
    assert _incremental(ck, name, ("no.such.config", "1", SET)) == KafkaError.INVALID_CONFIG
    assert _overrides(ck, name) == {"retention.ms": "5000", "cleanup.policy": "compact"}
    # compacted now: a keyless record is refused
    errors: list = []
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 5000})
    producer.produce(name, value=b"no key", on_delivery=lambda e, m: errors.append(e))
    producer.flush(10)  # separate batches: a keyless record fails its whole batch
    producer.produce(name, key=b"k", value=b"keyed", on_delivery=lambda e, m: errors.append(e))
    producer.flush(10)
    assert errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD
    assert errors[1] is None


def test_max_message_bytes_lowered_then_raised(broker, ck: AdminClient) -> None:
    from confluent_kafka import Producer
    name = topic_name("mmb")
    create_topic(broker.bootstrap, name, 1)
    assert _incremental(ck, name, ("max.message.bytes", "1000", AlterConfigOpType.SET)) == 0
    results: list = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 5000,
                         "linger.ms": 0})
    producer.produce(name, value=b"x" * 3000, on_delivery=lambda e, m: results.append(e))
    producer.flush(10)
    assert results[0] is not None and results[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert high_watermark(broker, name) == 0
    assert _incremental(ck, name, ("max.message.bytes", None, AlterConfigOpType.DELETE)) == 0
    producer.produce(name, value=b"x" * 3000, on_delivery=lambda e, m: results.append(e))
    producer.flush(10)
    assert results[1] is None
    assert high_watermark(broker, name) == 1


# The legacy AlterConfigs is what this test exercises; confluent-kafka deprecates its call.
@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_alter_configs_legacy_replaces_overrides(broker, ck: AdminClient, kp) -> None:
    from confluent_kafka.admin import ResourceType
    name = topic_name("ac")
    create_topic(broker.bootstrap, name, 1, {"segment.bytes": "2000000"})
    resource = ConfigResource(ResourceType.TOPIC, name, set_config={"retention.ms": "7000"})
    assert ck_code(next(iter(ck.alter_configs([resource]).values()))) == 0
    assert _overrides(ck, name) == {"retention.ms": "7000"}  # segment.bytes was dropped
    bad = ConfigResource(ResourceType.TOPIC, name, set_config={"retention.ms": "x"})
    assert ck_code(next(iter(ck.alter_configs([bad]).values()))) == KafkaError.INVALID_CONFIG
    vo = ConfigResource(ResourceType.TOPIC, name, set_config={"retention.ms": "9000"})
    assert ck_code(next(iter(ck.alter_configs([vo], validate_only=True).values()))) == 0
    assert _overrides(ck, name) == {"retention.ms": "7000"}
    # broker configs are static here
    broker_res = ConfigResource(ResourceType.BROKER, "0", set_config={"num.partitions": "3"})
    assert ck_code(next(iter(ck.alter_configs([broker_res]).values()))) != 0

    # kafka-python: legacy and incremental
    result = kp.alter_configs([_kp_resource("TOPIC", name, {"retention.ms": "8000"})],
                              incremental=False)
    assert result["topic"][name] == "OK"
    assert _overrides(ck, name) == {"retention.ms": "8000"}
    result = kp.alter_configs([_kp_resource("TOPIC", name, {"cleanup.policy": ("APPEND",
                                                                               "compact")})],
                              incremental=True)
    assert result["topic"][name] == "OK"
    assert _overrides(ck, name) == {"retention.ms": "8000", "cleanup.policy": "delete,compact"}


# -- DeleteRecords -----------------------------------------------------------------------------

def test_delete_records(broker, ck: AdminClient, kp) -> None:
    from kafka import TopicPartition as KpTP
    name = topic_name("dr")
    create_topic(broker.bootstrap, name, 2)
    CONFLUENT.produce(broker.bootstrap, name,
                      [Rec(b"k", f"v{i}".encode(), partition=p) for p in (0, 1) for i in range(10)])
    fs = ck.delete_records([TopicPartition(name, 0, 4)])
    deleted = next(iter(fs.values())).result(TIMEOUT)
    assert deleted.low_watermark == 4
    got = KAFKA_PYTHON.consume(broker.bootstrap, name, [0], 6)
    assert [g.offset for g in got] == list(range(4, 10))
    assert [g.value for g in got] == [f"v{i}".encode() for i in range(4, 10)]
    # confluent consumer from earliest starts there too
    assert [g.offset for g in CONFLUENT.consume(broker.bootstrap, name, [0], 6)] == \
        list(range(4, 10))

    result = kp.delete_records({KpTP(name, 1): 7})
    assert result[KpTP(name, 1)]["low_watermark"] == 7
    # beyond the high watermark: refused, nothing moves
    fs = ck.delete_records([TopicPartition(name, 0, 11)])
    assert ck_code(next(iter(fs.values()))) == KafkaError.OFFSET_OUT_OF_RANGE
    assert broker.broker.logs.get(name, 0).log_start_offset == 4
    # -1: everything up to the high watermark
    fs = ck.delete_records([TopicPartition(name, 0, -1)])
    assert next(iter(fs.values())).result(TIMEOUT).low_watermark == 10
    lo = ck.list_offsets({TopicPartition(name, 0): OffsetSpec.earliest()})
    assert next(iter(lo.values())).result(TIMEOUT).offset == 10


# -- cluster -----------------------------------------------------------------------------------

def test_describe_cluster(broker, ck: AdminClient, kp) -> None:
    desc = ck.describe_cluster().result(TIMEOUT)
    assert desc.cluster_id == broker.broker.metadata.image.cluster_id
    assert desc.controller.id == 0
    assert [(n.id, n.host, n.port) for n in desc.nodes] == [(0, "127.0.0.1", broker.port)]
    kd = kp.describe_cluster()
    assert kd["cluster_id"] == desc.cluster_id
    assert kd["controller_id"] == 0
    assert [b["broker_id"] for b in kd["brokers"]] == [0]


def test_describe_log_dirs(broker, kp) -> None:
    name = topic_name("ld")
    create_topic(broker.bootstrap, name, 2)
    CONFLUENT.produce(broker.bootstrap, name, [Rec(b"k", b"v" * 500, partition=0)])
    (result,) = kp.describe_log_dirs()
    assert result["broker"] == 0
    (entry,) = result["log_dirs"]
    assert (entry["error_code"], entry["log_dir"]) == (0, str(log_dir(broker)))
    assert entry["total_bytes"] >= entry["usable_bytes"] > 0
    sizes = {p["partition_index"]: p["partition_size"]
             for t in entry["topics"] if t["name"] == name for p in t["partitions"]}
    assert sizes[0] > 500 and sizes[1] == 0
    # asking for some partitions only (and one that does not exist)
    body = {"topics": [{"topic": name, "partitions": [1, 9]}]}
    raw = send_request(broker.bootstrap, ApiKey.DESCRIBE_LOG_DIRS, 4, body)
    assert raw.error_code == 0
    (entry,) = raw.results
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in entry.topics] == \
        [(name, [1])]


def test_elect_leaders(broker, ck: AdminClient, kp) -> None:
    from confluent_kafka import ElectionType
    name = topic_name("el")
    create_topic(broker.bootstrap, name, 2)
    fut = ck.elect_leaders(ElectionType.PREFERRED, [TopicPartition(name, 0),
                                                    TopicPartition(name, 1)])
    results = fut.result(TIMEOUT)
    codes = {tp.partition: (err.code() if err is not None else 0)
             for tp, err in results.items()}
    assert codes == {0: KafkaError.ELECTION_NOT_NEEDED, 1: KafkaError.ELECTION_NOT_NEEDED}

    body = {"election_type": 0, "topic_partitions": [{"topic": name, "partitions": [0, 7]}],
            "timeout_ms": 1000}
    raw = send_request(broker.bootstrap, ApiKey.ELECT_LEADERS, 2, body)
    parts = {p.partition_id: p.error_code for p in raw.replica_election_results[0]
             .partition_result}
    assert parts == {0: ErrorCode.ELECTION_NOT_NEEDED, 7: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    kp.elect_leaders(0, {name: [0, 1]})  # ELECTION_NOT_NEEDED is not an error for it


# -- ListOffsets -------------------------------------------------------------------------------

T = 1_700_000_000_000
# (batch of timestamps) in append order: offsets 0-2, 3-4, 5
BATCHES = [[T + 1000, T + 2000, T + 3000], [T + 2500, T + 5000], [T + 4000]]


def _timestamped_topic(broker) -> str:  # type: ignore[no-untyped-def]
    name = topic_name("lo")
    create_topic(broker.bootstrap, name, 1)
    for stamps in BATCHES:
        batch = build_batch([Record(b"k", b"v", (), ts) for ts in stamps])
        assert raw_produce(broker.bootstrap, name, 0, batch).error_code == 0
    return name


def test_list_offsets_confluent_admin(broker, ck: AdminClient) -> None:
    name = _timestamped_topic(broker)
    tp = TopicPartition(name, 0)

    def offset(spec) -> tuple[int, int]:  # type: ignore[no-untyped-def]
        info = next(iter(ck.list_offsets({tp: spec}).values())).result(TIMEOUT)
        return info.offset, info.timestamp

    assert offset(OffsetSpec.earliest())[0] == 0
    assert offset(OffsetSpec.latest())[0] == 6
    assert offset(OffsetSpec.max_timestamp()) == (4, T + 5000)
    assert offset(OffsetSpec.for_timestamp(T + 1500)) == (1, T + 2000)
    assert offset(OffsetSpec.for_timestamp(T + 2200)) == (2, T + 3000)  # inside a batch
    assert offset(OffsetSpec.for_timestamp(T + 3500)) == (4, T + 5000)
    assert offset(OffsetSpec.for_timestamp(T)) == (0, T + 1000)
    assert offset(OffsetSpec.for_timestamp(T + 9000))[0] == -1
    from confluent_kafka import IsolationLevel
    info = next(iter(ck.list_offsets({tp: OffsetSpec.latest()},
                                     isolation_level=IsolationLevel.READ_COMMITTED)
                     .values())).result(TIMEOUT)
    assert info.offset == 6
    missing = TopicPartition(name, 3)  # librdkafka knows from metadata and fails it locally
    assert ck_code(next(iter(ck.list_offsets({missing: OffsetSpec.latest()}).values()))) != 0
    body = {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": name, "partitions": [{"partition_index": 3, "current_leader_epoch": -1,
                                       "timestamp": -1}]}]}
    raw = send_request(broker.bootstrap, ApiKey.LIST_OFFSETS, 7, body)
    assert raw.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_list_offsets_confluent_consumer(broker) -> None:
    from confluent_kafka import Consumer
    name = _timestamped_topic(broker)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        lo, hi = consumer.get_watermark_offsets(TopicPartition(name, 0), timeout=TIMEOUT)
        assert (lo, hi) == (0, 6)
        found = consumer.offsets_for_times(
            [TopicPartition(name, 0, T + 2200)], timeout=TIMEOUT)
        assert found[0].offset == 2 and found[0].error is None
        found = consumer.offsets_for_times(
            [TopicPartition(name, 0, T + 4500)], timeout=TIMEOUT)
        assert found[0].offset == 4
        found = consumer.offsets_for_times(
            [TopicPartition(name, 0, T + 99999)], timeout=TIMEOUT)
        assert found[0].offset == -1  # OFFSET_END: no such record
    finally:
        consumer.close()


def test_list_offsets_kafka_python(broker) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTP
    name = _timestamped_topic(broker)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    try:
        tp = KpTP(name, 0)
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 6}
        found = consumer.offsets_for_times({tp: T + 2200})[tp]
        assert (found.offset, found.timestamp) == (2, T + 3000)
        assert consumer.offsets_for_times({tp: T + 99999})[tp] is None
    finally:
        consumer.close()


# -- OffsetForLeaderEpoch ----------------------------------------------------------------------

def test_offset_for_leader_epoch(broker) -> None:
    name = topic_name("ofle")
    create_topic(broker.bootstrap, name, 1)

    def ask(partition: int, leader_epoch: int, current: int = -1, topic: str = name):
        body = {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": partition, "current_leader_epoch": current,
             "leader_epoch": leader_epoch}]}]}
        resp = send_request(broker.bootstrap, ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, body)
        return resp.topics[0].partitions[0]

    # As after Kafka's makeLeader, the leader's epoch starts at its log end from creation,
    # so the first append has no leader-epoch-checkpoint to rewrite (and fsync).
    p = ask(0, 0)
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 0, 0)
    checkpoint = log_dir(broker) / f"{name}-0" / "leader-epoch-checkpoint"
    assert checkpoint.read_text().split("\n")[2] == "0 0"
    before = checkpoint.stat()
    for i in range(3):
        assert raw_produce(broker.bootstrap, name, 0,
                           build_batch([Record(None, b"v%d" % i)])).error_code == 0
    after = checkpoint.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)

    p = ask(0, 0)
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 0, 3)
    p = ask(0, 0, current=0)
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 0, 3)
    assert ask(0, 0, current=5).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert ask(1, 0).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert ask(0, 0, topic="no-such-topic").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# -- Produce errors ----------------------------------------------------------------------------

def test_produce_to_unknown_partition_and_topic(broker) -> None:
    name = topic_name("pu")
    create_topic(broker.bootstrap, name, 1)
    batch = build_batch([Record(None, b"v")])
    assert raw_produce(broker.bootstrap, name, 5, batch).error_code == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    missing = topic_name("pu-missing")
    assert raw_produce(broker.bootstrap, missing, 0, batch).error_code == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert missing not in broker.broker.metadata.image.topics  # Produce never auto-creates


def test_min_insync_replicas_above_the_isr(broker) -> None:
    """min.insync.replicas=2 on a one-replica partition: acks=all is refused with
    NOT_ENOUGH_REPLICAS and nothing is written; acks=1 is not affected, as in Kafka."""
    from compat.base import ProduceFailed
    name = topic_name("min-isr")
    create_topic(broker.bootstrap, name, 1, {"min.insync.replicas": "2"})
    batch = build_batch([Record(b"k", b"v")])
    part = raw_produce(broker.bootstrap, name, 0, batch, acks=-1)
    assert part.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert "min.isr requirement of 2" in part.error_message
    assert high_watermark(broker, name) == 0
    with pytest.raises(ProduceFailed):
        CONFLUENT.produce(broker.bootstrap, name, [Rec(b"k", b"all", partition=0)],
                          config={"acks": "all", "message.timeout.ms": 3000,
                                  "enable.idempotence": False})
    assert raw_produce(broker.bootstrap, name, 0, batch, acks=1).error_code == 0
    assert high_watermark(broker, name) == 1


def test_produce_timestamps_out_of_range(broker) -> None:
    """message.timestamp.before.max.ms / after.max.ms on a CreateTime topic: a batch with a
    record stamped outside [now - before, now + after] is refused with INVALID_TIMESTAMP and
    the offending records named (record_errors, v8+); nothing is written."""
    from compat.base import ProduceFailed
    name = topic_name("ts-range")
    create_topic(broker.bootstrap, name, 1, {"message.timestamp.before.max.ms": "3600000",
                                             "message.timestamp.after.max.ms": "60000"})
    now = int(time.time() * 1000)
    with pytest.raises(ProduceFailed, match="(?i)timestamp"):
        CONFLUENT.produce(broker.bootstrap, name, [Rec(b"k", b"old", timestamp=now - 7_200_000,
                                                       partition=0)])
    batch = build_batch([Record(b"k", b"ok", timestamp=now),
                         Record(b"k", b"future", timestamp=now + 3_600_000)])
    part = raw_produce(broker.bootstrap, name, 0, batch, version=9)
    assert part.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [e.batch_index for e in part.record_errors] == [1]
    assert "out of range" in part.record_errors[0].batch_index_error_message
    assert high_watermark(broker, name) == 0
    CONFLUENT.produce(broker.bootstrap, name, [Rec(b"k", b"now", partition=0)])
    assert [g.value for g in KAFKA_PYTHON.consume(broker.bootstrap, name, [0], 1)] == [b"now"]


def test_produce_corrupt_crc(broker) -> None:
    name = topic_name("crc")
    create_topic(broker.bootstrap, name, 1)
    good = build_batch([Record(b"k", b"value-%d" % i) for i in range(5)])
    bad = bytearray(good)
    bad[-3] ^= 0x01  # inside the last record: the CRC no longer matches
    with RawConnection(broker.bootstrap) as conn:
        resp = raw_produce(broker.bootstrap, name, 0, bytes(bad), conn=conn)
        assert resp.error_code == ErrorCode.CORRUPT_MESSAGE
        assert high_watermark(broker, name) == 0
        assert broker.broker.logs.get(name, 0).size == 0
        # the connection stays usable and the log unharmed
        resp = raw_produce(broker.bootstrap, name, 0, good, conn=conn)
        assert (resp.error_code, resp.base_offset) == (0, 0)
    got = KAFKA_PYTHON.consume(broker.bootstrap, name, [0], 5)
    assert [g.value for g in got] == [b"value-%d" % i for i in range(5)]


@pytest.mark.parametrize("version", [3, 4, 5, 6, 7, 9])
def test_produce_zstd_needs_v7(broker, version: int) -> None:
    name = topic_name("zstd")
    create_topic(broker.bootstrap, name, 1)
    batch = build_batch([Record(b"k", b"zstd " * 50)], compression=Compression.ZSTD)
    resp = raw_produce(broker.bootstrap, name, 0, batch, version=version)
    if version < 7:
        assert resp.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        assert high_watermark(broker, name) == 0
    else:
        assert resp.error_code == 0 and high_watermark(broker, name) == 1


def test_produce_message_too_large(broker) -> None:
    name = topic_name("big")
    create_topic(broker.bootstrap, name, 1, {"max.message.bytes": "2000"})
    small = build_batch([Record(None, b"x" * 1000)])
    large = build_batch([Record(None, b"x" * 3000)])
    assert raw_produce(broker.bootstrap, name, 0, large).error_code == \
        ErrorCode.MESSAGE_TOO_LARGE
    assert raw_produce(broker.bootstrap, name, 0, small).error_code == 0
    assert high_watermark(broker, name) == 1


def test_produce_acks_zero_gets_no_response(broker) -> None:
    name = topic_name("acks0")
    create_topic(broker.bootstrap, name, 1)
    with RawConnection(broker.bootstrap) as conn:
        conn.request(ApiKey.PRODUCE, 9, {
            "transactional_id": None, "acks": 0, "timeout_ms": 1000, "topic_data": [
                {"name": name, "partition_data": [
                    {"index": 0, "records": build_batch([Record(None, b"fire")])}]}]},
            expect_response=False)
        # the next response on the connection is the next request's
        resp = conn.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "raw",
                                                     "client_software_version": "1"})
        assert resp.error_code == 0
    assert high_watermark(broker, name) == 1


# -- ApiVersions -------------------------------------------------------------------------------

def _advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    resp = send_request(bootstrap, ApiKey.API_VERSIONS, 3,
                        {"client_software_name": "raw", "client_software_version": "1"})
    assert resp.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


def test_api_versions_matches_registry(broker) -> None:
    advertised = _advertised(broker.bootstrap)
    expected = {key: (h.advertised_min if h.advertised_min is not None else h.min_version,
                      h.max_version) for key, h in REGISTRY.items()}
    assert advertised == expected
    for key, (low, high) in advertised.items():
        assert key in APIS and low in APIS[key].versions and high in APIS[key].versions
    resp = send_request(broker.bootstrap, ApiKey.API_VERSIONS, 0, {})
    assert {k.api_key for k in resp.api_keys} == set(expected)


def test_api_versions_unsupported_version_answered_with_v0(broker) -> None:
    """A client newer than us sends ApiVersions v99: the answer is a v0 body with
    UNSUPPORTED_VERSION and our ApiVersions range (KIP-511)."""
    import struct as st
    from protocol.codec import decode_response
    header = st.pack(">hhih", ApiKey.API_VERSIONS, 99, 7, 3) + b"raw"
    with RawConnection(broker.bootstrap) as conn:
        conn.send_frame(st.pack(">i", len(header) + 2) + header + b"\x00\x00")
        cid, body = decode_response(ApiKey.API_VERSIONS, 0, conn.read_frame())
    assert cid == 7 and body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == \
        [(ApiKey.API_VERSIONS, REGISTRY[ApiKey.API_VERSIONS].min_version,
          REGISTRY[ApiKey.API_VERSIONS].max_version)]


def _default_request(key: int, version: int) -> dict:
    body = APIS[key].request.default(version)
    if key == ApiKey.PRODUCE:
        body["acks"] = -1  # acks=0 would get no response
    return body


def test_every_advertised_version_is_answered(broker) -> None:
    """Each advertised (api, version) with an all-defaults request gets a response body that
    decodes, on one connection the broker never closes."""
    advertised = _advertised(broker.bootstrap)
    failures = []
    with RawConnection(broker.bootstrap, timeout=5) as conn:
        for key, (low, high) in sorted(advertised.items()):
            for version in range(low, high + 1):
                try:
                    conn.request(key, version, _default_request(key, version))
                except Exception as exc:  # noqa: BLE001 - report them all
                    failures.append((ApiKey(key).name, version, repr(exc)))
                    conn.close()
                    conn = RawConnection(broker.bootstrap, timeout=5)
    assert not failures, failures


@pytest.mark.parametrize("version", [0, 1, 2])
def test_old_produce_versions_get_unsupported_version(broker, version: int) -> None:
    name = topic_name("oldproduce")
    create_topic(broker.bootstrap, name, 2)
    body = {"acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": name, "partition_data": [{"index": 0, "records": b""},
                                          {"index": 1, "records": None}]}]}
    with RawConnection(broker.bootstrap) as conn:
        resp = conn.request(ApiKey.PRODUCE, version, body)
        codes = [p.error_code for p in resp.responses[0].partition_responses]
        assert codes == [ErrorCode.UNSUPPORTED_VERSION] * 2
        assert conn.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0  # still open
    assert high_watermark(broker, name) == 0


# -- version sweeps: every served version of the data-path APIs works end to end ---------------

def _filled(key: int, version: int, **fields) -> dict:  # type: ignore[no-untyped-def]
    body = APIS[key].request.default(version)
    body.update(fields)
    return body


def test_produce_fetch_list_offsets_every_version(broker) -> None:
    name = topic_name("versions")
    create_topic(broker.bootstrap, name, 1)
    produce_low, produce_high = REGISTRY[ApiKey.PRODUCE].min_version, \
        REGISTRY[ApiKey.PRODUCE].max_version
    for i, version in enumerate(range(produce_low, produce_high + 1)):
        resp = raw_produce(broker.bootstrap, name, 0,
                           build_batch([Record(b"k", b"v%d" % version, (), T + i)]),
                           version=version)
        assert (resp.error_code, resp.base_offset) == (0, i), version
    count = produce_high - produce_low + 1

    fetch = REGISTRY[ApiKey.FETCH]
    for version in range(fetch.min_version, fetch.max_version + 1):
        for isolation in (0, 1):
            body = _filled(ApiKey.FETCH, version, max_wait_ms=0, min_bytes=1,
                           isolation_level=isolation, topics=[{"topic": name, "partitions": [
                               {"partition": 0, "fetch_offset": 1, "partition_max_bytes": 1 << 20,
                                "current_leader_epoch": -1, "log_start_offset": -1,
                                "last_fetched_epoch": -1}]}])
            resp = send_request(broker.bootstrap, ApiKey.FETCH, version, body)
            part = resp.responses[0].partitions[0]
            assert part.error_code == 0 and part.high_watermark == count, version
            assert part.last_stable_offset == count, version
            if version >= 5:
                assert part.log_start_offset == 0
            assert part.aborted_transactions == ([] if isolation else None), (version, isolation)
            from protocol.records.record import iter_records_in
            offsets = [r.offset for r in iter_records_in(part.records)]
            assert offsets and offsets[0] <= 1 and offsets[-1] == count - 1, (version, offsets)

    lo = REGISTRY[ApiKey.LIST_OFFSETS]
    for version in range(lo.min_version, lo.max_version + 1):
        for ts, expected in ((-2, 0), (-1, count), (T + 1, 1)):
            body = _filled(ApiKey.LIST_OFFSETS, version, replica_id=-1, isolation_level=0,
                           topics=[{"name": name, "partitions": [
                               {"partition_index": 0, "current_leader_epoch": -1,
                                "timestamp": ts}]}])
            resp = send_request(broker.bootstrap, ApiKey.LIST_OFFSETS, version, body)
            part = resp.topics[0].partitions[0]
            assert (part.error_code, part.offset) == (0, expected), (version, ts)
        if version >= 7:
            body["topics"][0]["partitions"][0]["timestamp"] = -3  # max timestamp
            part = send_request(broker.bootstrap, ApiKey.LIST_OFFSETS, version,
                                body).topics[0].partitions[0]
            assert (part.offset, part.timestamp) == (count - 1, T + count - 1)


def test_metadata_every_version(broker) -> None:
    name = topic_name("mdv")
    create_topic(broker.bootstrap, name, 2)
    info = broker.broker.metadata.image.topics[name]
    md = REGISTRY[ApiKey.METADATA]
    for version in range(md.min_version, md.max_version + 1):
        topics = [{"name": name, "topic_id": uuid.UUID(int=0)}]
        body = _filled(ApiKey.METADATA, version, topics=topics)
        resp = send_request(broker.bootstrap, ApiKey.METADATA, version, body)
        assert [(b.node_id, b.port) for b in resp.brokers] == [(0, broker.port)], version
        (topic,) = resp.topics
        assert (topic.error_code, topic.name) == (0, name), version
        assert sorted(p.partition_index for p in topic.partitions) == [0, 1]
        assert all(p.leader_id == 0 and list(p.replica_nodes) == [0] for p in topic.partitions)
        if version >= 10:
            assert topic.topic_id == info.topic_id
        if version >= 2:
            assert resp.cluster_id == broker.broker.metadata.image.cluster_id
        # all topics: [] in v0, null from v1
        everything = _filled(ApiKey.METADATA, version, topics=[] if version == 0 else None)
        resp = send_request(broker.bootstrap, ApiKey.METADATA, version, everything)
        assert name in {t.name for t in resp.topics}, version
    # by topic id (v10+ lets a request name a topic by id only)
    body = _filled(ApiKey.METADATA, 12, topics=[{"name": None, "topic_id": info.topic_id}])
    (topic,) = send_request(broker.bootstrap, ApiKey.METADATA, 12, body).topics
    assert (topic.error_code, topic.name) == (0, name)


def test_produce_invalid_acks(broker) -> None:
    name = topic_name("acks")
    create_topic(broker.bootstrap, name, 1)
    resp = raw_produce(broker.bootstrap, name, 0, build_batch([Record(None, b"v")]), acks=2)
    assert resp.error_code == ErrorCode.INVALID_REQUIRED_ACKS
    assert high_watermark(broker, name) == 0


def test_list_offsets_kafka_python_admin_specs(broker, kp) -> None:
    """Every spec kafka-python's admin offers, including EARLIEST_LOCAL (-4, KIP-405) and
    LATEST_TIERED (-5, KIP-1005), which a broker without tiered storage answers too."""
    from kafka import TopicPartition as KpTP
    from kafka.admin import OffsetSpec as KpSpec
    name = _timestamped_topic(broker)
    tp = KpTP(name, 0)

    def offset(spec) -> int:  # type: ignore[no-untyped-def]
        return kp.list_partition_offsets({tp: spec})[tp].offset

    assert offset(KpSpec.EARLIEST) == 0
    assert offset(KpSpec.LATEST) == 6
    assert offset(KpSpec.MAX_TIMESTAMP) == 4
    assert offset(KpSpec.EARLIEST_LOCAL) == 0
    assert offset(KpSpec.LATEST_TIERED) == -1
    kp.delete_records({tp: 2})
    assert offset(KpSpec.EARLIEST) == 2 and offset(KpSpec.EARLIEST_LOCAL) == 2


def test_auto_create_follows_each_clients_default(broker) -> None:
    """CLIENTS.md section 4: a librdkafka consumer asks with allow_auto_topic_creation=false
    and must not create the topic; librdkafka's and kafka-python's producers create it."""
    from confluent_kafka import Consumer, Producer
    image = broker.broker.metadata.image
    by_consumer = topic_name("ck-consumer")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        md = consumer.list_topics(by_consumer, timeout=TIMEOUT)
        assert md.topics[by_consumer].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    finally:
        consumer.close()
    assert by_consumer not in image.topics

    by_producer = topic_name("ck-producer")
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    assert producer.list_topics(by_producer, timeout=TIMEOUT).topics[by_producer].error is None
    assert by_producer in image.topics

    from kafka import KafkaProducer
    by_kp = topic_name("kp-producer")
    kp_producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        assert kp_producer.partitions_for(by_kp) == {0}
    finally:
        kp_producer.close(5)
    assert by_kp in image.topics


def test_trailing_bytes_after_a_complete_request_are_ignored(broker) -> None:
    """librdkafka 2.16 asks for all topics with Metadata v12 followed by three stray bytes
    (AdminClient.list_topics()); Kafka ignores them, so must we."""
    import struct as st
    from protocol.codec import decode_response
    name = topic_name("trail")
    create_topic(broker.bootstrap, name, 1)
    # the exact bytes librdkafka 2.16.0 sends, correlation id 3
    frame = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    with RawConnection(broker.bootstrap) as conn:
        conn.send_frame(st.pack(">i", len(frame)) + frame)
        cid, body = decode_response(ApiKey.METADATA, 12, conn.read_frame())
        assert cid == 3 and name in {t.name for t in body.topics}
        assert conn.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0  # still open
    ck = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert name in ck.list_topics(timeout=TIMEOUT).topics


def test_delete_topic_enable_false(tmp_path: Path) -> None:
    """delete.topic.enable=false: DeleteTopics fails with TOPIC_DELETION_DISABLED (from v3;
    INVALID_REQUEST before, as in Kafka) and the topic keeps its data."""
    with broker_in_thread(tmp_path / "logs", delete_topic_enable="false") as info:
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
        assert name in info.broker.metadata.image.topics
        assert [g.value for g in KAFKA_PYTHON.consume(info.bootstrap, name, [0], 1)] == \
            [b"still here"]


def test_deleted_topic_files_are_removed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """DeleteTopics removes the partitions' directories (in a worker thread) before it
    answers, leaving no `*-delete` directory behind."""
    from protocol.api_keys import ApiKey
    from tests.helpers import broker_in_thread
    from tests.integration.raw import create_topic, send_request

    logs = tmp_path / "logs"
    with broker_in_thread(logs) as info:
        create_topic(info.bootstrap, "doomed", 3)
        assert (logs / "doomed-0").is_dir()
        resp = send_request(info.bootstrap, ApiKey.DELETE_TOPICS, 4,
                            {"topic_names": ["doomed"], "timeout_ms": 10000})
        assert resp.responses[0].error_code == 0
        assert not [p for p in logs.iterdir() if p.name.startswith("doomed")]
