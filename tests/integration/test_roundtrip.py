"""Round trips through the broker with stock clients: kafka-python, confluent-kafka, aiokafka
and kcat, each producing and consuming keys, null keys, tombstones, empty values, headers
(with a null header value), explicit timestamps and every compression codec, over several
partitions; then every producer against every other client's consumer.

Consumers here are group-less (assign + seek to the beginning). confluent-kafka consumes with
its default isolation.level=read_committed, so these also check that Fetch returns the last
stable offset and empty aborted transactions.
"""
from __future__ import annotations

import itertools
import uuid

import pytest

from tests.integration.clients import (
    ADAPTERS, CLIENTS, CODECS, KCAT, Rec, check_same, unsupported_codec,
)
from tests.integration.raw import create_topic


T0 = 1_700_000_000_000
PARTITIONS = 3


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# kafka-python's producer refuses a None header value ("must be (str, bytes) tuples").
NULL_HEADER_VALUE = {"kafka-python": False, "confluent-kafka": True, "aiokafka": True, "kcat": True}


def records(producer: str) -> list[Rec]:
    """Partition 0 holds the edge cases; 1 and 2 hold ordered runs of keyed records.
    kcat cannot set timestamps: its records get the broker-checked "about now" instead."""
    ts = (lambda i: None) if producer == "kcat" else (lambda i: T0 + i)
    null_header = None if NULL_HEADER_VALUE[producer] else b"not-null"
    recs = [
        Rec(b"key-0", b"value-0", (("h1", b"one"), ("h2", b"")), ts(0), partition=0),
        Rec(None, b"no-key", (), ts(1), partition=0),
        Rec(b"tombstone", None, (), ts(2), partition=0),
        Rec(b"empty-value", b"", (), ts(3), partition=0),
        Rec(b"", b"empty-key", (), ts(4), partition=0),
        Rec(b"null-header", b"v", (("nh", null_header), ("h", b"x")), ts(5), partition=0),
        Rec(b"after", b"edge-cases", (), ts(6), partition=0),
    ]
    for p in (1, 2):
        recs += [Rec(f"k{p}-{i}".encode(), f"p{p}-value-{i:03d}".encode(), (), ts(100 + i),
                     partition=p) for i in range(20)]
    return recs


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", CLIENTS)
def test_same_client_roundtrip(broker, client: str, codec: str) -> None:
    reason = unsupported_codec(client, codec)
    if reason:
        pytest.skip(reason)
    topic = topic_name(f"rt-{client}-{codec}")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    sent = records(client)
    ADAPTERS[client].produce(broker.bootstrap, topic, sent, codec=codec)
    got = ADAPTERS[client].consume(broker.bootstrap, topic, list(range(PARTITIONS)), len(sent))
    check_same(sent, got)
    if codec != "none":  # stored as sent (KAFKA-18659: some librdkafka sent lz4 uncompressed)
        assert codec.upper() in stored_codecs(broker.bootstrap, topic, PARTITIONS)


def stored_codecs(bootstrap: str, topic: str, partitions: int) -> set[str]:
    """The codecs of the batches the broker holds, read back with a raw Fetch of each
    partition from its leader (on a node, the worker that leads it)."""
    from protocol.api_keys import ApiKey
    from protocol.messages import APIS
    from protocol.records.batch import iter_batches
    from tests.integration.raw import leader_address, send_request
    codecs = set()
    for p in range(partitions):
        body = APIS[ApiKey.FETCH].request.default(12)
        body.update({"max_wait_ms": 0, "min_bytes": 0, "topics": [{"topic": topic, "partitions": [
            {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
             "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1}]}]})
        resp = send_request(leader_address(bootstrap, topic, p), ApiKey.FETCH, 12, body)
        (part,) = resp.responses[0].partitions
        assert part.error_code == 0, part
        codecs |= {header.compression.name for _, header in iter_batches(part.records or b"")}
    return codecs


# Each producer uses a codec it supports here, so the consumers also decompress it.
CROSS_CODEC = {"kafka-python": "gzip", "confluent-kafka": "lz4", "aiokafka": "zstd",
               "kcat": "snappy"}


@pytest.mark.parametrize("producer,consumer",
                         [pc for pc in itertools.permutations(CLIENTS, 2)])
def test_cross_client(broker, producer: str, consumer: str) -> None:
    codec = CROSS_CODEC[producer]
    if unsupported_codec(producer, codec) or unsupported_codec(consumer, codec):
        codec = "gzip"  # the one codec every client here can write and read
    topic = topic_name(f"x-{producer}-{consumer}")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    sent = records(producer)
    ADAPTERS[producer].produce(broker.bootstrap, topic, sent, codec=codec)
    got = ADAPTERS[consumer].consume(broker.bootstrap, topic, list(range(PARTITIONS)), len(sent))
    check_same(sent, got)


def test_mixed_producers_one_partition(broker) -> None:
    """Batches from every client, each in its own codec, interleaved in one partition, read
    back in append order by every consumer."""
    topic = topic_name("mixed")
    create_topic(broker.bootstrap, topic, 1)
    sent: list[Rec] = []
    for round_ in range(2):
        for client in CLIENTS:
            codec = CROSS_CODEC[client]
            if unsupported_codec(client, codec):
                codec = "none"
            recs = [Rec(f"{client}-{round_}-{i}".encode(), f"v{i}".encode(), (),
                        None if client == "kcat" else T0 + i, partition=0) for i in range(5)]
            ADAPTERS[client].produce(broker.bootstrap, topic, recs, codec=codec)
            sent += recs
    readers = [c for c in CLIENTS
               if not any(unsupported_codec(c, codec) for codec in CROSS_CODEC.values())]
    assert "confluent-kafka" in readers and "kcat" in readers
    for client in readers:
        got = ADAPTERS[client].consume(broker.bootstrap, topic, [0], len(sent))
        check_same(sent, got)


def test_auto_created_topic_roundtrip(broker) -> None:
    """A producer's Metadata request creates the topic (auto.create.topics.enable=true)."""
    topic = topic_name("auto")
    sent = [Rec(b"k", f"v{i}".encode(), (), T0 + i, partition=0) for i in range(10)]
    ADAPTERS["confluent-kafka"].produce(broker.bootstrap, topic, sent)
    check_same(sent, ADAPTERS["kafka-python"].consume(broker.bootstrap, topic, [0], len(sent)))


# -- fetch semantics seen through the clients --------------------------------------------------

def _one_compressed_batch(bootstrap: str, topic: str, count: int) -> list[Rec]:
    """`count` records in a single gzip batch (raw Produce, so the batching is certain)."""
    from protocol.api_keys import ApiKey
    from protocol.records.batch import Compression
    from protocol.records.record import build_batch
    from protocol.records.record import Record
    from tests.integration.raw import leader_address, send_request
    recs = [Rec(f"k{i}".encode(), f"v{i}".encode(), (("i", str(i).encode()),), T0 + i, partition=0)
            for i in range(count)]
    batch = build_batch([Record(r.key, r.value, r.headers, r.timestamp) for r in recs],
                        compression=Compression.GZIP)
    resp = send_request(leader_address(bootstrap, topic, 0), ApiKey.PRODUCE, 9, {
        "transactional_id": None, "acks": -1, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    assert resp.responses[0].partition_responses[0].error_code == 0
    return recs


def _consume_from(client: str, bootstrap: str, topic: str, offset: int, count: int) -> list:
    """Records from `offset` (assign at an offset, no group)."""
    import asyncio
    import time
    if client == "confluent-kafka":
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        c.assign([TopicPartition(topic, 0, offset)])
        out: list = []
        deadline = time.monotonic() + 10
        while len(out) < count and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                out.append((m.offset(), m.value(), m.timestamp()))
        c.close()
        return out
    if client == "kafka-python":
        from kafka import KafkaConsumer, TopicPartition
        c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                          auto_offset_reset="earliest", max_partition_fetch_bytes=1024)
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, offset)
        out = []
        deadline = time.monotonic() + 10
        while len(out) < count and time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=200).values():
                out += [(m.offset, m.value, (m.timestamp_type, m.timestamp)) for m in msgs]
        c.close()
        return out
    if client == "aiokafka":
        from aiokafka import AIOKafkaConsumer, TopicPartition as ATP

        async def main() -> list:
            c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                 auto_offset_reset="earliest", isolation_level="read_committed")
            await c.start()
            tp = ATP(topic, 0)
            c.assign([tp])
            c.seek(tp, offset)
            out: list = []
            deadline = time.monotonic() + 10
            while len(out) < count and time.monotonic() < deadline:
                for msgs in (await c.getmany(timeout_ms=200)).values():
                    out += [(m.offset, m.value, (m.timestamp_type, m.timestamp)) for m in msgs]
            await c.stop()
            return out

        return asyncio.run(main())
    import subprocess
    proc = subprocess.run([KCAT, "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", str(offset),
                           "-e", "-q", "-f", r"%o\t%s\t%T\n"], capture_output=True, timeout=15)
    assert proc.returncode == 0, proc.stderr.decode()
    return [(int(o), v.encode(), (None, int(t))) for o, v, t in
            (line.split("\t") for line in proc.stdout.decode().split("\n")[:-1])]


@pytest.mark.parametrize("client", CLIENTS)
def test_fetch_from_the_middle_of_a_compressed_batch(broker, client: str) -> None:
    """The broker returns the whole batch holding the fetch offset; the client drops the
    records before it."""
    if unsupported_codec(client, "gzip"):
        pytest.skip(unsupported_codec(client, "gzip"))
    topic = topic_name("mid")
    create_topic(broker.bootstrap, topic, 1)
    recs = _one_compressed_batch(broker.bootstrap, topic, 10)
    got = _consume_from(client, broker.bootstrap, topic, 6, 4)
    assert [(o, v) for o, v, _ in got] == [(i, recs[i].value) for i in range(6, 10)]


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python", "aiokafka"])
def test_out_of_range_offset_resets_to_earliest(broker, client: str) -> None:
    topic = topic_name("oor")
    create_topic(broker.bootstrap, topic, 1)
    recs = _one_compressed_batch(broker.bootstrap, topic, 5)
    got = _consume_from(client, broker.bootstrap, topic, 100, 5)
    assert [(o, v) for o, v, _ in got] == [(i, r.value) for i, r in enumerate(recs)]


def test_batch_larger_than_partition_fetch_limit_is_still_returned(broker) -> None:
    """kafka-python with max_partition_fetch_bytes=1024 reads a 20 kB record: the first batch
    is returned whole whatever the limits (KIP-74)."""
    topic = topic_name("big")
    create_topic(broker.bootstrap, topic, 1)
    big = Rec(b"big", b"x" * 20_000, (), T0, partition=0)
    small = Rec(b"small", b"y", (), T0 + 1, partition=0)
    ADAPTERS["confluent-kafka"].produce(broker.bootstrap, topic, [big, small])
    got = _consume_from("kafka-python", broker.bootstrap, topic, 0, 2)
    assert [(o, v) for o, v, _ in got] == [(0, big.value), (1, small.value)]


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_log_append_time_topic(broker, client: str) -> None:
    """With message.timestamp.type=LogAppendTime the broker stamps each batch; consumers see
    its time and the LogAppendTime type, and the batch CRC still checks."""
    import time
    topic = topic_name("lat")
    create_topic(broker.bootstrap, topic, 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    # old timestamps
    sent = [Rec(b"k", f"v{i}".encode(), (), T0 + i, partition=0) for i in range(3)]
    ADAPTERS[client].produce(broker.bootstrap, topic, sent)
    after = int(time.time() * 1000)
    got = _consume_from(client, broker.bootstrap, topic, 0, 3)
    assert [v for _, v, _ in got] == [r.value for r in sent]
    log_append_time = 2 if client == "confluent-kafka" else 1  # each client's own numbering
    for _, _, (ts_type, ts) in got:
        assert ts_type == log_append_time
        assert before - 1000 <= ts <= after + 1000


@pytest.mark.parametrize("stored,sent", [("gzip", "none"), ("uncompressed", "zstd"),
                                         ("lz4", "snappy")])
def test_topic_compression_type_recompresses(broker, stored: str, sent: str) -> None:
    """A topic's compression.type other than "producer" stores batches in that codec whatever
    the producer used; records, keys, headers, timestamps and the idempotent producer's
    sequence survive the rebuild."""
    topic = topic_name(f"codec-{stored}")
    create_topic(broker.bootstrap, topic, 1, {"compression.type": stored})
    sent_recs = [Rec(f"k{i}".encode(), f"v{i}".encode(), (("h", b"x"),), T0 + i, partition=0)
                 for i in range(20)]
    for half in (sent_recs[:10], sent_recs[10:]):  # two batches, sequences 0-9 and 10-19
        ADAPTERS["confluent-kafka"].produce(broker.bootstrap, topic, half, codec=sent,
                                            idempotent=True)
    want = "NONE" if stored == "uncompressed" else stored.upper()
    assert stored_codecs(broker.bootstrap, topic, 1) == {want}
    check_same(sent_recs, ADAPTERS["confluent-kafka"].consume(broker.bootstrap, topic, [0], 20))
