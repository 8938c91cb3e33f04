"""A fixed load on the wire, for measuring a broker's CPU per record without a client's moods.

librdkafka decides how many records go into a request from its own timing (linger, in-flight
requests, how fast acks come back), so the same 500,000 records reach a broker as ~1 MB
requests in one turn and as many smaller ones in the next: the acks=all figures of the A/B
came out bimodal (0.6 and 1.4 CPU-s per million in turns of one build). Here every request is
the same prebuilt frame: Produce v9 with one batch of `BATCH_RECORDS` 1 KB records, one
request in flight, then Fetch v11 reading the partition back 1 MB at a time. The broker's log
is meant to live on tmpfs (the A/B puts it in /dev/shm), so the kernel's share is a memory
copy rather than writeback that other processes' writes move.
"""
from __future__ import annotations

import os
import socket
import struct
import time
from dataclasses import dataclass

from protocol.api_keys import ApiKey
from protocol.codec import decode_response, encode_request
from tests.protocol.samples import record_batch

BATCH_RECORDS = 1_000
PRODUCE_VERSION = 9
FETCH_VERSION = 11
_SIZE = struct.Struct(">i")


def produce_frame(topic: str, size: int, acks: int) -> bytes:
    values = [os.urandom(size) for _ in range(BATCH_RECORDS)]
    body = {"transactional_id": None, "acks": acks, "timeout_ms": 30_000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": 0, "records": record_batch(values, int(time.time() * 1000))}]}]}
    return encode_request(ApiKey.PRODUCE, PRODUCE_VERSION, 1, "raw-load", body)


def fetch_frame(topic: str, offset: int, max_bytes: int) -> bytes:
    body = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": max_bytes,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": max_bytes}]}],
            "forgotten_topics_data": [], "rack_id": ""}
    return encode_request(ApiKey.FETCH, FETCH_VERSION, 2, "raw-load", body)


def _receive(sock: socket.socket) -> bytearray:
    head = bytearray()
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        head += chunk
    (size,) = _SIZE.unpack(head)
    frame = bytearray(size)
    view = memoryview(frame)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:])
        if not n:
            raise ConnectionError("the broker closed the connection mid-response")
        got += n
    return frame


@dataclass(frozen=True)
class RawPhase:
    records: int
    seconds: float
    requests: int = 0


def _connect(bootstrap: str, buffer_bytes: int = 0) -> socket.socket:
    """`buffer_bytes`: SO_SNDBUF and SO_RCVBUF, set before connecting (the CPU gate's fixed
    buffers, tests/bench/instructions.py); 0 leaves the kernel's autotuning."""
    host, _, port = bootstrap.rpartition(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if buffer_bytes:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer_bytes)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer_bytes)
        sock.settimeout(60)
        sock.connect((host, int(port)))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except BaseException:
        sock.close()
        raise
    return sock


def produce(bootstrap: str, topic: str, requests: int, size: int = 1024,
            acks: int = 1, buffer_bytes: int = 0) -> RawPhase:
    """`requests` Produce requests of the same frame, one in flight; every partition answer
    must be error 0 (the topic exists: see `create`)."""
    frame = produce_frame(topic, size, acks)
    with _connect(bootstrap, buffer_bytes) as sock:
        t0 = time.perf_counter()
        for _ in range(requests):
            sock.sendall(frame)
            _, body = decode_response(ApiKey.PRODUCE, PRODUCE_VERSION, bytes(_receive(sock)))
            code = body.responses[0].partition_responses[0].error_code
            if code:
                raise RuntimeError(f"Produce to {topic} answered error {code}")
        return RawPhase(requests * BATCH_RECORDS, time.perf_counter() - t0, requests)


def fetch(bootstrap: str, topic: str, records: int, max_bytes: int = 1 << 20,
          buffer_bytes: int = 0, first: int = 0) -> RawPhase:
    """Read the partition from offset `first` until `records` records have come back, one
    Fetch in flight; the next offset is read from the last batch header in each answer, so
    the records themselves are never decoded here either."""
    offset, sent = first, 0
    with _connect(bootstrap, buffer_bytes) as sock:
        t0 = time.perf_counter()
        while offset < first + records:
            sent += 1
            sock.sendall(fetch_frame(topic, offset, max_bytes))
            _, body = decode_response(ApiKey.FETCH, FETCH_VERSION, bytes(_receive(sock)))
            part = body.responses[0].partitions[0]
            if part.error_code:
                raise RuntimeError(f"Fetch of {topic} answered error {part.error_code}")
            offset = _next_offset(part.records or b"", offset)
        return RawPhase(offset - first, time.perf_counter() - t0, sent)


def _next_offset(records: bytes, offset: int) -> int:
    """One past the last whole batch's last offset (base offset + last offset delta)."""
    pos, end = 0, len(records)
    while pos + 61 <= end:
        base, length = struct.unpack_from(">qi", records, pos)
        if pos + 12 + length > end:
            break
        (delta,) = struct.unpack_from(">i", records, pos + 23)
        offset = base + delta + 1
        pos += 12 + length
    return offset


def create(bootstrap: str, topic: str) -> None:
    """The one-partition topic, through CreateTopics (every build since the seed serves it)."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # led: a Produce now finds the partition
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if meta is not None and not meta.error and meta.partitions \
                and meta.partitions[0].leader >= 0:
            return
        time.sleep(0.05)
    raise RuntimeError(f"{topic} has no leader after 30 s")
