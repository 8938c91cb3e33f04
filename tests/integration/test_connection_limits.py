"""max.connections.per.ip closes a connection beyond the limit at once; beyond
max.connections a new connection waits, unanswered, until another closes (Kafka's acceptor)."""
from __future__ import annotations

import socket
from pathlib import Path

import pytest

from protocol.api_keys import ApiKey
from tests.helpers import serving_broker
from tests.integration.raw import RawConnection


def _answered(conn: RawConnection) -> bool:
    return conn.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0


def test_max_connections_per_ip(tmp_path: Path) -> None:
    with serving_broker(tmp_path / "logs", max_connections_per_ip="2") as info:
        first, second = RawConnection(info.bootstrap), RawConnection(info.bootstrap)
        assert _answered(first) and _answered(second)
        with RawConnection(info.bootstrap) as third, pytest.raises(ConnectionError):
            third.request(ApiKey.API_VERSIONS, 0, {})  # closed by the broker, unanswered
        first.close()
        with RawConnection(info.bootstrap) as again:  # a slot for this address is free
            assert _answered(again)
        assert _answered(second)
        second.close()


def test_max_connections_waits_for_a_free_slot(tmp_path: Path) -> None:
    with serving_broker(tmp_path / "logs", max_connections="2") as info:
        first, second = RawConnection(info.bootstrap), RawConnection(info.bootstrap)
        assert _answered(first) and _answered(second)
        with RawConnection(info.bootstrap, timeout=0.5) as third:
            with pytest.raises(socket.timeout):  # connected, but not served
                third.request(ApiKey.API_VERSIONS, 0, {})
            first.close()
            third.sock.settimeout(10)
            answer = third.read_frame()  # the request sent while waiting, answered now
            assert int.from_bytes(answer[:4], "big") == third.correlation_id
            assert _answered(third)
        assert _answered(second)
        second.close()


def test_max_connections_per_ip_changes_dynamically(tmp_path: Path) -> None:
    """Lowered as a dynamic cluster default (KIP-226): the next connection beyond it is
    closed, the ones already served stay, as Kafka's acceptor does."""
    with serving_broker(tmp_path / "logs") as info:
        admin, first = RawConnection(info.bootstrap), RawConnection(info.bootstrap)
        assert _answered(first)
        body = {"resources": [{"resource_type": 4, "resource_name": "", "configs": [
            {"name": "max.connections.per.ip", "config_operation": 0, "value": "2"}]}],
            "validate_only": False}
        answer = admin.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)
        assert answer.responses[0].error_code == 0
        with RawConnection(info.bootstrap) as third, pytest.raises(ConnectionError):
            third.request(ApiKey.API_VERSIONS, 0, {})  # admin and first are this address's two
        assert _answered(first) and _answered(admin)
        first.close()
        admin.close()
