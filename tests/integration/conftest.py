"""Fixtures of the integration tests: the admin clients the admin API tests drive
(tests/integration/test_admin_*.py; their helpers are in admin_helpers.py), and the broker
processes of the durability and log-dir lock tests (test_durability.py, test_log_dir_lock.py;
their clients are in durability_kit.py).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from confluent_kafka.admin import AdminClient

from tests.helpers import BrokerProcess
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


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "logs"


@pytest.fixture
def brokers() -> Iterator[Callable[..., BrokerProcess]]:
    """Collects started BrokerProcesses and kills whatever is still running at the end."""
    started: list[BrokerProcess] = []

    def start(log_dir: Path, port: int = 0, **overrides: str) -> BrokerProcess:
        # Kafka's keys, none one of BrokerProcess's own keywords (mypy holds the str values
        # against all of those, as in tests/cluster/brokers.py)
        bp = BrokerProcess(log_dir, port=port, **overrides)  # type: ignore[arg-type]
        started.append(bp)
        return bp.start()

    yield start
    for bp in started:
        if bp.proc is not None and bp.proc.poll() is None:
            bp.kill()
