"""Fixtures of the integration tests: the admin clients the admin API tests drive
(tests/integration/test_admin_*.py; their helpers are in admin_helpers.py).
"""
from __future__ import annotations

from typing import Any, Iterator

import pytest
from confluent_kafka.admin import AdminClient

from tests.integration.admin_helpers import Served


@pytest.fixture
def ck(broker: Served) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.fixture
def kp(broker: Served) -> Iterator[Any]:  # kafka-python's KafkaAdminClient
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    yield admin
    admin.close()
