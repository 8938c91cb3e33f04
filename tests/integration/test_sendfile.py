"""Fetch responses sent with os.sendfile: the connection's send path, and a real broker."""
from __future__ import annotations

import math
import os
import socket
import struct
import tempfile

import pytest
import trio
import trio.testing

from protocol.api_keys import ApiKey
from protocol.codec import decode_response, encode_request
from protocol.primitives import FileRegion
from protocol.records import Record, build_batch
from pybroker.network.connection import send_parts
from pybroker.network.errors import CloseConnection
from tests.integration.raw import RawConnection, create_topic


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


class _CorkedPair:
    """A loopback TCP connection: `sender` (non-blocking, TCP_NODELAY, as the broker's) and
    `receiver`, and a cork for `send_parts` that records each call."""

    def __init__(self) -> None:
        with socket.create_server(("127.0.0.1", 0)) as listener:
            self.receiver = socket.create_connection(listener.getsockname())
            self.sender, _ = listener.accept()
        self.sender.setblocking(False)
        self.sender.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.calls: list[int] = []

    def cork(self, on: int) -> None:
        self.calls.append(on)
        self.sender.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, on)

    def corked(self) -> bool:
        return bool(self.sender.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK))

    def close(self) -> None:
        self.sender.close()
        self.receiver.close()


async def test_send_parts_corks_only_an_answer_with_a_region() -> None:
    pair = _CorkedPair()
    data = os.urandom(100_000)
    try:
        with tempfile.TemporaryFile() as f:
            f.write(data)
            f.flush()
            await send_parts(pair.sender.fileno(), [b"head", b"only"], pair.cork)
            assert pair.calls == []  # no region: no system call more
            await send_parts(pair.sender.fileno(),
                             [b"head", FileRegion(_File(f.fileno()), 0, 100_000), b"end"],
                             pair.cork)
            assert pair.calls == [1, 0] and not pair.corked()
            want = 8 + 4 + 100_000 + 3
            got = bytearray()
            while len(got) < want:
                got += await trio.to_thread.run_sync(pair.receiver.recv, want - len(got))
        assert bytes(got) == b"headonly" + b"head" + data + b"end"
    finally:
        pair.close()


async def test_send_parts_never_waits_corked() -> None:
    """Bytes a cork holds wait for the kernel's ~200 ms timer unless it is cleared: so an
    answer waiting for a full socket (its client reads slowly, or has room for less than a
    segment) is uncorked while it waits, and one that fails (a segment closed under it, the
    task cancelled) is uncorked as it ends."""
    pair = _CorkedPair()
    try:
        with tempfile.TemporaryFile() as f:
            f.write(b"x" * 1000)
            f.flush()
            closed = _File(f.fileno())
            closed.fd = None
            with pytest.raises(CloseConnection):
                await send_parts(pair.sender.fileno(), [b"h", FileRegion(closed, 0, 10)],
                                 pair.cork)
            assert pair.calls == [1, 0] and not pair.corked()
        # Nobody reads: the answer fills both sockets' buffers and waits to be writable.
        big = os.urandom(16 << 20)
        pair.calls.clear()
        with tempfile.TemporaryFile() as f:
            f.write(big)
            f.flush()
            region = FileRegion(_File(f.fileno()), 0, len(big))
            async with trio.open_nursery() as nursery:
                nursery.start_soon(send_parts, pair.sender.fileno(), [b"h", region, b"t"],
                                   pair.cork)
                await trio.testing.wait_all_tasks_blocked()
                assert pair.calls[0] == 1 and pair.calls[-1] == 0 and not pair.corked()
                nursery.cancel_scope.cancel()
        assert not pair.corked()
    finally:
        pair.close()


def test_large_batches_fetched_byte_for_byte(broker) -> None:  # type: ignore[no-untyped-def]
    """Batches over the sendfile threshold come back exactly as stored: the producer's bytes
    but for the base offset and the leader epoch the broker stamps."""
    create_topic(broker.bootstrap, "big", 1)
    sent = []
    with RawConnection(broker.bootstrap) as conn:
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
    with RawConnection(bootstrap) as conn:
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
    with RawConnection(broker.bootstrap) as conn:
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


def _tcp_info(sock: socket.socket) -> tuple[int, int]:
    """(tcpi_rcv_mss, tcpi_data_segs_in) of Linux's struct tcp_info: the size of the peer's
    full segments as this side measured them, and how many segments with data it received."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 160)
    return struct.unpack_from("I", info, 20)[0], struct.unpack_from("I", info, 152)[0]


def test_a_sendfile_answer_arrives_in_full_segments(broker) -> None:  # type: ignore[no-untyped-def]
    """A Fetch v12 answer of a region (header, records by sendfile, the 3 bytes of tagged
    fields after them) reaches the client in as few TCP segments as its bytes fill: neither
    the header nor the trailer travels as a segment of its own. Counted by the client's
    kernel (on loopback, 4 segments a ~200 KB answer; 8-10 uncorked); the client's receive
    buffer is large enough that its window never splits an answer."""
    create_topic(broker.bootstrap, "corked", 1)
    batch = build_batch([Record(b"k%d" % j, os.urandom(50_000)) for j in range(4)])
    with RawConnection(broker.bootstrap, receive_buffer=4 << 20) as conn:
        resp = conn.request(ApiKey.PRODUCE, 9, {
            "transactional_id": None, "acks": -1, "timeout_ms": 10000,
            "topic_data": [{"name": "corked", "partition_data": [
                {"index": 0, "records": batch}]}]})
        assert resp is not None and resp.responses[0].partition_responses[0].error_code == 0
        counted = []
        for cid in range(1, 6):
            _, before = _tcp_info(conn.sock)
            conn.send_frame(encode_request(ApiKey.FETCH, 12, cid, "raw-test", {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 10**7,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": "corked", "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                     "last_fetched_epoch": -1, "log_start_offset": -1,
                     "partition_max_bytes": 10**7}]}],
                "forgotten_topics_data": [], "rack_id": ""}))
            frame = conn.read_frame()
            mss, after = _tcp_info(conn.sock)
            got_cid, decoded = decode_response(ApiKey.FETCH, 12, frame)
            assert got_cid == cid
            assert len(decoded.responses[0].partitions[0].records) == len(batch)
            counted.append((after - before, math.ceil((4 + len(frame)) / mss)))
    assert all(segments == fewest for segments, fewest in counted), counted
