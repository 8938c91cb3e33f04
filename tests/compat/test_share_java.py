"""Share groups (KIP-932) with Apache Kafka's own Java client 4.1.1, unmodified: its
KafkaShareConsumer reads from pybroker, releases, rejects and accepts, through the compat
adapter's JVM."""
from __future__ import annotations

from pathlib import Path

import pytest

from compat.clients.java_client import JavaClient
from tests.helpers import broker_in_thread
from tests.integration.raw import create_topic, enable_share_groups

pytestmark = pytest.mark.timeout(180)


def test_the_java_share_consumer_releases_rejects_and_accepts(tmp_path: Path) -> None:
    java = JavaClient()
    missing = java.missing()
    if missing:
        pytest.skip(missing)
    with broker_in_thread(tmp_path / "logs") as info:
        enable_share_groups(info.bootstrap)
        create_topic(info.bootstrap, "q")
        values = [b"release-me", b"reject-me", b"accept-me"]
        got = java.share_consume(info.bootstrap, "q", "java-share", values, count=4,
                                 acks={b"release-me": "RELEASE", b"reject-me": "REJECT"})
    deliveries = [(g.value, count) for g, count in got]
    assert sorted(deliveries) == sorted([(b"release-me", 1), (b"release-me", 2),
                                         (b"reject-me", 1), (b"accept-me", 1)])
