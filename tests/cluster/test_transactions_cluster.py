"""Transactions on a three-broker cluster (issue #12): replication factor 3 for the data and
for `__transaction_state`, the coordinator on one broker and the partitions' leaders on others
(markers travel with WriteTxnMarkers), and kill -9 of the coordinator and of a data leader in
the middle of a transaction: the transaction completes on the new leaders, and a
read_committed consumer sees exactly the committed records."""
from __future__ import annotations

from pathlib import Path

from pybroker.coordinator.internal_topic import partition_for
from tests.cluster.brokers import SESSION_TIMEOUT_MS, create_topic, running_cluster
from tests.integration.txn_clients import READ_COMMITTED, READ_UNCOMMITTED, ck_producer, ck_read

TXN_PARTITIONS = 5


def test_transactions_survive_killing_the_coordinator_and_a_leader(
        tmp_path: Path, zookeeper) -> None:  # type: ignore[no-untyped-def]
    with running_cluster(tmp_path, zookeeper.connect, **{
            "transaction.state.log.replication.factor": "3",
            "transaction.state.log.min.isr": "2"}) as cluster:
        create_topic(cluster, "ctx", partitions=2)
        bootstrap = cluster.bootstrap()
        txn_id = "cluster-txn"
        producer = ck_producer(bootstrap, txn_id, **{"transaction.timeout.ms": 60000})
        state_partition = partition_for(txn_id, TXN_PARTITIONS)
        cluster.wait_isr("__transaction_state", state_partition, {1, 2, 3})
        expected: dict[int, list[bytes]] = {0: [], 1: []}
        everything: dict[int, list[bytes]] = {0: [], 1: []}

        def write(tag: str, commit: bool) -> None:
            for i in range(10):
                value = f"{tag}-{i}".encode()
                producer.produce("ctx", value=value, partition=i % 2)
                everything[i % 2].append(value)
                if commit:
                    expected[i % 2].append(value)
            producer.flush(30)

        # A plain transaction, and an aborted one: markers to leaders on other brokers.
        producer.begin_transaction()
        write("plain", True)
        producer.commit_transaction(60)
        producer.begin_transaction()
        write("aborted", False)
        producer.abort_transaction(60)

        # The coordinator dies between the records and the commit.
        producer.begin_transaction()
        write("coordinator-killed", True)
        coordinator = cluster.leader("__transaction_state", state_partition)
        cluster.kill(coordinator)
        cluster.wait_until(
            lambda: cluster.leader("__transaction_state", state_partition)
            not in (coordinator, -1), SESSION_TIMEOUT_MS / 1000 + 15, "a new coordinator")
        producer.commit_transaction(60)
        cluster.start(coordinator)
        cluster.wait_isr("ctx", 0, {1, 2, 3}, timeout=60)
        cluster.wait_isr("ctx", 1, {1, 2, 3}, timeout=60)

        # A data partition's leader dies between the records and the commit.
        producer.begin_transaction()
        write("leader-killed", True)
        leader = cluster.leader("ctx", 0)
        cluster.kill(leader)
        cluster.wait_until(lambda: cluster.leader("ctx", 0) not in (leader, -1),
                           SESSION_TIMEOUT_MS / 1000 + 15, "a new leader of ctx-0")
        producer.commit_transaction(60)

        survivors = cluster.bootstrap(exclude=(leader,))
        assert ck_read(survivors, "ctx", READ_COMMITTED, 2) == expected
        assert ck_read(survivors, "ctx", READ_UNCOMMITTED, 2) == everything
