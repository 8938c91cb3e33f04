"""The TLS transport's edges (pybroker/network/tls_transport.py), driven by a client whose
bytes on the wire the test controls (an ssl.SSLObject on memory BIOs over a plain socket): requests that
arrive with the handshake's last flight, requests split a byte at a time and many in one
write, a large request, the client's close_notify, a corrupt record, renegotiation refused."""
from __future__ import annotations

import logging
import socket
import ssl
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.helpers import serving_broker

import trustme

def _frame(correlation_id: int) -> bytes:
    body = b"\x00\x12\x00\x00" + correlation_id.to_bytes(4, "big") + b"\x00\x04test"
    return len(body).to_bytes(4, "big") + body


@contextmanager
def _ssl_broker(root: Path) -> Iterator[tuple[Any, ssl.SSLContext]]:
    ca = trustme.CA()
    server = root / "server.pem"
    ca.issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(str(server))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ca.configure_trust(context)
    with serving_broker(root / "logs", listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                        ssl_keystore_location=str(server)) as info:
        yield info, context


@pytest.fixture(scope="module")
def ssl_setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, ssl.SSLContext]]:
    with _ssl_broker(tmp_path_factory.mktemp("tls-transport")) as setup:
        yield setup


class _Client:
    """A TLS client that writes exactly the bytes the test asks for, when it asks."""

    def __init__(self, port: int, context: ssl.SSLContext) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_hostname="localhost")

    def handshake(self, hold_last_flight: bool = False) -> bytes:
        """Handshake; with `hold_last_flight` the client's Finished is returned unsent."""
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.sock.sendall(self.outgoing.read())
                self.incoming.write(self.sock.recv(65536))
        last = self.outgoing.read()
        if not hold_last_flight:
            self.sock.sendall(last)
            return b""
        return last

    def encrypt(self, data: bytes) -> bytes:
        self.tls.write(data)
        return self.outgoing.read()

    def receive_frames(self, count: int) -> list[int]:
        """The correlation ids of the next `count` responses."""
        plain = b""
        ids: list[int] = []
        while len(ids) < count:
            try:
                plain += self.tls.read(65536)
            except ssl.SSLWantReadError:
                data = self.sock.recv(65536)
                assert data, "the broker closed the connection"
                self.incoming.write(data)
                continue
            while len(plain) >= 4 and len(plain) >= 4 + int.from_bytes(plain[:4], "big"):
                size = int.from_bytes(plain[:4], "big")
                ids.append(int.from_bytes(plain[4:8], "big"))
                plain = plain[4 + size:]
        return ids

    def closed_by_broker(self) -> bool:
        try:
            while data := self.sock.recv(65536):
                self.incoming.write(data)
                try:
                    if self.tls.read(65536) == b"":
                        return True  # close_notify, then the end of the stream
                except ssl.SSLWantReadError:
                    pass
                except ssl.SSLError:
                    return True  # the broker's alert
            return True
        except ConnectionError:
            return True
        except socket.timeout:
            return False

    def close(self) -> None:
        self.sock.close()


def test_requests_sent_with_the_clients_finished_are_answered(ssl_setup: Any) -> None:
    info, context = ssl_setup
    client = _Client(info.ports["SSL"], context)
    try:
        finished = client.handshake(hold_last_flight=True)
        # The Finished and two requests in one segment: the broker's handshake reads them
        # all; the requests must not wait for more bytes that never come.
        client.sock.sendall(finished + client.encrypt(_frame(1) + _frame(2)))
        assert client.receive_frames(2) == [1, 2]
    finally:
        client.close()


def test_records_split_a_byte_at_a_time_and_many_in_one_write(ssl_setup: Any) -> None:
    info, context = ssl_setup
    client = _Client(info.ports["SSL"], context)
    try:
        client.handshake()
        wire = client.encrypt(_frame(7))
        for i in range(len(wire)):
            client.sock.sendall(wire[i:i + 1])
            time.sleep(0.0005 if i % 16 == 0 else 0)
        assert client.receive_frames(1) == [7]
        # 300 requests, one TLS record each, in one write: every one answered, in order.
        wire = b"".join(client.encrypt(_frame(100 + n)) for n in range(300))
        client.sock.sendall(wire)
        assert client.receive_frames(300) == list(range(100, 400))
    finally:
        client.close()


def test_a_large_request_over_many_records(ssl_setup: Any) -> None:
    info, context = ssl_setup
    client = _Client(info.ports["SSL"], context)
    try:
        client.handshake()
        # A Metadata v4 request for 60,000 topics (no auto-creation): ~480 KB, 30 records.
        topics = b"".join(len(name).to_bytes(2, "big") + name
                          for name in (f"t{n:06d}".encode() for n in range(60_000)))
        body = (b"\x00\x03\x00\x04" + (9).to_bytes(4, "big") + b"\x00\x04test"
                + (60_000).to_bytes(4, "big") + topics + b"\x00")
        assert len(body) > 16384 * 20
        client.sock.sendall(client.encrypt(len(body).to_bytes(4, "big") + body))
        assert client.receive_frames(1) == [9]
    finally:
        client.close()


@pytest.mark.in_process("reads the broker's log records (caplog)")
def test_close_notify_and_a_corrupt_record_close_the_connection(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with _ssl_broker(tmp_path) as (info, context):
        _close_notify_and_a_corrupt_record(info, context, caplog)


def _close_notify_and_a_corrupt_record(info: Any, context: ssl.SSLContext,
                                       caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="pybroker"):
        polite = _Client(info.ports["SSL"], context)
        polite.handshake()
        try:
            polite.tls.unwrap()
        except ssl.SSLWantReadError:
            pass
        polite.sock.sendall(polite.outgoing.read())
        assert polite.closed_by_broker()
        polite.close()

        rude = _Client(info.ports["SSL"], context)
        rude.handshake()
        record = bytearray(rude.encrypt(_frame(3)))
        record[-1] ^= 0xFF  # the authentication tag no longer matches
        rude.sock.sendall(bytes(record))
        assert rude.closed_by_broker()
        rude.close()
        time.sleep(0.2)
    assert any("closing TLS connection" in r.getMessage() for r in caplog.records)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    # The listener still serves.
    client = _Client(info.ports["SSL"], context)
    client.handshake()
    client.sock.sendall(client.encrypt(_frame(5)))
    assert client.receive_frames(1) == [5]
    client.close()


def test_listener_contexts_refuse_renegotiation(tmp_path: Path) -> None:
    from pybroker.config import load_broker_config
    from pybroker.security.tls_context import tls_listener
    ca = trustme.CA()
    server = tmp_path / "server.pem"
    ca.issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(str(server))
    config = load_broker_config(None, {"listeners": "SSL://127.0.0.1:0",
                                       "inter.broker.listener.name": "SSL",
                                       "ssl.keystore.location": str(server)})
    assert tls_listener(config, "SSL").context.options & ssl.OP_NO_RENEGOTIATION
