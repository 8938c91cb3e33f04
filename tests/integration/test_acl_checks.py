"""The admin and inspection APIs under ACLs, each answered as Kafka 3.9's KafkaApis answers
it, on one connection that stays open through every refusal.

The principal (ANONYMOUS until SASL lands) may READ topic a, READ and DELETE group g,
DESCRIBE_CONFIGS topic a and DESCRIBE transactional id t1 — nothing on the cluster, topic b
or transactional id t2.
"""
from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic, ResourceType

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode as E
from tests.helpers import Broker
from tests.integration.acl_clients import (
    AUTHORIZER, ONE_BROKER, PRINCIPAL, _consume_one, _produce, allow,
)
from tests.integration.raw import RawConnection

TOPIC, BROKER = 2, 4  # DescribeConfigs resource types


def _transaction(broker: Broker, txn_id: str) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce("a", b"t")
    producer.commit_transaction(10)


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    broker = Broker(log_dir=tmp_path_factory.mktemp("acl-checks"),
                    authorizer_class_name=AUTHORIZER, super_users=PRINCIPAL,
                    **ONE_BROKER).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.create_topics([NewTopic("a", 1, 1), NewTopic("b", 1, 1)]).values():
            f.result(10)
        assert _produce(broker, "a") is None
        assert _consume_one(broker, "a", "g") == b"v"  # g has a committed offset on a
        _transaction(broker, "t1")
        _transaction(broker, "t2")
        grants = [allow(ResourceType.TOPIC, "a", AclOperation.READ),
                  allow(ResourceType.GROUP, "g", AclOperation.READ),
                  allow(ResourceType.GROUP, "g", AclOperation.DELETE),
                  allow(ResourceType.TOPIC, "a", AclOperation.DESCRIBE_CONFIGS),
                  allow(ResourceType.TRANSACTIONAL_ID, "t1", AclOperation.DESCRIBE)]
        for f in admin.create_acls(grants).values():
            f.result(10)
        broker.config["super.users"] = ""
        broker.restart()
        with RawConnection(broker.bootstrap) as conn:
            yield conn
            # Every refusal was an answer: the connection still serves.
            assert conn.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
    finally:
        broker.stop()


def _by_name(entries, name_field="resource_name"):
    return {e[name_field]: e.error_code for e in entries}


def test_describe_configs(secured):
    answer = secured.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": TOPIC, "resource_name": "a", "configuration_keys": None},
        {"resource_type": TOPIC, "resource_name": "b", "configuration_keys": None},
        {"resource_type": TOPIC, "resource_name": "nope", "configuration_keys": None},
        {"resource_type": BROKER, "resource_name": "", "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False})
    assert _by_name(answer.results) == {"a": 0, "b": E.TOPIC_AUTHORIZATION_FAILED,
                                        "nope": E.TOPIC_AUTHORIZATION_FAILED,
                                        "": E.CLUSTER_AUTHORIZATION_FAILED}
    assert answer.results[0].configs and not answer.results[1].configs


@pytest.mark.parametrize("api", [ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS])
def test_alter_configs_need_alter_configs(secured, api):
    config = {"name": "retention.ms", "value": "1000"}
    if api == ApiKey.INCREMENTAL_ALTER_CONFIGS:
        config["config_operation"] = 0
    answer = secured.request(api, 1, {"resources": [
        {"resource_type": TOPIC, "resource_name": "a", "configs": [config]},
        {"resource_type": BROKER, "resource_name": "", "configs": []}],
        "validate_only": False})
    assert _by_name(answer.responses) == {"a": E.TOPIC_AUTHORIZATION_FAILED,
                                          "": E.CLUSTER_AUTHORIZATION_FAILED}


def test_describe_cluster_answers_but_no_operations(secured):
    answer = secured.request(ApiKey.DESCRIBE_CLUSTER, 1, {
        "include_cluster_authorized_operations": True, "endpoint_type": 1})
    assert answer.error_code == 0 and answer.brokers
    assert answer.cluster_authorized_operations == 0  # not DESCRIBE on the cluster


@pytest.mark.parametrize("version", [1, 3, 4])
def test_describe_log_dirs_is_empty_with_the_error_from_v3(secured, version):
    answer = secured.request(ApiKey.DESCRIBE_LOG_DIRS, version, {"topics": None})
    assert list(answer.results) == []
    assert answer.error_code == (E.CLUSTER_AUTHORIZATION_FAILED if version >= 3 else 0)


def test_describe_producers_needs_read(secured):
    answer = secured.request(ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [
        {"name": "a", "partition_indexes": [0]}, {"name": "b", "partition_indexes": [0]}]})
    codes = {t.name: t.partitions[0].error_code for t in answer.topics}
    assert codes == {"a": 0, "b": E.TOPIC_AUTHORIZATION_FAILED}
    assert answer.topics[0].partitions[0].active_producers  # a's producers are described


def test_describe_and_list_transactions_show_only_describable_ids(secured):
    answer = secured.request(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                             {"transactional_ids": ["t1", "t2"]})
    codes = _by_name(answer.transaction_states, "transactional_id")
    assert codes == {"t1": 0, "t2": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    listed = secured.request(ApiKey.LIST_TRANSACTIONS, 1, {
        "state_filters": [], "producer_id_filters": [], "duration_filter": -1})
    assert [t.transactional_id for t in listed.transaction_states] == ["t1"]


def test_offset_delete_needs_delete_on_group_and_read_on_topics(secured):
    def delete(group):
        return secured.request(ApiKey.OFFSET_DELETE, 0, {"group_id": group, "topics": [
            {"name": "b", "partitions": [{"partition_index": 0}]},
            {"name": "a", "partitions": [{"partition_index": 0}]}]})
    refused = delete("h")
    assert (refused.error_code, list(refused.topics)) == (E.GROUP_AUTHORIZATION_FAILED, [])
    answer = delete("g")
    assert answer.error_code == 0
    assert {t.name: t.partitions[0].error_code for t in answer.topics} == {
        "a": 0, "b": E.TOPIC_AUTHORIZATION_FAILED}


def test_offset_for_leader_epoch_needs_describe_without_cluster_action(secured):
    answer = secured.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [
        {"topic": t, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                     "leader_epoch": 0}]} for t in ("a", "b")]})
    codes = {t.topic: t.partitions[0].error_code for t in answer.topics}
    assert codes == {"a": 0, "b": E.TOPIC_AUTHORIZATION_FAILED}


def test_acl_apis_need_the_cluster(secured):
    described = secured.request(ApiKey.DESCRIBE_ACLS, 1, {
        "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
        "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})
    assert described.error_code == E.CLUSTER_AUTHORIZATION_FAILED
    created = secured.request(ApiKey.CREATE_ACLS, 1, {"creations": [{
        "resource_type": 2, "resource_name": "b", "resource_pattern_type": 3,
        "principal": PRINCIPAL, "host": "*", "operation": 3, "permission_type": 3}]})
    assert [r.error_code for r in created.results] == [E.CLUSTER_AUTHORIZATION_FAILED]


def test_scram_credential_apis_need_the_cluster(secured):
    described = secured.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None})
    assert (described.error_code, list(described.results)) == (
        E.CLUSTER_AUTHORIZATION_FAILED, [])
    altered = secured.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {
        "deletions": [], "upsertions": [{"name": "alice", "mechanism": 1, "iterations": 4096,
                                         "salt": b"s" * 16, "salted_password": b"p" * 32}]})
    assert [(r.user, r.error_code) for r in altered.results] == [
        ("alice", E.CLUSTER_AUTHORIZATION_FAILED)]


def test_client_quota_apis_need_the_clusters_config_permissions(secured):
    """Kafka checks DESCRIBE_CONFIGS (describe) and ALTER_CONFIGS (alter) on the cluster."""
    described = secured.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, {
        "components": [{"entity_type": "client-id", "match_type": 2, "match": None}],
        "strict": False})
    assert described.error_code == E.CLUSTER_AUTHORIZATION_FAILED
    assert not described.entries
    altered = secured.request(ApiKey.ALTER_CLIENT_QUOTAS, 0, {
        "entries": [{"entity": [{"entity_type": "client-id", "entity_name": "c1"}],
                     "ops": [{"key": "producer_byte_rate", "value": 1024.0,
                              "remove": False}]}],
        "validate_only": False})
    assert [e.error_code for e in altered.entries] == [E.CLUSTER_AUTHORIZATION_FAILED]
