"""ACLs on a cluster (ZkAclStore): a binding created through one broker is enforced by every
broker, survives a broker's restart, and its deletion reaches them all — on the in-memory
ZooKeeper and on a real one (bin/test installs it).

Every connection is `User:ANONYMOUS` until SASL lands, so the brokers allow whatever no ACL
covers (`allow.everyone.if.no.acl.found`) and the test denies ANONYMOUS topic `a` with one
DENY binding: the authorizer's answer flips from yes to no and back, on every broker.
"""
from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer

from pybroker.security.acl.model import AclBinding, AclPermission, PatternType, ResourceType
from pybroker.testing.cluster import Cluster
from protocol.acl_operations import AclOperation
from protocol.api_keys import ApiKey
from tests.integration.raw import send_request

AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
DENY_A = {"resource_type": int(ResourceType.TOPIC), "resource_name": "a",
          "resource_pattern_type": int(PatternType.LITERAL), "principal": "User:ANONYMOUS",
          "host": "*", "operation": int(AclOperation.ALL),
          "permission_type": int(AclPermission.DENY)}
TOPIC_AUTHORIZATION_FAILED = 29


def _bootstrap(cluster: Cluster, node: int) -> str:
    return f"127.0.0.1:{cluster.ports[node]}"


def _produce(bootstrap: str) -> Any:
    results: list = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 5000})
    producer.produce("a", b"v", on_delivery=lambda err, msg: results.append(err))
    producer.flush(10)
    err = results[0] if results else "no delivery report"
    return err.code() if isinstance(err, KafkaError) else err


def _topic_error(bootstrap: str) -> int:
    """Metadata for topic `a` asked of exactly this broker."""
    answer = send_request(bootstrap, ApiKey.METADATA, 4,
                          {"topics": [{"name": "a"}], "allow_auto_topic_creation": False})
    return answer.topics[0].error_code


def _bindings_everywhere(cluster: Cluster) -> list[frozenset[AclBinding]]:
    return [cluster.server(n).broker.authorizer.bindings for n in cluster.running]


def _wait(cluster: Cluster, done: Any, what: str) -> None:
    cluster.wait_until(done, what)


@pytest.fixture(params=["memory", "zookeeper"])
def cluster(request, tmp_path):
    if request.param == "zookeeper":
        # A chroot of the session's ZooKeeper (tests/cluster/conftest.py).
        zk = request.getfixturevalue("zookeeper").connect
        c = Cluster(3, zookeeper=zk, log_dir=tmp_path,
                    authorizer_class_name=AUTHORIZER, super_users="User:admin",
                    allow_everyone_if_no_acl_found="true")
    else:
        c = Cluster(3, log_dir=tmp_path, authorizer_class_name=AUTHORIZER,
                    super_users="User:admin", allow_everyone_if_no_acl_found="true")
    with c:
        yield c


def test_acls_reach_every_broker_survive_restart_and_deletion_propagates(cluster):
    cluster.create_topic("a", partitions=1, replication_factor=3)
    assert _produce(_bootstrap(cluster, 1)) is None

    created = send_request(_bootstrap(cluster, 0), ApiKey.CREATE_ACLS, 1,
                           {"creations": [DENY_A]})
    assert [r.error_code for r in created.results] == [0]
    _wait(cluster, lambda: all(len(b) == 1 for b in _bindings_everywhere(cluster)),
          "every broker to know the DENY binding")
    for node in cluster.running:
        assert _topic_error(_bootstrap(cluster, node)) == TOPIC_AUTHORIZATION_FAILED
    # A client that only knows broker 2 (the binding went through broker 0) is refused.
    assert _produce(_bootstrap(cluster, 2)) == KafkaError.TOPIC_AUTHORIZATION_FAILED

    cluster.stop_broker(2)
    cluster.start_broker(2)
    assert len(cluster.server(2).broker.authorizer.bindings) == 1
    assert _topic_error(_bootstrap(cluster, 2)) == TOPIC_AUTHORIZATION_FAILED

    deleted = send_request(_bootstrap(cluster, 1), ApiKey.DELETE_ACLS, 1, {"filters": [{
        "resource_type_filter": int(ResourceType.TOPIC), "resource_name_filter": "a",
        "pattern_type_filter": int(PatternType.LITERAL), "principal_filter": None,
        "host_filter": None, "operation": int(AclOperation.ANY),
        "permission_type": int(AclPermission.ANY)}]})
    assert len(deleted.filter_results[0].matching_acls) == 1
    _wait(cluster, lambda: not any(_bindings_everywhere(cluster)),
          "every broker to forget the binding")
    for node in cluster.running:
        assert _topic_error(_bootstrap(cluster, node)) == 0
    assert _produce(_bootstrap(cluster, 2)) is None


def test_prefixed_binding_goes_through_the_extended_change_path(cluster):
    """A PREFIXED binding is announced under /kafka-acl-extended-changes (Kafka's path);
    the other brokers follow that path as well."""
    cluster.create_topic("a", partitions=1, replication_factor=3)
    prefixed = dict(DENY_A, resource_pattern_type=int(PatternType.PREFIXED))
    send_request(_bootstrap(cluster, 2), ApiKey.CREATE_ACLS, 1, {"creations": [prefixed]})
    _wait(cluster, lambda: all(len(b) == 1 for b in _bindings_everywhere(cluster)),
          "every broker to know the PREFIXED binding")
    deadline = time.monotonic() + 10
    while _topic_error(_bootstrap(cluster, 0)) != TOPIC_AUTHORIZATION_FAILED:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    zk = cluster.server(0).broker.zk_store.zk
    assert zk.get_children("/kafka-acl-extended-changes")
    assert zk.get_children("/kafka-acl-extended/prefixed/Topic") == ["a"]
