"""Producing and consuming with each stock client, in one shape the tests can compare.

Every producer takes a list of `Rec` (partition, key, value, headers, timestamp) and writes
them in order; every consumer reads whole partitions from the beginning without a consumer
group (assign + seek) and returns `Got` rows. kcat cannot set a record's timestamp, and
applies its `-H` headers to a whole invocation, so its producer runs once per run of
consecutive records with the same partition, headers and null-value mode.
"""
from __future__ import annotations

import asyncio
import subprocess
import time
from dataclasses import dataclass

from compat.base import Got, Headers
from compat.clients.kcat import CONSUME_FORMAT, KCAT, parse_consumed, producer_runs

TIMEOUT_S = 15.0
CLIENTS = ("kafka-python", "confluent", "aiokafka", "kcat")
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@dataclass(frozen=True)
class Rec:
    partition: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp: int | None = None


def unsupported_codec(client: str, codec: str) -> str | None:
    """Why `client` cannot produce with `codec` in this environment, or None."""
    if client == "kafka-python" and codec != "none":
        from kafka import codec as kc
        available = {"gzip": kc.has_gzip, "snappy": kc.has_snappy, "lz4": kc.has_lz4,
                     "zstd": kc.has_zstd}[codec]()
        if not available:
            return f"kafka-python has no {codec} library installed here"
    if client == "aiokafka" and codec != "none":
        from aiokafka import codec as ac
        available = {"gzip": ac.has_gzip, "snappy": ac.has_snappy, "lz4": ac.has_lz4,
                     "zstd": ac.has_zstd}[codec]()
        if not available:
            return f"aiokafka has no {codec} library installed here"
    return None


# -- producers ---------------------------------------------------------------------------------

def produce_kafka_python(bootstrap: str, topic: str, recs: list[Rec], codec: str = "none",
                         **config: object) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap,
                             compression_type=None if codec == "none" else codec,
                             request_timeout_ms=10000, **config)
    try:
        futures = [producer.send(topic, key=r.key, value=r.value, partition=r.partition,
                                 headers=list(r.headers), timestamp_ms=r.timestamp)
                   for r in recs]
        producer.flush(TIMEOUT_S)
        for fut in futures:
            fut.get(TIMEOUT_S)
    finally:
        producer.close(5)


def produce_confluent(bootstrap: str, topic: str, recs: list[Rec], codec: str = "none",
                      **config: object) -> None:
    from confluent_kafka import Producer
    errors: list = []

    def on_delivery(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is not None:
            errors.append(err)

    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                         "linger.ms": 5, "message.timeout.ms": 15000, **config})
    for r in recs:
        kwargs: dict = {"partition": r.partition, "on_delivery": on_delivery}
        if r.headers:
            kwargs["headers"] = list(r.headers)
        if r.timestamp is not None:
            kwargs["timestamp"] = r.timestamp
        producer.produce(topic, value=r.value, key=r.key, **kwargs)
    assert producer.flush(TIMEOUT_S) == 0, "confluent producer did not deliver everything"
    assert not errors, errors


def produce_aiokafka(bootstrap: str, topic: str, recs: list[Rec], codec: str = "none",
                     **config: object) -> None:
    from aiokafka import AIOKafkaProducer

    async def main() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap,
                                    compression_type=None if codec == "none" else codec,
                                    request_timeout_ms=10000, **config)
        await producer.start()
        try:
            futures = [await producer.send(topic, value=r.value, key=r.key,
                                           partition=r.partition, timestamp_ms=r.timestamp,
                                           headers=list(r.headers) or None)
                       for r in recs]
            await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT_S)
        finally:
            await producer.stop()

    asyncio.run(main())


def produce_kcat(bootstrap: str, topic: str, recs: list[Rec], codec: str = "none",
                 **config: object) -> None:
    """One kcat run per stretch of records sharing partition, headers and null-value mode
    (compat's kcat adapter says why)."""
    for args, stdin in producer_runs(recs):
        args = [KCAT, "-P", "-b", bootstrap, "-t", topic, "-z", codec, *args]
        for k, v in config.items():
            args += ["-X", f"{k}={v}"]
        proc = subprocess.run(args, input=stdin, capture_output=True, timeout=TIMEOUT_S)
        assert proc.returncode == 0, proc.stderr.decode()
        assert b"ERROR" not in proc.stderr and b"failed" not in proc.stderr.lower(), \
            proc.stderr.decode()


PRODUCERS = {"kafka-python": produce_kafka_python, "confluent": produce_confluent,
             "aiokafka": produce_aiokafka, "kcat": produce_kcat}


# -- consumers ---------------------------------------------------------------------------------

def consume_kafka_python(bootstrap: str, topic: str, partitions: list[int],
                         count: int) -> list[Got]:
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, fetch_max_wait_ms=100,
                             request_timeout_ms=10000)
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        got: list[Got] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            for tp, msgs in consumer.poll(timeout_ms=200).items():
                got += [Got(m.partition, m.offset, m.key, m.value, tuple(m.headers),
                            m.timestamp) for m in msgs]
        return got
    finally:
        consumer.close()


def consume_confluent(bootstrap: str, topic: str, partitions: list[int],
                      count: int, **config: object) -> list[Got]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    # librdkafka insists on a group.id even for assign(); nothing is committed to it.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign-only",
                         "enable.auto.commit": False, "enable.auto.offset.store": False,
                         "fetch.wait.max.ms": 100, **config})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        got: list[Got] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append(Got(m.partition(), m.offset(), m.key(), m.value(),
                           tuple(m.headers() or ()), m.timestamp()[1]))
        return got
    finally:
        consumer.close()


def consume_aiokafka(bootstrap: str, topic: str, partitions: list[int],
                     count: int) -> list[Got]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def main() -> list[Got]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                    enable_auto_commit=False, fetch_max_wait_ms=100,
                                    request_timeout_ms=10000)
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in partitions]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            got: list[Got] = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < count and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=200)
                for msgs in batches.values():
                    got += [Got(m.partition, m.offset, m.key, m.value,
                                tuple(m.headers or ()), m.timestamp) for m in msgs]
            return got
        finally:
            await consumer.stop()

    return asyncio.run(main())


def consume_kcat(bootstrap: str, topic: str, partitions: list[int], count: int) -> list[Got]:
    got: list[Got] = []
    for p in partitions:
        proc = subprocess.run(
            [KCAT, "-C", "-b", bootstrap, "-t", topic, "-p", str(p), "-o", "beginning", "-e",
             "-q", "-f", CONSUME_FORMAT], capture_output=True, timeout=TIMEOUT_S)
        assert proc.returncode == 0, proc.stderr.decode()
        got += parse_consumed(proc.stdout)
    return got


CONSUMERS = {"kafka-python": consume_kafka_python, "confluent": consume_confluent,
             "aiokafka": consume_aiokafka, "kcat": consume_kcat}


def check_same(sent: list[Rec], got: list[Got], *, exact_timestamps: bool = True) -> None:
    """Every record exactly once, per-partition order kept, offsets contiguous from 0."""
    now = int(time.time() * 1000)
    for p in sorted({r.partition for r in sent} | {g.partition for g in got}):
        want = [r for r in sent if r.partition == p]
        have = sorted((g for g in got if g.partition == p), key=lambda g: g.offset)
        assert [g.offset for g in have] == list(range(len(want))), (p, have)
        assert [(g.key, g.value, g.headers) for g in have] == \
            [(r.key, r.value, r.headers) for r in want], p
        for r, g in zip(want, have):
            if r.timestamp is not None and exact_timestamps:
                assert g.timestamp == r.timestamp, (r, g)
            else:
                assert abs(g.timestamp - now) < 300_000, (r, g)
