"""Bad input never takes the broker down (issue #3), over raw sockets to an in-thread broker.

A malformed frame gets an error response where the protocol has one, otherwise its connection
is closed; oversized frames are refused before being read; stalled and idle connections cost
nothing and are closed in time. After every case a fresh client still gets served.
"""
from __future__ import annotations

import random
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat.wire import read_exact, read_frame
from protocol.api_keys import ApiKey
from protocol.codec import decode_response, encode_request
from protocol.errors import ErrorCode
from protocol.messages import APIS
from protocol.records.record import build_batch
from protocol.records.record import Record
from tests.helpers import serving_broker
from tests.integration.raw import leader_address

SIZE = struct.Struct(">i")


# -- raw socket helpers --------------------------------------------------------------------------

def _address(info) -> tuple[str, int]:  # type: ignore[no-untyped-def]
    return info.host, info.port


def connect(info, timeout: float = 10) -> socket.socket:  # type: ignore[no-untyped-def]
    return socket.create_connection(_address(info), timeout=timeout)


def roundtrip(sock: socket.socket, api_key: int, version: int, body: dict,
              correlation_id: int = 7):  # type: ignore[no-untyped-def]
    sock.sendall(encode_request(api_key, version, correlation_id, "bad-input-test", body))
    cid, decoded = decode_response(api_key, version, read_frame(sock))
    assert cid == correlation_id
    return decoded


def assert_closed(sock: socket.socket, timeout: float = 5) -> None:
    """The broker closes the connection (EOF or reset) within `timeout`, sending nothing."""
    sock.settimeout(timeout)
    try:
        data = sock.recv(65536)
    except (ConnectionResetError, BrokenPipeError):
        return
    except socket.timeout:
        raise AssertionError(f"connection still open after {timeout}s") from None
    assert data == b"", f"expected the connection closed, got {data[:60]!r}"


def api_versions_frame(correlation_id: int = 1, client_id: str = "bad-input-test") -> bytes:
    return encode_request(ApiKey.API_VERSIONS, 0, correlation_id, client_id, {})


def assert_alive(info, *, produce: bool = True) -> None:  # type: ignore[no-untyped-def]
    """A fresh ApiVersions and Metadata round trip, and a produce/consume with a stock client."""
    with connect(info) as sock:
        versions = roundtrip(sock, ApiKey.API_VERSIONS, 0, {})
        assert versions.error_code == 0
        assert any(k.api_key == ApiKey.PRODUCE for k in versions.api_keys)
        metadata = roundtrip(sock, ApiKey.METADATA, 1, {"topics": None}, correlation_id=8)
        assert sorted(b.port for b in metadata.brokers) == [port for _, port in info.brokers]
    if produce:
        produce_consume(info.bootstrap, f"alive-{time.monotonic_ns()}", 5)


def produce_consume(bootstrap: str, topic: str, count: int) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    delivered: list[int] = []
    for i in range(count):
        producer.produce(topic, value=f"{topic}-{i}".encode(), partition=0,
                         on_delivery=lambda err, msg: delivered.append(0 if err else 1))
    assert producer.flush(30) == 0
    assert delivered == [1] * count
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bad-input",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            got.append(msg.value())
        assert got == [f"{topic}-{i}".encode() for i in range(count)]
    finally:
        consumer.close()


def create_topic(info, name: str) -> None:  # type: ignore[no-untyped-def]
    """Auto-create a topic the way clients do: a Metadata request that allows it."""
    with connect(info) as sock:
        deadline = time.monotonic() + 10
        while True:
            md = roundtrip(sock, ApiKey.METADATA, 4, {"topics": [{"name": name}],
                                                      "allow_auto_topic_creation": True})
            if md.topics[0].error_code == 0 and md.topics[0].partitions:
                return
            assert time.monotonic() < deadline, md
            time.sleep(0.1)


def rss_bytes(info) -> int:  # type: ignore[no-untyped-def]
    """The resident memory of the process that serves `info` (a node's: its first worker)."""
    pid = "self" if info.process is None else info.process.serving_pid
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator:
    """Start a broker with overrides (in a thread); all are stopped at the end of the test."""
    from contextlib import ExitStack

    with ExitStack() as stack:
        counter = iter(range(100))

        def start(**overrides: str):  # type: ignore[no-untyped-def]
            return stack.enter_context(
                serving_broker(tmp_path / f"logs-{next(counter)}", **overrides))

        yield start


# -- frames the broker must refuse ---------------------------------------------------------------

def test_2gb_frame_is_refused_without_buffering(broker) -> None:  # type: ignore[no-untyped-def]
    before = rss_bytes(broker)
    sent = 0
    with connect(broker) as sock:
        sock.sendall(SIZE.pack(0x7FFFFFFF) + b"\0" * 1024)
        chunk = b"\xab" * (1 << 20)
        try:
            for _ in range(256):  # try to push 256 MiB after the size prefix
                sock.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        else:
            assert_closed(sock)
    assert sent < 64 << 20, f"the broker kept reading ({sent} bytes) for a refused frame"
    assert rss_bytes(broker) - before < 64 << 20
    assert_alive(broker)


@pytest.mark.parametrize("size", [-1, -2**31, 0x7FFFFFFF, 104857601])
def test_bad_size_prefix_closes_the_connection(broker, size: int) -> None:  # type: ignore[no-untyped-def]
    with connect(broker) as sock:
        sock.sendall(SIZE.pack(size) + b"\x00\x12\x00\x00")
        assert_closed(sock)
    assert_alive(broker)


def test_random_bytes(broker) -> None:  # type: ignore[no-untyped-def]
    """Random streams: whatever they announce, the broker survives them."""
    rng = random.Random(3)
    for _ in range(30):
        with connect(broker, timeout=2) as sock:
            sock.sendall(rng.randbytes(rng.randrange(1, 4000)))
            try:
                sock.recv(65536)
            except (socket.timeout, ConnectionResetError):
                pass
    # Frames with a valid size but random content: every one closes its connection.
    for _ in range(30):
        payload = rng.randbytes(rng.randrange(0, 300))
        with connect(broker) as sock:
            sock.sendall(SIZE.pack(len(payload)) + payload)
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                data = b""
            if data:  # a random frame that happened to decode: a framed response
                assert len(data) >= 4 and SIZE.unpack_from(data)[0] >= 4
    assert_alive(broker)


def test_random_bodies_for_every_api(broker) -> None:  # type: ignore[no-untyped-def]
    """A valid header for every declared (API, version) followed by a random body: the broker
    answers or closes that connection, and stays up."""
    rng = random.Random(11)
    for key, api in APIS.items():
        high = api.versions.high if api.versions.high is not None else api.versions.low
        for version in range(api.versions.low, high + 1):
            flexible = version in api.flexible
            header = struct.pack(">hhi", key, version, 99) + struct.pack(">h", 4) + b"fuzz"
            if flexible:
                header += b"\x00"
            for _ in range(2):
                body = rng.randbytes(rng.randrange(0, 64))
                frame = header + body
                with connect(broker, timeout=5) as sock:
                    sock.sendall(SIZE.pack(len(frame)) + frame)
                    try:
                        sock.recv(65536)
                    except (socket.timeout, ConnectionResetError):
                        pass
    assert_alive(broker)


def _send_and_maybe_read(info, frame: bytes, timeout: float) -> None:  # type: ignore[no-untyped-def]
    with connect(info, timeout=timeout) as sock:
        sock.sendall(frame)
        try:
            size = SIZE.unpack(read_exact(sock, 4))[0]
            read_exact(sock, size)
        except (socket.timeout, ConnectionError):
            pass  # closed, or no response due (acks=0) or not yet (a long-polling Fetch)


@pytest.mark.parametrize("examples", [
    pytest.param(3, id="quick"),
    pytest.param(40, id="thorough", marks=pytest.mark.slow),
])
def test_well_formed_random_requests_for_every_api(broker, examples: int) -> None:  # type: ignore[no-untyped-def]
    """Requests that decode (random field values for every declared API and version): each is
    answered or closes its own connection; none takes the broker down. This found a Metadata
    v10/v11 response that could not be encoded (a topic id without a name) crashing the
    server's nursery."""
    from hypothesis import HealthCheck, given, settings

    from tests.protocol.strategies import message_strategy

    for key, api in APIS.items():
        high = api.versions.high if api.versions.high is not None else api.versions.low
        for version in range(api.versions.low, high + 1):
            @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
                      suppress_health_check=list(HealthCheck))
            @given(message_strategy(api.request, version))
            def send(body: dict) -> None:
                try:
                    frame = encode_request(key, version, 5, "fuzz", body)
                except Exception:  # noqa: BLE001 - a value the schema cannot carry
                    return
                _send_and_maybe_read(broker, frame, timeout=0.3)

            send()
    assert_alive(broker)


def test_metadata_by_topic_id_before_v12(broker) -> None:  # type: ignore[no-untyped-def]
    """Names are nullable in Metadata responses from v12 only; a v10 request naming a topic by
    id alone must not break the broker (answered or closed, but the broker stays up)."""
    import uuid

    body = {"topics": [{"topic_id": uuid.uuid4(), "name": None}],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    for version in (10, 11, 12):
        frame = encode_request(ApiKey.METADATA, version, 5, "bad-input-test", body)
        _send_and_maybe_read(broker, frame, timeout=2)
    assert_alive(broker)


def test_unknown_api_key(broker) -> None:  # type: ignore[no-untyped-def]
    frame = struct.pack(">hhi", 999, 0, 5) + struct.pack(">h", 4) + b"test"
    with connect(broker) as sock:
        sock.sendall(SIZE.pack(len(frame)) + frame)
        assert_closed(sock)
    assert_alive(broker)


def test_api_versions_v99_gets_unsupported_version(broker) -> None:  # type: ignore[no-untyped-def]
    # A newer client sends its own newest ApiVersions with a v2 (flexible) header.
    frame = (struct.pack(">hhi", ApiKey.API_VERSIONS, 99, 42) + struct.pack(">h", 4) + b"test"
             + b"\x00" + b"\x05pyfu\x020\x00")
    with connect(broker) as sock:
        sock.sendall(SIZE.pack(len(frame)) + frame)
        cid, body = decode_response(ApiKey.API_VERSIONS, 0, read_frame(sock))
        assert cid == 42
        assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
        entries = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        assert ApiKey.API_VERSIONS in entries
        low, high = entries[ApiKey.API_VERSIONS]
        assert low == 0 and high >= 3
        # The client retries with a version from that range, on the same connection.
        again = roundtrip(sock, ApiKey.API_VERSIONS, high,
                          {"client_software_name": "t", "client_software_version": "1"})
        assert again.error_code == 0
    assert_alive(broker)


def _produce_request(topic: str, version: int = 7) -> bytes:
    batch = build_batch([Record(b"k", b"value-" + bytes([i]) * 50) for i in range(5)])
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
    return encode_request(ApiKey.PRODUCE, version, 3, "bad-input-test", body)


@pytest.mark.parametrize("cut", [1, 10, 40, 100])
def test_truncated_produce_body(broker, cut: int) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker, "truncated")
    frame = _produce_request("truncated")[4:]
    short = frame[:-cut]
    host, _, port = leader_address(broker.bootstrap, "truncated", 0).rpartition(":")
    leader = (host, int(port))  # a node's worker leads it
    with socket.create_connection(leader, timeout=10) as sock:
        sock.sendall(SIZE.pack(len(short)) + short)
        assert_closed(sock)
    # The whole request is still served, and nothing of the cut one was stored.
    with socket.create_connection(leader, timeout=10) as sock:
        sock.sendall(SIZE.pack(len(frame)) + frame)
        _, response = decode_response(ApiKey.PRODUCE, 7, read_frame(sock))
        part = response.responses[0].partition_responses[0]
        assert part.error_code == 0
        assert part.base_offset == 0
    assert_alive(broker)


def test_request_max_bytes_boundary(broker_factory) -> None:  # type: ignore[no-untyped-def]
    limit = 10000
    info = broker_factory(socket_request_max_bytes=str(limit))

    def frame_of(size: int) -> bytes:
        # ApiVersions v0: header (2+2+4+2 bytes + client id), empty body.
        frame = api_versions_frame(client_id="c" * (size - 10))
        assert SIZE.unpack_from(frame)[0] == size
        return frame

    for size in (limit - 1, limit):
        with connect(info) as sock:
            sock.sendall(frame_of(size))
            _, body = decode_response(ApiKey.API_VERSIONS, 0, read_frame(sock))
            assert body.error_code == 0
    with connect(info) as sock:
        sock.sendall(SIZE.pack(limit + 1))  # refused on the size alone, before the payload
        assert_closed(sock)
    with connect(info) as sock:
        try:
            sock.sendall(frame_of(limit + 1))
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert_closed(sock)
    assert_alive(info)


# -- slow and silent clients ---------------------------------------------------------------------

def test_stalled_connections_do_not_block_others(broker) -> None:  # type: ignore[no-untyped-def]
    frame = _produce_request("stalled")
    stalled = []
    try:
        for _ in range(50):
            sock = connect(broker)
            sock.sendall(frame[:len(frame) // 2])  # size prefix and half the payload
            stalled.append(sock)
        t0 = time.monotonic()
        produce_consume(broker.bootstrap, "busy", 100)
        assert time.monotonic() - t0 < 20
        assert_alive(broker)
        # The stalled requests were never answered.
        for sock in stalled[:5]:
            sock.settimeout(0.05)
            with pytest.raises(socket.timeout):
                sock.recv(1)
    finally:
        for sock in stalled:
            sock.close()
    assert_alive(broker)


def test_idle_connections_are_closed(broker_factory) -> None:  # type: ignore[no-untyped-def]
    info = broker_factory(connections_max_idle_ms="500")
    with connect(info) as used, connect(info) as silent, connect(info) as half:
        assert roundtrip(used, ApiKey.API_VERSIONS, 0, {}).error_code == 0
        half.sendall(api_versions_frame()[:6])  # stalled mid-frame
        t0 = time.monotonic()
        for sock in (used, silent, half):
            assert_closed(sock, timeout=5)
        took = time.monotonic() - t0
        assert took < 3, f"idle connections closed after {took:.1f}s"
    # A connection that keeps talking is not idle.
    with connect(info) as busy:
        for i in range(8):
            assert roundtrip(busy, ApiKey.API_VERSIONS, 0, {}, correlation_id=i).error_code == 0
            time.sleep(0.2)
    assert_alive(info)
