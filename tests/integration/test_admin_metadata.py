"""Metadata through the stock clients and raw requests: listing and describing topics,
broker.rack, auto-creation (on, off, and each client's own default), and a request with
trailing bytes as librdkafka sends it.
"""
from __future__ import annotations

import uuid
from pathlib import Path

from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from tests.helpers import serving_broker
from tests.integration.admin_helpers import TIMEOUT, ck_code, stored_cluster_id, topic_name
from tests.integration.raw import RawConnection, create_topic, known_topics, send_request


def test_list_and_describe_topics(broker, ck: AdminClient, kp) -> None:
    from confluent_kafka import TopicCollection
    names = [topic_name("lt") for _ in range(3)]
    for i, name in enumerate(names):
        create_topic(broker.bootstrap, name, i + 1)
    listed = ck.list_topics(timeout=TIMEOUT)
    assert set(names) <= set(listed.topics)
    assert listed.cluster_id == stored_cluster_id(broker)
    assert sorted((b.id, b.port) for b in listed.brokers.values()) == broker.brokers
    ids = [broker_id for broker_id, _ in broker.brokers]
    assert set(names) <= set(kp.list_topics())

    described = ck.describe_topics(TopicCollection(names))
    for i, name in enumerate(names):
        desc = described[name].result(TIMEOUT)
        assert desc.name == name and not desc.is_internal
        assert desc.topic_id is not None
        assert [p.id for p in desc.partitions] == list(range(i + 1))
        assert all(p.leader.id in ids and [r.id for r in p.replicas] == [p.leader.id]
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
    with serving_broker(tmp_path / "logs", broker_rack="zone-a") as info:
        ck = AdminClient({"bootstrap.servers": info.bootstrap})
        cluster = ck.describe_cluster().result(TIMEOUT)
        assert [n.rack for n in cluster.nodes] == ["zone-a"] * len(info.brokers)  # a node's all
        resp = _metadata(info.bootstrap, topic_name("rack"), allow=False)
        assert [b.rack for b in resp.brokers] == ["zone-a"] * len(info.brokers)


def test_metadata_auto_create(broker) -> None:
    created = topic_name("auto")
    resp = _metadata(broker.bootstrap, created, allow=True)
    assert resp.topics[0].error_code == 0
    assert len(resp.topics[0].partitions) == 1
    assert created in known_topics(broker.bootstrap)

    refused = topic_name("noauto")
    resp = _metadata(broker.bootstrap, refused, allow=False)
    assert resp.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert refused not in known_topics(broker.bootstrap)

    # v1-3 have no flag: auto-creation is implied
    old = topic_name("auto-v1")
    body = {"topics": [{"name": old}]}
    resp = send_request(broker.bootstrap, ApiKey.METADATA, 1, body)
    assert resp.topics[0].error_code == 0 and old in known_topics(broker.bootstrap)

    resp = _metadata(broker.bootstrap, "bad/name", allow=True)
    assert resp.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_metadata_auto_create_disabled(tmp_path: Path) -> None:
    with serving_broker(tmp_path / "logs", auto_create_topics_enable="false") as info:
        name = topic_name("noauto")
        resp = _metadata(info.bootstrap, name, allow=True)
        assert resp.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert name not in known_topics(info.bootstrap)
        # and a stock producer is told so rather than the topic appearing
        from confluent_kafka import Producer
        errors: list = []
        producer = Producer({"bootstrap.servers": info.bootstrap, "message.timeout.ms": 1500})
        producer.produce(name, b"x", on_delivery=lambda err, msg: errors.append(err))
        producer.flush(5)
        assert errors and errors[0] is not None
        assert errors[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._MSG_TIMED_OUT,
                                    KafkaError._UNKNOWN_TOPIC)
        assert name not in known_topics(info.bootstrap)


def test_auto_create_follows_each_clients_default(broker) -> None:
    """CLIENTS.md section 4: a librdkafka consumer asks with allow_auto_topic_creation=false
    and must not create the topic; librdkafka's and kafka-python's producers create it."""
    from confluent_kafka import Consumer, Producer
    by_consumer = topic_name("ck-consumer")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        md = consumer.list_topics(by_consumer, timeout=TIMEOUT)
        assert md.topics[by_consumer].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    finally:
        consumer.close()
    assert by_consumer not in known_topics(broker.bootstrap)

    by_producer = topic_name("ck-producer")
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    assert producer.list_topics(by_producer, timeout=TIMEOUT).topics[by_producer].error is None
    assert by_producer in known_topics(broker.bootstrap)

    from kafka import KafkaProducer
    by_kp = topic_name("kp-producer")
    kp_producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        assert kp_producer.partitions_for(by_kp) == {0}
    finally:
        kp_producer.close(5)
    assert by_kp in known_topics(broker.bootstrap)


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


def test_metadata_by_topic_id_ignores_the_names(broker) -> None:
    """As Kafka: once a topic is asked for by id, the ids alone are the request. The Java
    client's MetadataRequest.Builder.forTopicIds (a broker-side regex member resolving its
    assignment) sends each id with the name "", its field's default; read as names, each id
    was the unknown topic "" and the member never learned what it was assigned."""
    first, second = topic_name("by-id"), topic_name("by-id")
    create_topic(broker.bootstrap, first, 2)
    create_topic(broker.bootstrap, second, 1)
    everything = send_request(broker.bootstrap, ApiKey.METADATA, 12, {
        "topics": None, "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})
    ids = {t.name: t.topic_id for t in everything.topics}
    unknown = uuid.uuid4()
    body = {"topics": [{"name": "", "topic_id": ids[first]}, {"name": "", "topic_id": ids[second]},
                       {"name": "", "topic_id": ids[first]}, {"name": "", "topic_id": unknown}],
            "allow_auto_topic_creation": True, "include_topic_authorized_operations": False}
    got = send_request(broker.bootstrap, ApiKey.METADATA, 12, body)
    found = {t.topic_id: (t.error_code, t.name, len(t.partitions)) for t in got.topics}
    assert found == {ids[first]: (0, first, 2), ids[second]: (0, second, 1),
                     unknown: (ErrorCode.UNKNOWN_TOPIC_ID, None, 0)}
    assert len(got.topics) == 3  # the id asked for twice answered once
