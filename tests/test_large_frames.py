"""A large request is received in place (protocol.framing's open_frame; the plaintext loop
reads it with readv straight into one buffer of its size, its records decoded as views of
it): what arrives in pieces, with the next request right behind it, is served whole and in
order, and the log holds exactly the records sent, their offsets assigned in place."""
from __future__ import annotations

import os
import socket
import struct
import time
from typing import Any

from protocol.api_keys import ApiKey
from protocol.codec import decode_response, encode_request
from tests.protocol.samples import record_batch

_SIZE = struct.Struct(">i")


def _receive(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            assert chunk, "the broker closed the connection"
            out += chunk
        return out
    return exactly(_SIZE.unpack(exactly(4))[0])


def _produce(topic: str, batch: bytes, correlation_id: int) -> bytes:
    return encode_request(ApiKey.PRODUCE, 9, correlation_id, "large", {
        "transactional_id": None, "acks": 1, "timeout_ms": 30_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})


def _fetch(topic: str, offset: int, correlation_id: int) -> bytes:
    return encode_request(ApiKey.FETCH, 11, correlation_id, "large", {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 8 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
             "last_fetched_epoch": -1, "log_start_offset": -1,
             "partition_max_bytes": 8 << 20}]}],
        "forgotten_topics_data": [], "rack_id": ""})


def _create(sock: socket.socket, topic: str) -> None:
    sock.sendall(encode_request(ApiKey.CREATE_TOPICS, 4, 1, "large", {
        "topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1,
                    "assignments": [], "configs": []}],
        "timeout_ms": 30_000, "validate_only": False}))
    _, body = decode_response(ApiKey.CREATE_TOPICS, 4, _receive(sock))
    assert body.topics[0].error_code == 0


def _produced(sock: socket.socket, correlation_id: int) -> Any:
    cid, body = decode_response(ApiKey.PRODUCE, 9, _receive(sock))
    assert cid == correlation_id
    return body.responses[0].partition_responses[0]


def test_large_produce_in_pieces_then_a_pipelined_one_read_back(broker: Any) -> None:
    host, _, port = broker.bootstrap.rpartition(":")
    values = [os.urandom(1000) for _ in range(300)]  # ~300 KB: over the pool's small frame
    first, second = record_batch(values), record_batch([b"small"])
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        _create(sock, "large")
        big = _produce("large", first, 2)
        cut = [0, 3, 5, 70_000, 70_001, 200_000, len(big) - 1]
        for a, b in zip(cut, cut[1:]):  # the size split, then the body over several reads
            sock.sendall(big[a:b])
            time.sleep(0.02)
        sock.sendall(big[-1:] + _produce("large", second, 3))  # the next one right behind
        one, two = _produced(sock, 2), _produced(sock, 3)
        assert (one.error_code, one.base_offset) == (0, 0)
        assert (two.error_code, two.base_offset) == (0, len(values))
        stored = [_fetched(sock, offset, 4 + offset) for offset in (0, len(values))]
    # As sent but for what the leader patches outside the CRC: base offset, leader epoch.
    assert stored[0][:12] == first[:12] and stored[0][16:len(first)] == first[16:]
    assert struct.unpack_from(">q", stored[1])[0] == len(values)
    assert stored[1][8:12] == second[8:12] and stored[1][16:len(second)] == second[16:]


def _fetched(sock: socket.socket, offset: int, correlation_id: int) -> bytes:
    sock.sendall(_fetch("large", offset, correlation_id))
    _, body = decode_response(ApiKey.FETCH, 11, _receive(sock))
    part = body.responses[0].partitions[0]
    assert part.error_code == 0 and part.high_watermark == 301
    return bytes(part.records)
