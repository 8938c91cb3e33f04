"""Produce verification across brokers (KIP-890 part 1, issue #35 §6) on a real three-broker
cluster: the leader of a partition asks the transaction coordinator, another broker, with
AddPartitionsToTxn v4 verify-only. A transactional batch to a partition its producer never
added is refused (it used to be accepted unverified, leaving a transaction open there that no
coordinator would end); one to an added partition goes through, and a confluent-kafka
transactional producer writing to partitions of every broker still commits."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode as E
from tests.cluster.brokers import Cluster, create_topic, running_cluster
from tests.integration.coordinator_load import until_answered
from tests.integration.raw import send_request
from tests.integration.txn_clients import READ_COMMITTED, _raw_txn_batch, ck_producer, ck_read

TOPIC = "verified"
PARTITIONS = 6
def _produce(cluster: Cluster, partition: int, txn_id: str, batch: bytes,
             version: int) -> int:
    body = {"transactional_id": txn_id, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": partition, "records": batch}]}]}
    response = send_request(cluster.leader_address(TOPIC, partition), ApiKey.PRODUCE, version,
                            body)
    return int(response.responses[0].partition_responses[0].error_code)


def test_a_partition_not_added_is_refused_where_the_coordinator_is_another_broker(
        tmp_path: Path, zookeeper) -> None:  # type: ignore[no-untyped-def]
    with running_cluster(tmp_path, zookeeper.connect) as cluster:
        create_topic(cluster, TOPIC, partitions=PARTITIONS, rf=1, min_isr=1)
        txn_id = "verify-me"
        found = until_answered(lambda: send_request(
            cluster.brokers[1].bootstrap, ApiKey.FIND_COORDINATOR, 3,
            {"key": txn_id, "key_type": 1}))
        assert found.error_code == 0
        coordinator = f"{found.host}:{found.port}"
        init = until_answered(lambda: send_request(coordinator, ApiKey.INIT_PRODUCER_ID, 3, {
            "transactional_id": txn_id, "transaction_timeout_ms": 60000, "producer_id": -1,
            "producer_epoch": -1}))
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch
        elsewhere = [p for p in range(PARTITIONS)
                     if cluster.state(TOPIC, p)["leader"] != found.node_id]
        assert len(elsewhere) >= 3, "rf 1 spreads the leaders over the three brokers"
        added, not_added, not_added_either = elsewhere[:3]
        add = send_request(coordinator, ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
            "v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": TOPIC, "partitions": [added]}]})
        assert add.results_by_topic_v3_and_below[0].results_by_partition[0] \
            .partition_error_code == 0

        # Never added: the leader asks the coordinator and refuses (Produce v11+ as the
        # abortable TRANSACTION_ABORTABLE, as on one broker).
        assert _produce(cluster, not_added, txn_id, _raw_txn_batch(pid, epoch), 9) == \
            E.INVALID_TXN_STATE
        assert _produce(cluster, not_added_either, txn_id, _raw_txn_batch(pid, epoch), 11) \
            == E.TRANSACTION_ABORTABLE
        # Added: verified, then the open transaction there is its own proof.
        assert _produce(cluster, added, txn_id, _raw_txn_batch(pid, epoch, b"a"), 9) == 0
        assert _produce(cluster, added, txn_id,
                        _raw_txn_batch(pid, epoch, b"b", sequence=1), 9) == 0
        end = until_answered(lambda: send_request(coordinator, ApiKey.END_TXN, 3, {
            "transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
            "committed": True}))
        assert end.error_code == 0
        # A new producer of the id bumps the epoch: the old one is fenced by the
        # coordinator's answer (PRODUCER_FENCED, which a leader reports as Kafka does).
        again = until_answered(lambda: send_request(coordinator, ApiKey.INIT_PRODUCER_ID, 3, {
            "transactional_id": txn_id, "transaction_timeout_ms": 60000, "producer_id": -1,
            "producer_epoch": -1}))
        assert (again.error_code, again.producer_epoch) == (0, epoch + 1)
        assert _produce(cluster, not_added, txn_id, _raw_txn_batch(pid, epoch), 9) == \
            E.INVALID_PRODUCER_EPOCH

        # A stock transactional producer writing to every broker's partitions commits.
        producer = ck_producer(cluster.bootstrap(), "stock-producer")
        producer.begin_transaction()
        for i in range(30):
            producer.produce(TOPIC, value=f"v{i}".encode(), partition=i % PARTITIONS)
        producer.commit_transaction(60)
        read = ck_read(cluster.bootstrap(), TOPIC, READ_COMMITTED, PARTITIONS)
        values = sorted(v for vs in read.values() for v in vs)
        assert values == sorted([b"a", b"b"] + [f"v{i}".encode() for i in range(30)])
