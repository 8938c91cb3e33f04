"""TxnOffsetCommit against a real broker: raw requests on the wire, then the transaction's
marker written to __consumer_offsets through the replica manager and reported with
`on_txn_marker`, as the marker writer does. The group side alone: the transaction
coordinator's verification (is the group's partition in the producer's transaction?) is
switched off, since no transaction is opened (the whole path, with a stock client, is
test_transactions.py's send_offsets test). OffsetFetch shows the offsets only once committed, and answers UNSTABLE_OFFSET_COMMIT
meanwhile to a consumer that requires stable offsets; a restart finds the same state in the log.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode as E
from pybroker.broker import Broker
from pybroker.coordinator.group_coordinator import OFFSETS_TOPIC
from tests.helpers import serving_broker
from tests.integration.raw import create_topic, send_request

PID, EPOCH = 4242, 3


def write_marker(broker: Broker, group: str, producer_id: int, epoch: int,
                 commit: bool) -> None:
    """The transaction's end in the group's partition, then the coordinator told of it.

    What the marker writer does for a partition this broker leads."""
    partition = broker.groups.partition_for(group)
    result = broker.replicas.write_txn_marker(OFFSETS_TOPIC, partition, producer_id, epoch, 0,
                                              commit)
    assert result.error == E.NONE, result
    broker.groups.on_txn_marker(partition, producer_id, commit)


def in_broker(info: Any, fn: Any, *args: Any) -> Any:
    return trio.from_thread.run_sync(lambda: fn(*args), trio_token=info.token)


def txn_commit(bootstrap: str, group: str, offsets: dict[int, int], *, version: int = 3,
               producer_id: int = PID, epoch: int = EPOCH, topic: str = "t") -> list[int]:
    body = {"transactional_id": "tx", "group_id": group, "producer_id": producer_id,
            "producer_epoch": epoch, "generation_id": -1, "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                 "committed_metadata": f"m{o}"} for p, o in offsets.items()]}]}
    response = send_request(bootstrap, ApiKey.TXN_OFFSET_COMMIT, version, body)
    return [p.error_code for t in response.topics for p in t.partitions]


def fetch(bootstrap: str, group: str, partitions: list[int], stable: bool,
          version: int = 8) -> dict[int, tuple[int, int]]:
    """{partition: (committed offset, error code)}; the group-level error must be NONE."""
    topics = [{"name": "t", "partition_indexes": partitions}]
    if version >= 8:
        response = send_request(bootstrap, ApiKey.OFFSET_FETCH, version, {
            "groups": [{"group_id": group, "topics": topics}], "require_stable": stable})
        (answer,) = response.groups
    else:
        answer = send_request(bootstrap, ApiKey.OFFSET_FETCH, version, {
            "group_id": group, "topics": topics, "require_stable": stable})
    assert answer.error_code == 0
    return {p.partition_index: (p.committed_offset, p.error_code)
            for t in answer.topics for p in t.partitions}


UNSTABLE = E.UNSTABLE_OFFSET_COMMIT


@pytest.mark.in_process("writes transaction markers on the broker's loop")
def test_offsets_wait_for_the_marker_and_survive_a_restart(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    with serving_broker(logs) as info:
        info.broker.replicas.txn_verifier = None
        bootstrap = info.bootstrap
        create_topic(bootstrap, "t", 2)
        assert txn_commit(bootstrap, "committed", {0: 5, 1: 6}) == [0, 0]
        assert txn_commit(bootstrap, "aborted", {0: 7}, version=0, producer_id=PID + 1) == [0]
        assert txn_commit(bootstrap, "open", {1: 9}, version=4, producer_id=PID + 2) == [0]
        assert txn_commit(bootstrap, "committed", {5: 1}) == [E.UNKNOWN_TOPIC_OR_PARTITION]
        # Pending: unstable when asked for stable offsets, absent otherwise.
        assert fetch(bootstrap, "committed", [0, 1], stable=True) == \
            {0: (-1, UNSTABLE), 1: (-1, UNSTABLE)}
        assert fetch(bootstrap, "committed", [0, 1], stable=True, version=7) == \
            {0: (-1, UNSTABLE), 1: (-1, UNSTABLE)}
        assert fetch(bootstrap, "committed", [0, 1], stable=False) == {0: (-1, 0), 1: (-1, 0)}

        in_broker(info, write_marker, info.broker, "committed", PID, EPOCH, True)
        in_broker(info, write_marker, info.broker, "aborted", PID + 1, EPOCH, False)
        assert fetch(bootstrap, "committed", [0, 1], stable=True) == {0: (5, 0), 1: (6, 0)}
        assert fetch(bootstrap, "aborted", [0], stable=True) == {0: (-1, 0)}
        assert fetch(bootstrap, "open", [1], stable=True) == {1: (-1, UNSTABLE)}
        # The producer state of the partition fences an older epoch of the same producer.
        assert txn_commit(bootstrap, "committed", {0: 8}, epoch=EPOCH - 1) == \
            [E.INVALID_PRODUCER_EPOCH]

    # The markers are in the log; "open" has none: its offsets are pending again after loading.
    with serving_broker(logs) as info:
        info.broker.replicas.txn_verifier = None
        bootstrap = info.bootstrap
        assert fetch(bootstrap, "committed", [0, 1], stable=True) == {0: (5, 0), 1: (6, 0)}
        assert fetch(bootstrap, "aborted", [0], stable=True) == {0: (-1, 0)}
        assert fetch(bootstrap, "open", [1], stable=True) == {1: (-1, UNSTABLE)}
        in_broker(info, write_marker, info.broker, "open", PID + 2, EPOCH, True)
        assert fetch(bootstrap, "open", [1], stable=True) == {1: (9, 0)}
        committed = send_request(bootstrap, ApiKey.OFFSET_FETCH, 8, {
            "groups": [{"group_id": "open", "topics": None}], "require_stable": True})
        assert [(p.committed_offset, p.metadata) for p in committed.groups[0].topics[0].partitions
                ] == [(9, "m9")]


@pytest.mark.in_process("reads the broker's state on its loop")
def test_verification_errors_by_version(tmp_path: Path) -> None:
    """A partition outside the producer's transaction: TRANSACTION_ABORTABLE for v4 clients,
    INVALID_TXN_STATE for older ones; a fenced epoch is INVALID_PRODUCER_EPOCH (Kafka 3.9)."""
    with serving_broker(tmp_path / "logs") as info:
        bootstrap = info.bootstrap
        create_topic(bootstrap, "t", 1)
        answers = {"abortable": E.TRANSACTION_ABORTABLE, "fenced": E.PRODUCER_FENCED}

        async def verifier(txn_id: str, pid: int, epoch: int, tps: list) -> dict:
            return {tp: answers["fenced" if epoch == 0 else "abortable"] for tp in tps}
        info.broker.replicas.txn_verifier = verifier
        assert txn_commit(bootstrap, "g", {0: 1}, version=4) == [E.TRANSACTION_ABORTABLE]
        assert txn_commit(bootstrap, "g", {0: 1}, version=3) == [E.INVALID_TXN_STATE]
        assert txn_commit(bootstrap, "g", {0: 1}, version=2, epoch=0) == \
            [E.INVALID_PRODUCER_EPOCH]
        assert txn_commit(bootstrap, "", {0: 1}) == [E.INVALID_GROUP_ID]
        assert fetch(bootstrap, "g", [0], stable=True) == {0: (-1, 0)}  # nothing was written
