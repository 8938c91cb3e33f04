"""One produce / group consume / admin round trip per client, over whatever security its
settings name: the SASL and SASL_SSL tests differ in the settings, not in what they check."""
from __future__ import annotations

import asyncio
import subprocess
import time
from typing import Any


def confluent_sasl(bootstrap: str, protocol: str, mechanism: str, user: str, password: str,
                   **extra: Any) -> dict:
    """confluent-kafka's settings for `mechanism`; OAUTHBEARER as an unsecured JWT naming
    `user` (the password is then unused)."""
    conf = {"bootstrap.servers": bootstrap, "security.protocol": protocol,
            "sasl.mechanism": mechanism, **extra}
    if mechanism == "OAUTHBEARER":
        conf.update({"sasl.oauthbearer.config": f"principal={user}",
                     "enable.sasl.oauthbearer.unsecure.jwt": True})
    else:
        conf.update({"sasl.username": user, "sasl.password": password})
    return conf


def confluent_consume_one(conf: dict, topic: str, group: str) -> Any:
    """The first message a new member of `group` polls from `topic` (None after 20 s)."""
    from confluent_kafka import Consumer
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    message = None
    deadline = time.monotonic() + 20
    while message is None and time.monotonic() < deadline:
        message = consumer.poll(1)
    consumer.close()
    return message


def confluent_roundtrip(conf: dict, topic: str, value: bytes) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient
    producer = Producer(conf)
    producer.produce(topic, value)
    assert producer.flush(15) == 0
    message = confluent_consume_one(conf, topic, f"g-{topic}")
    assert message is not None and message.error() is None, message
    assert message.value() == value
    assert topic in AdminClient(conf).list_topics(timeout=10).topics


def kafka_python_roundtrip(common: dict, topic: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    producer = KafkaProducer(**common)
    producer.send(topic, b"from kafka-python").get(timeout=15)
    producer.close()
    consumer = KafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest",
                             consumer_timeout_ms=10000, **common)
    values = []
    for message in consumer:  # the first record, then one short poll for any other: they
        values.append(message.value)  # were all written before, so one fetch has them
        break
    values += [m.value for batch in consumer.poll(timeout_ms=1000).values() for m in batch]
    consumer.close()
    assert values == [b"from kafka-python"]
    admin = KafkaAdminClient(**common)
    try:
        assert topic in admin.list_topics()
    finally:
        admin.close()


def aiokafka_roundtrip(common: dict, topic: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient

    async def main() -> tuple[list[bytes], list[str]]:
        producer = AIOKafkaProducer(**common)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"from aiokafka")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=f"g-{topic}",
                                    auto_offset_reset="earliest", **common)
        await consumer.start()
        try:
            got = [(await consumer.getone()).value]
        finally:
            await consumer.stop()
        admin = AIOKafkaAdminClient(**common)
        await admin.start()
        try:
            topics = await admin.list_topics()
        finally:
            await admin.close()
        return got, list(topics)

    got, topics = asyncio.run(asyncio.wait_for(main(), 60))
    assert got == [b"from aiokafka"] and topic in topics


def kcat_roundtrip(bootstrap: str, auth: list[str], topic: str) -> None:
    """kcat -P, then -G (a group member reading from the beginning), then -L."""
    subprocess.run(["kcat", "-b", bootstrap, "-P", "-t", topic, *auth],
                   input=b"from kcat\n", check=True, timeout=30)
    got = subprocess.run(["kcat", "-b", bootstrap, "-G", f"g-{topic}", "-o", "beginning",
                          "-e", "-c", "1", *auth, topic],
                         capture_output=True, check=True, timeout=40)
    assert got.stdout == b"from kcat\n"
    listed = subprocess.run(["kcat", "-b", bootstrap, "-L", "-t", topic, *auth],
                            capture_output=True, check=True, timeout=30)
    assert f'topic "{topic}"'.encode() in listed.stdout
