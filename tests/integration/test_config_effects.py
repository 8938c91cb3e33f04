"""Broker keys that take effect, each shown with a real broker and a stock client (issue 21:
no key the docs call honoured is read nowhere)."""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from pybroker.cluster.metadata import InconsistentClusterIdError, read_meta_properties
from tests.helpers import broker_in_thread

TIMEOUT = 10
CLUSTER_ID = "pybroker-test-cluster-1"


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_cluster_id_is_used_for_new_data_and_a_mismatch_is_refused(tmp_path: Path) -> None:
    """cluster.id names a new cluster (what clients see, what meta.properties records); once
    the data has an id, a broker configured with another is refused, as Kafka's
    InconsistentClusterIdException refuses a broker joining the wrong cluster."""
    logs = tmp_path / "logs"
    with broker_in_thread(logs, cluster_id=CLUSTER_ID) as info:
        ck = AdminClient({"bootstrap.servers": info.bootstrap})
        assert ck.describe_cluster().result(TIMEOUT).cluster_id == CLUSTER_ID
    assert read_meta_properties(logs)["cluster.id"] == CLUSTER_ID
    with broker_in_thread(logs, cluster_id=CLUSTER_ID):  # the same id: starts
        pass
    with broker_in_thread(logs) as info:  # unset: the stored id
        from kafka.admin import KafkaAdminClient
        admin = KafkaAdminClient(bootstrap_servers=info.bootstrap)
        try:
            assert admin.describe_cluster()["cluster_id"] == CLUSTER_ID
        finally:
            admin.close()
    with pytest.raises(BaseExceptionGroup) as refused:  # trio reports the failed start
        with broker_in_thread(logs, cluster_id="another-cluster"):
            pass
    assert refused.group_contains(InconsistentClusterIdError, match="doesn't match stored",
                                  depth=None)
