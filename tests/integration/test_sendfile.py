"""Fetch responses sent with os.sendfile: the connection's send path, and a real broker."""
from __future__ import annotations

import os
import socket
import tempfile

import pytest
import trio

from protocol.api_keys import ApiKey
from protocol.primitives import FileRegion
from protocol.records import Record, build_batch
from pybroker.network.connection import send_parts
from pybroker.network.errors import CloseConnection
from tests.integration.raw import RawConnection, create_topic, leader_address


class _File:
    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd

    def fileno(self) -> int:
        if self.fd is None:
            raise ValueError("closed")
        return self.fd


async def _send_and_receive(parts: list, total: int) -> bytes:
    a, b = trio.socket.socketpair()
    # A small send buffer forces partial sends and waits for writability.
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    received = bytearray()
    async with trio.open_nursery() as nursery:
        async def reader() -> None:
            while len(received) < total:
                chunk = await b.recv(65536)
                if not chunk:
                    break
                received.extend(chunk)
        nursery.start_soon(reader)
        await send_parts(a.fileno(), parts)
    a.close()
    b.close()
    return bytes(received)


async def test_send_parts_mixes_buffers_and_regions() -> None:
    data = os.urandom(300_000)
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.flush()
        src = _File(f.fileno())
        parts = [b"head", FileRegion(src, 10, 200_000), b"mid", bytearray(b"dle"),
                 FileRegion(src, 250_000, 50_000), b"tail"]
        got = await _send_and_receive(parts, 4 + 200_000 + 6 + 50_000 + 4)
    assert got == b"head" + data[10:200_010] + b"middle" + data[250_000:300_000] + b"tail"


async def test_send_parts_skips_empty_buffers() -> None:
    """An empty record set is a part of its own; a gathered write of nothing but empty
    buffers returns 0, which must not be taken for "try again"."""
    assert await _send_and_receive([b"head", b"", bytearray()], 4) == b"head"
    assert await _send_and_receive([b"", b"a" * 100_000, b""], 100_000) == b"a" * 100_000


async def test_send_parts_closes_on_a_closed_or_short_file() -> None:
    with tempfile.TemporaryFile() as f:
        f.write(b"x" * 1000)
        f.flush()
        closed = _File(f.fileno())
        closed.fd = None
        with pytest.raises(BaseExceptionGroup) as exc:
            await _send_and_receive([b"h", FileRegion(closed, 0, 10)], 11)
        assert exc.group_contains(CloseConnection, match="closed")
        with pytest.raises(BaseExceptionGroup) as exc:  # the file is shorter than the region
            await _send_and_receive([b"h", FileRegion(_File(f.fileno()), 500, 1000)], 1001)
        assert exc.group_contains(CloseConnection, match="truncated")


def test_large_batches_fetched_byte_for_byte(broker) -> None:  # type: ignore[no-untyped-def]
    """Batches over the sendfile threshold come back exactly as stored: the producer's bytes
    but for the base offset and the leader epoch the broker stamps."""
    create_topic(broker.bootstrap, "big", 1)
    sent = []
    with RawConnection(leader_address(broker.bootstrap, "big", 0)) as conn:
        for i in range(3):
            batch = build_batch([Record(b"k%d" % j, os.urandom(30_000)) for j in range(4)])
            sent.append(batch)
            resp = conn.request(ApiKey.PRODUCE, 9, {
                "transactional_id": None, "acks": -1, "timeout_ms": 10000,
                "topic_data": [{"name": "big", "partition_data": [
                    {"index": 0, "records": batch}]}]})
            assert resp.responses[0].partition_responses[0].error_code == 0
        for version in (4, 12):
            resp = conn.request(ApiKey.FETCH, version, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 10**7,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": "big", "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                     "last_fetched_epoch": -1, "log_start_offset": -1,
                     "partition_max_bytes": 10**7}]}],
                "forgotten_topics_data": [], "rack_id": ""})
            records = bytes(resp.responses[0].partitions[0].records)
            assert len(records) == sum(len(b) for b in sent)
            pos = 0
            for i, batch in enumerate(sent):
                got = records[pos:pos + len(batch)]
                assert int.from_bytes(got[:8], "big") == 4 * i  # base offset assigned
                assert got[8:12] == batch[8:12] and got[16:] == batch[16:]
                pos += len(batch)


def _produce_small_batches(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """`count` batches of one ~1 KB record each: small batches, ~`count` KB in all."""
    values = [b"%05d" % i + os.urandom(1000) for i in range(count)]
    with RawConnection(leader_address(bootstrap, topic, 0)) as conn:
        for value in values:
            resp = conn.request(ApiKey.PRODUCE, 9, {
                "transactional_id": None, "acks": -1, "timeout_ms": 10000,
                "topic_data": [{"name": topic, "partition_data": [
                    {"index": 0, "records": build_batch([Record(None, value)])}]}]})
            assert resp.responses[0].partition_responses[0].error_code == 0
    return values


def _fetch(conn: RawConnection, version: int, topic: str, offset: int,
           partition_max_bytes: int) -> tuple[bytes, int]:
    resp = conn.request(ApiKey.FETCH, version, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 10**7,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
             "last_fetched_epoch": -1, "log_start_offset": -1,
             "partition_max_bytes": partition_max_bytes}]}],
        "forgotten_topics_data": [], "rack_id": ""})
    p = resp.responses[0].partitions[0]
    assert p.error_code == 0
    return bytes(p.records or b""), p.high_watermark


def test_small_batches_at_the_tail_fetched_byte_for_byte(broker) -> None:  # type: ignore[no-untyped-def]
    """The rest of a segment in small batches (a region sent with sendfile) and a part of it
    (whole batches read into memory, answered as a view) give the same bytes, batch for
    batch, as reading the log a batch at a time; a stock client reads every record."""
    from kafka import KafkaConsumer, TopicPartition
    from protocol.records.batch import iter_batches

    create_topic(broker.bootstrap, "small-tail", 1)
    values = _produce_small_batches(broker.bootstrap, "small-tail", 150)  # ~160 KB
    with RawConnection(leader_address(broker.bootstrap, "small-tail", 0)) as conn:
        one_by_one = b""
        offset = 0
        while offset < len(values):  # a limit below one batch: the first batch alone
            records, hw = _fetch(conn, 11, "small-tail", offset, 1)
            assert records and hw == len(values)
            one_by_one += records
            offset += 1
        for version in (4, 12):
            whole, _ = _fetch(conn, version, "small-tail", 0, 10**7)  # the tail: a region
            assert whole == one_by_one
            part, _ = _fetch(conn, version, "small-tail", 7, 50_000)  # in memory, a view
            starts = [pos for pos, _ in iter_batches(one_by_one)]
            assert len(starts) == len(values)
            start = starts[7]
            assert 0 < len(part) <= 50_000 and one_by_one[start:start + len(part)] == part
            assert start + len(part) in starts  # whole batches only
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=10000)
    tp = TopicPartition("small-tail", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got = [m.value for m in consumer]
    consumer.close()
    assert got == values
