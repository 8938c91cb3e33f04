"""Share groups (KIP-932) with a stock client: confluent-kafka's ShareConsumer (librdkafka's
share consumer, a preview in 2.16), unmodified, against a real broker.

Issue #34's six scenarios, with this client and with the Java KafkaShareConsumer, are rows of
the compatibility matrix (compat/share_group_scenarios.py, in tests/compat/test_matrix.py),
each expecting what the client saw on Apache Kafka 4.1.1; they play consumers that
acknowledge explicitly. What is here is what they do not check."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator

import pytest

from compat.differential.share_scenarios import polling
from tests.helpers import serving_broker
from tests.integration.raw import create_topic, enable_share_groups
from tests.integration.share_clients import consumer, produce, warm_up

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def bootstrap(tmp_path: Path) -> Iterator[str]:
    with serving_broker(tmp_path / "logs",
                          **{"group.share.record.lock.duration.ms": "2000",
                             "group.share.min.record.lock.duration.ms": "2000"}) as info:
        enable_share_groups(info.bootstrap)
        create_topic(info.bootstrap, "q")
        yield info.bootstrap


def test_three_consumers_acknowledging_implicitly_read_each_record_once(bootstrap: str) -> None:
    """The matrix's share-three-consumers with the implicit acknowledgement mode (each poll
    accepts what the last one gave), and no offset handed out twice, warm-ups included."""
    consumers = [consumer(bootstrap) for _ in range(3)]
    got: list[list[tuple[int, bytes]]] = [[] for _ in consumers]
    seen: list[bytes] = []
    payload = [f"r{i}".encode() for i in range(300)]
    with polling(consumers, lambda i, m: got[i].append((m.offset(), m.value()))):
        warm_up(bootstrap, lambda: (time.sleep(0.5), any(got))[1])
        for i in range(0, 300, 30):  # several batches, so that all three get some
            produce(bootstrap, payload[i:i + 30])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            seen = [v for g in got for _, v in list(g) if v != b"warm-up"]
            if len(seen) >= 300:
                break
            time.sleep(0.2)
    assert sorted(seen) == sorted(payload)  # every record, none twice
    offsets = [o for g in got for o, _ in g]
    assert len(offsets) == len(set(offsets))
