"""Produce verification across brokers costs one coordinator round trip per partition and
transaction, never one per produce (issue #35 §6): the leader's producer state says once the
transaction is open in the partition, and the marker that ends it makes the next transaction
ask again. Three in-process brokers (pybroker.testing.Cluster), so the coordinator's request
counts can be read; tests/cluster/test_txn_verification_cluster.py runs the refusals on a real
ZooKeeper. The leader reaches the coordinator on the inter-broker listener, secured as the
replica fetchers are (SSL with client certificates here)."""
from __future__ import annotations

import time
from typing import Any, Iterator

import pytest
import trio

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode as E
from pybroker.testing import Cluster
from tests.integration.coordinator_load import _NOT_YET, until_answered
from tests.integration.raw import send_request
from tests.integration.txn_clients import _raw_txn_batch

TOPIC = "verified"
PARTITIONS = 6


def _transactional_producer(bootstrap: str, txn_id: str) -> tuple[Any, str, Any]:
    """The id's coordinator (FindCoordinator's answer, and its host:port) and a producer id
    and epoch for it (InitProducerId), each asked until answered."""
    found = until_answered(lambda: send_request(bootstrap, ApiKey.FIND_COORDINATOR, 3,
                                                {"key": txn_id, "key_type": 1}))
    coordinator = f"{found.host}:{found.port}"
    init = until_answered(lambda: send_request(coordinator, ApiKey.INIT_PRODUCER_ID, 3, {
        "transactional_id": txn_id, "transaction_timeout_ms": 60000, "producer_id": -1,
        "producer_epoch": -1}))
    return found, coordinator, init


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with Cluster(3) as running:
        running.create_topic(TOPIC, PARTITIONS, replication_factor=1)
        yield running


def _verifications(cluster: Cluster, node: int) -> int:
    stats = cluster.server(node).broker.services.stats.apis.get(ApiKey.ADD_PARTITIONS_TO_TXN)
    return 0 if stats is None else stats.requests


def test_one_verification_per_partition_and_transaction(cluster: Cluster) -> None:
    first = f"127.0.0.1:{cluster.ports[0]}"
    found, coordinator, init = _transactional_producer(first, "cached")
    pid, epoch = init.producer_id, init.producer_epoch
    partition = next(p for p in range(PARTITIONS) if cluster.leader_of(TOPIC, p) != found.node_id)
    leader = f"127.0.0.1:{cluster.ports[cluster.leader_of(TOPIC, partition)]}"
    sequence = 0

    def transaction(batches: int) -> None:
        nonlocal sequence
        add = send_request(coordinator, ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
            "v3_and_below_transactional_id": "cached", "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": TOPIC, "partitions": [partition]}]})
        assert add.results_by_topic_v3_and_below[0].results_by_partition[0] \
            .partition_error_code == 0
        for _ in range(batches):
            body = {"transactional_id": "cached", "acks": -1, "timeout_ms": 5000,
                    "topic_data": [{"name": TOPIC, "partition_data": [
                        {"index": partition,
                         "records": _raw_txn_batch(pid, epoch, sequence=sequence)}]}]}
            response = send_request(leader, ApiKey.PRODUCE, 9, body)
            assert response.responses[0].partition_responses[0].error_code == 0
            sequence += 1
        end = until_answered(lambda: send_request(coordinator, ApiKey.END_TXN, 3, {
            "transactional_id": "cached", "producer_id": pid, "producer_epoch": epoch,
            "committed": True}))
        assert end.error_code == 0

    before = _verifications(cluster, found.node_id)
    transaction(5)  # AddPartitionsToTxn from the client, one verification from the leader
    assert _verifications(cluster, found.node_id) - before == 2
    cluster.wait_until(
        lambda: not cluster.server(cluster.leader_of(TOPIC, partition)).broker.replicas
        .in_ongoing_transaction((TOPIC, partition), pid, epoch),
        "the commit marker to end the transaction in the partition")
    transaction(3)  # the marker ended it: the next transaction is verified again, once
    assert _verifications(cluster, found.node_id) - before == 4


def test_verification_goes_over_the_secured_inter_broker_listener(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Clients on PLAINTEXT, brokers on SSL requiring client certificates: the leader's
    AddPartitionsToTxn reaches the coordinator there, and refuses a partition not added."""
    import trustme
    root = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    (root / "ca.pem").write_bytes(ca.cert_pem.bytes())
    (root / "server.pem").write_bytes(
        ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem.bytes())
    with Cluster(3, **{"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                       "security.inter.broker.protocol": "SSL", "ssl.client.auth": "required",
                       "ssl.keystore.location": str(root / "server.pem"),
                       "ssl.truststore.location": str(root / "ca.pem")}) as cluster:
        cluster.create_topic(TOPIC, PARTITIONS, replication_factor=1)
        plain = cluster.bootstrap_on("PLAINTEXT").split(",")
        found, coordinator, init = _transactional_producer(plain[0], "secured")
        added, not_added = [p for p in range(PARTITIONS)
                            if cluster.leader_of(TOPIC, p) != found.node_id][:2]
        add = send_request(coordinator, ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
            "v3_and_below_transactional_id": "secured",
            "v3_and_below_producer_id": init.producer_id,
            "v3_and_below_producer_epoch": init.producer_epoch,
            "v3_and_below_topics": [{"name": TOPIC, "partitions": [added]}]})
        assert add.results_by_topic_v3_and_below[0].results_by_partition[0] \
            .partition_error_code == 0

        def produce(partition: int) -> int:
            leader = plain[cluster.leader_of(TOPIC, partition)]
            body = {"transactional_id": "secured", "acks": -1, "timeout_ms": 5000,
                    "topic_data": [{"name": TOPIC, "partition_data": [
                        {"index": partition, "records": _raw_txn_batch(
                            init.producer_id, init.producer_epoch)}]}]}
            response = send_request(leader, ApiKey.PRODUCE, 9, body)
            return int(response.responses[0].partition_responses[0].error_code)
        assert produce(not_added) == E.INVALID_TXN_STATE
        assert produce(added) == 0


def test_a_coordinator_refusing_the_leader_is_invalid_txn_state_to_every_version() -> None:
    """ACLs on, clients on PLAINTEXT (ANONYMOUS, a super user), brokers on SASL_PLAINTEXT as
    User:broker, who may not CLUSTER_ACTION: the coordinator refuses the leader's
    verify-only AddPartitionsToTxn (CLUSTER_AUTHORIZATION_FAILED), and the producer is told
    INVALID_TXN_STATE, "Partition was not added to the transaction", at v9 and at v11 alike,
    never the broker's own authorization error nor the abortable TRANSACTION_ABORTABLE:
    what Apache Kafka 4.1.1 answers, set up the same way."""
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="broker" password="b" user_broker="b";')
    with Cluster(3, **{"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                       "inter.broker.listener.name": "SASL_PLAINTEXT",
                       "sasl.mechanism.inter.broker.protocol": "PLAIN",
                       "sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": jaas,
                       "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                       "super.users": "User:ANONYMOUS",
                       # followers could not fetch it: the brokers' principal may not
                       "transaction.state.log.replication.factor": "1",
                       "transaction.state.log.min.isr": "1"}) as cluster:
        cluster.create_topic(TOPIC, PARTITIONS, replication_factor=1)
        plain = cluster.bootstrap_on("PLAINTEXT").split(",")
        found, coordinator, init = _transactional_producer(plain[0], "refused")
        assert init.error_code == 0
        elsewhere = [p for p in range(PARTITIONS) if cluster.leader_of(TOPIC, p) != found.node_id]
        for version in (9, 11):
            for partition in elsewhere:
                body = {"transactional_id": "refused", "acks": -1, "timeout_ms": 5000,
                        "topic_data": [{"name": TOPIC, "partition_data": [
                            {"index": partition, "records": _raw_txn_batch(
                                init.producer_id, init.producer_epoch)}]}]}
                response = send_request(plain[cluster.leader_of(TOPIC, partition)],
                                        ApiKey.PRODUCE, version, body)
                got = response.responses[0].partition_responses[0]
                assert (got.error_code, got.error_message) == (
                    E.INVALID_TXN_STATE, "Partition was not added to the transaction"), \
                    (version, partition)


def test_a_marker_landing_while_verifying_refuses_the_batch_retriably(cluster: Cluster) -> None:
    """The client aborts while the leader waits for the coordinator's answer: the abort's
    marker lands on the partition first, and the batch, verified against the transaction
    that was, must not reopen it there (Kafka's VerificationGuard)."""
    first = f"127.0.0.1:{cluster.ports[0]}"
    found, coordinator, init = _transactional_producer(first, "guarded")
    pid, epoch = init.producer_id, init.producer_epoch
    partition = next(p for p in range(PARTITIONS) if cluster.leader_of(TOPIC, p) != found.node_id)
    node = cluster.leader_of(TOPIC, partition)
    add = send_request(coordinator, ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": "guarded", "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": TOPIC, "partitions": [partition]}]})
    assert add.results_by_topic_v3_and_below[0].results_by_partition[0] \
        .partition_error_code == 0
    channels = cluster.server(node).broker.txn_verifier.channels
    ask = channels.request
    aborted: list[int] = []

    async def abort_meanwhile(*args: Any, **kwargs: Any) -> Any:
        answer = await ask(*args, **kwargs)
        end = await trio.to_thread.run_sync(lambda: until_answered(lambda: send_request(
            coordinator, ApiKey.END_TXN, 3, {"transactional_id": "guarded",
                                             "producer_id": pid, "producer_epoch": epoch,
                                             "committed": False})))
        aborted.append(end.error_code)
        return answer
    channels.request = abort_meanwhile  # type: ignore[method-assign]
    body = {"transactional_id": "guarded", "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": TOPIC, "partition_data": [
            {"index": partition, "records": _raw_txn_batch(pid, epoch)}]}]}
    response = send_request(f"127.0.0.1:{cluster.ports[node]}", ApiKey.PRODUCE, 9, body)
    assert aborted == [0]
    assert response.responses[0].partition_responses[0].error_code == E.NOT_ENOUGH_REPLICAS
    assert not cluster.server(node).broker.replicas.in_ongoing_transaction(
        (TOPIC, partition), pid, epoch)


def test_txn_offset_commit_is_verified_where_the_coordinator_is_another_broker(
        cluster: Cluster) -> None:
    """TxnOffsetCommit writes a transactional batch to __consumer_offsets on the group's
    coordinator; where the transaction's coordinator is another broker, the group's partition
    must be in the transaction too (AddOffsetsToTxn), as Kafka verifies it."""
    first = f"127.0.0.1:{cluster.ports[0]}"
    txn = until_answered(lambda: send_request(first, ApiKey.FIND_COORDINATOR, 3,
                                              {"key": "offsets", "key_type": 1}))
    group, groups = None, None
    for n in range(100):  # a group coordinated elsewhere than the transaction
        groups = until_answered(lambda n=n: send_request(first, ApiKey.FIND_COORDINATOR, 3,
                                                         {"key": f"g{n}", "key_type": 0}))
        if groups.node_id != txn.node_id:
            group = f"g{n}"
            break
    assert group is not None and groups is not None
    coordinator = f"{txn.host}:{txn.port}"
    init = until_answered(lambda: send_request(coordinator, ApiKey.INIT_PRODUCER_ID, 3, {
        "transactional_id": "offsets", "transaction_timeout_ms": 60000, "producer_id": -1,
        "producer_epoch": -1}))

    def commit(version: int) -> int:
        body = {"transactional_id": "offsets", "group_id": group,
                "producer_id": init.producer_id, "producer_epoch": init.producer_epoch,
                "generation_id": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": TOPIC, "partitions": [
                    {"partition_index": 0, "committed_offset": 7, "committed_leader_epoch": -1,
                     "committed_metadata": ""}]}]}
        deadline = time.monotonic() + 30
        while True:
            response = send_request(f"{groups.host}:{groups.port}", ApiKey.TXN_OFFSET_COMMIT,
                                    version, body)
            code = int(response.topics[0].partitions[0].error_code)
            if code not in _NOT_YET or time.monotonic() > deadline:
                return code
            time.sleep(0.1)
    assert commit(3) == E.INVALID_TXN_STATE  # AddOffsetsToTxn never sent
    assert commit(4) == E.TRANSACTION_ABORTABLE
    added = until_answered(lambda: send_request(coordinator, ApiKey.ADD_OFFSETS_TO_TXN, 3, {
        "transactional_id": "offsets", "producer_id": init.producer_id,
        "producer_epoch": init.producer_epoch, "group_id": group}))
    assert added.error_code == 0
    assert commit(3) == 0
