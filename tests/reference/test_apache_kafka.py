"""The reference broker runs here: Apache Kafka fetched by Maven, started, and used by a
stock client (issue #15 §1). Its start time goes to the run's performance figures."""
from __future__ import annotations

import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from compat.apache_kafka import ApacheKafka


def test_a_record_round_trips_through_apache_kafka(apache_kafka: ApacheKafka,
                                                   perf_summary: list[str]) -> None:
    assert apache_kafka.start_seconds is not None
    perf_summary.append(f"Apache Kafka start (JVM launch to ApiVersions answered): "
                        f"{apache_kafka.start_seconds:.1f} s")
    topic = f"reference-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": apache_kafka.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)

    producer = Producer({"bootstrap.servers": apache_kafka.bootstrap, "acks": "all"})
    delivered: list = []
    producer.produce(topic, key=b"k", value=b"hello kafka", partition=1,
                     headers=[("h", b"v")], on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0
    assert delivered == [None]

    consumer = Consumer({"bootstrap.servers": apache_kafka.bootstrap, "group.id": topic,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        # assign, not subscribe: Kafka's group.initial.rebalance.delay.ms would add 3 s.
        consumer.assign([TopicPartition(topic, 1, 0)])
        msg = None
        for _ in range(60):
            msg = consumer.poll(0.5)
            if msg is not None:
                break
        assert msg is not None and msg.error() is None
        assert (msg.partition(), msg.offset(), msg.key(), msg.value(), msg.headers()) == \
            (1, 0, b"k", b"hello kafka", [("h", b"v")])
    finally:
        consumer.close()

