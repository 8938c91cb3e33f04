"""SCRAM users on a cluster (ZkScramCredentialStore): a user made through one broker is
authenticated by every broker, its deletion refuses it everywhere, and its znode
/config/users/<user> keeps its quotas across a credential change and its credentials across
a quota change — on the in-memory ZooKeeper and on a real one (bin/test installs it)."""
from __future__ import annotations

import json
from typing import Any

import pytest

from pybroker.testing.cluster import Cluster
from pybroker.tools import configs

LISTENERS = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
SETTINGS = {"listeners": LISTENERS, "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"}


@pytest.fixture(params=["memory", "zookeeper"])
def cluster(request, tmp_path):  # type: ignore[no-untyped-def]
    if request.param == "zookeeper":
        # A chroot of the session's ZooKeeper (tests/cluster/conftest.py).
        zk = request.getfixturevalue("zookeeper").connect
        c = Cluster(3, zookeeper=zk, log_dir=tmp_path, **SETTINGS)
    else:
        c = Cluster(3, log_dir=tmp_path, **SETTINGS)
    with c:
        yield c


def _plain(cluster: Cluster, node: int) -> str:
    return f"127.0.0.1:{cluster.server(node).ports['PLAINTEXT']}"


def _sasl(cluster: Cluster, node: int) -> str:
    return f"127.0.0.1:{cluster.server(node).ports['SASL_PLAINTEXT']}"


def _authenticates(bootstrap: str, mechanism: str, password: str) -> bool:
    """confluent-kafka's metadata request to exactly this broker, as alice."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    errors: list[Any] = []
    admin = AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": mechanism, "sasl.username": "alice",
                         "sasl.password": password, "error_cb": errors.append,
                         "reconnect.backoff.max.ms": 500, "log_level": 0})
    try:
        admin.list_topics(timeout=4)
    except KafkaException:
        admin.poll(0.5)  # serves error_cb
        assert any("Authentication failed" in str(e) or "SASL" in str(e) for e in errors), errors
        return False
    return True


def _upsert(bootstrap: str, mechanism: str, password: bytes) -> None:
    from confluent_kafka.admin import (
        AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism[mechanism.replace("-", "_")], 4096),
        password)])
    for future in futures.values():
        assert future.result() is None


def _delete(bootstrap: str, mechanism: str) -> None:
    from confluent_kafka.admin import AdminClient, ScramMechanism, UserScramCredentialDeletion
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.alter_user_scram_credentials([UserScramCredentialDeletion(
        "alice", ScramMechanism[mechanism.replace("-", "_")])])
    for future in futures.values():
        assert future.result() is None


def _everywhere(cluster: Cluster, mechanisms: set[str]) -> None:
    cluster.wait_until(lambda: all(
        set(cluster.server(n).broker.services.scram.users().get("alice", {})) == mechanisms
        for n in cluster.running), f"every broker to see alice with {mechanisms}")


def _znode(cluster: Cluster) -> dict[str, str]:
    raw, _ = cluster.server(0).broker.zk_store.zk.get("/config/users/alice")
    return json.loads(raw)["config"]


def test_a_scram_user_made_through_one_broker_authenticates_on_every_broker(cluster):  # type: ignore[no-untyped-def]
    _upsert(_plain(cluster, 0), "SCRAM-SHA-256", b"alice-secret")
    _everywhere(cluster, {"SCRAM-SHA-256"})
    for node in cluster.running:
        assert _authenticates(_sasl(cluster, node), "SCRAM-SHA-256", "alice-secret"), node
    assert not _authenticates(_sasl(cluster, 2), "SCRAM-SHA-256", "wrong")
    zk = cluster.server(1).broker.zk_store.zk
    assert set(_znode(cluster)) == {"SCRAM-SHA-256"}
    assert _znode(cluster)["SCRAM-SHA-256"].endswith(",iterations=4096")
    notices = [json.loads(zk.get(f"/config/changes/{c}")[0])
               for c in zk.get_children("/config/changes")]
    assert {"version": 2, "entity_path": "users/alice"} in notices

    _delete(_plain(cluster, 1), "SCRAM-SHA-256")
    _everywhere(cluster, set())
    for node in cluster.running:
        assert not _authenticates(_sasl(cluster, node), "SCRAM-SHA-256", "alice-secret"), node


def test_quotas_and_credentials_share_the_users_znode(cluster):  # type: ignore[no-untyped-def]
    from pybroker.cluster.client_quotas import QuotaEntity
    quota = {QuotaEntity("alice", None): {"producer_byte_rate": 5000.0}}

    def quotas_everywhere() -> None:
        cluster.wait_until(lambda: all(
            dict(cluster.server(n).broker.metadata.image.client_quotas) == quota
            for n in cluster.running), "every broker to see alice's quota")

    _upsert(_plain(cluster, 0), "SCRAM-SHA-256", b"alice-secret")
    assert configs.main(["--bootstrap-server", _plain(cluster, 1), "--alter", "--entity-type",
                         "users", "--entity-name", "alice", "--add-config",
                         "producer_byte_rate=5000"]) == 0
    quotas_everywhere()
    _everywhere(cluster, {"SCRAM-SHA-256"})  # the quota write kept the credential
    assert set(_znode(cluster)) == {"SCRAM-SHA-256", "producer_byte_rate"}

    _upsert(_plain(cluster, 2), "SCRAM-SHA-512", b"alice-512")
    _everywhere(cluster, {"SCRAM-SHA-256", "SCRAM-SHA-512"})
    quotas_everywhere()  # the credential write kept the quota
    assert set(_znode(cluster)) == {"SCRAM-SHA-256", "SCRAM-SHA-512", "producer_byte_rate"}
    assert _authenticates(_sasl(cluster, 1), "SCRAM-SHA-512", "alice-512")

    _delete(_plain(cluster, 0), "SCRAM-SHA-256")
    _everywhere(cluster, {"SCRAM-SHA-512"})
    quotas_everywhere()
    assert _znode(cluster)["producer_byte_rate"] == "5000"
