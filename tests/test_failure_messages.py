"""A failure's message names its cause even when the exception behind it has no text.

An exception object is always true, so `exc or type(exc).__name__` never falls back to the
name: an exception raised without a message showed as nothing, "lost connection to host:port
()". The type checker found these (mypy's truthy-bool check); they read `str(exc)` now.
"""
from __future__ import annotations

import logging
import ssl
from types import SimpleNamespace
from typing import Any

import pytest
import trio

from protocol.api_keys import ApiKey
from pybroker.client.connection import BrokerConnection
from pybroker.client.errors import KafkaConnectionError
from pybroker.cluster.zk_store import ZkMetadataStore, ZooKeeperUnavailable


class _ClosedStream(trio.abc.Stream):
    """A stream whose every write fails the way trio fails one, without a message."""

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        raise trio.ClosedResourceError()

    async def wait_send_all_might_not_block(self) -> None:
        pass

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.sleep_forever()
        return b""

    async def aclose(self) -> None:
        pass


async def test_a_lost_connection_names_the_error_without_a_message() -> None:
    conn = BrokerConnection(_ClosedStream(), "127.0.0.1", 9092)
    with pytest.raises(KafkaConnectionError) as info:
        await conn.request(ApiKey.API_VERSIONS, {}, version=0)
    assert str(info.value) == "lost connection to 127.0.0.1:9092 (ClosedResourceError)"


class _SilentZooKeeper:
    """A kazoo-like client whose start fails with an exception of no message."""

    def __init__(self, **options: Any) -> None:
        pass

    def start(self, timeout: float) -> None:
        raise TimeoutError()

    def stop(self) -> None:
        pass


def test_an_unanswered_zookeeper_names_the_error_without_a_message() -> None:
    with pytest.raises(ZooKeeperUnavailable) as info:
        ZkMetadataStore("127.0.0.1:1", 1, rack=None, session_timeout_ms=6000,
                        connection_timeout_ms=100, client_class=_SilentZooKeeper)
    assert "zookeeper.connection.timeout.ms=100: TimeoutError. Start ZooKeeper" \
        in str(info.value)


async def test_a_failed_tls_handshake_logs_connection_closed_without_a_message(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from pybroker.network import connection
    from pybroker.network.idle import IdleWatch
    from pybroker.network.tls_transport import TlsTransport

    async def reset(self: TlsTransport) -> None:
        raise ConnectionResetError()

    monkeypatch.setattr(TlsTransport, "handshake", reset)
    tls = SimpleNamespace(context=ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER))
    with trio.CancelScope() as scope, caplog.at_level(logging.INFO, connection.log.name):
        # Only the context of the listener is used before the handshake, and no session.
        transport = await connection._handshake(-1, tls, IdleWatch(scope), None,  # type: ignore[arg-type]
                                                "127.0.0.1", 5555)
    assert transport is None
    assert "TLS handshake with 127.0.0.1:5555 failed: connection closed" in caplog.messages
