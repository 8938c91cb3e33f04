"""Fixtures of the integration tests: the admin clients the admin API tests drive
(tests/integration/test_admin_*.py; their helpers are in admin_helpers.py).
"""
from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient


@pytest.fixture
def ck(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.fixture
def kp(broker):
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    yield admin
    admin.close()
