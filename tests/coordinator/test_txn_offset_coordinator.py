"""The façade's side of transactional offset commits over a real Broker (real logs, no
sockets): the batch it writes, how append errors reach the client, and markers that concern
another partition. The transaction coordinator's verification is switched off: no
transaction is opened here (test_transactions.py has the whole path)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, AsyncIterator

import pytest

from protocol.errors import ErrorCode as E
from protocol.records.batch import iter_batches
from pybroker.broker import Broker
from pybroker.coordinator.group_coordinator import OFFSETS_TOPIC
from pybroker.coordinator.group_records import OffsetAndMetadata
from pybroker.replica.manager import AppendResult
from tests.helpers import broker_config

VALUE = OffsetAndMetadata(5, "", 1)


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    b = Broker(broker_config(tmp_path / "logs"))
    b.replicas.txn_verifier = None
    await b.topics.create_topic("t", 1, 1, {})
    yield b
    b.close()


async def commit(broker: Broker, group: str, pid: int = 7, epoch: int = 2
                 ) -> dict[Any, E]:
    return await broker.groups.commit_txn_offsets("tx", group, pid, epoch, "", None, -1,
                                                  {("t", 0): VALUE})


async def test_one_transactional_batch_of_the_producer(broker: Broker) -> None:
    assert await commit(broker, "g") == {("t", 0): E.NONE}
    plog = broker.logs.get(OFFSETS_TOPIC, broker.groups.partition_for("g"))
    assert plog is not None
    data = plog.read(0, 1 << 20).records
    headers = [h for _, h in iter_batches(memoryview(data))]
    assert len(headers) == 1
    (header,) = headers
    assert header.is_transactional and not header.is_control
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, -1)
    assert broker.groups.state.pending.pending(7, "g") == {("t", 0): VALUE}


async def test_a_marker_of_another_partition_completes_nothing(broker: Broker) -> None:
    groups = broker.groups
    await commit(broker, "g")
    mine = groups.partition_for("g")
    groups.on_txn_marker((mine + 1) % groups.num_partitions, 7, True)
    assert groups.fetch_offsets("g", None) == (E.NONE, [])
    groups.on_txn_marker(mine, 7, True)
    assert groups.fetch_offsets("g", None) == (E.NONE, [("t", 0, VALUE)])


@pytest.mark.parametrize("append_error, answer", [
    (E.MESSAGE_TOO_LARGE, E.INVALID_COMMIT_OFFSET_SIZE),
    (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
    (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.COORDINATOR_NOT_AVAILABLE),
    (E.INVALID_PRODUCER_EPOCH, E.INVALID_PRODUCER_EPOCH),
])
async def test_append_errors_as_kafka_maps_them(broker: Broker, monkeypatch: Any,
                                                append_error: E, answer: E) -> None:
    await broker.groups.ensure_topic()
    monkeypatch.setattr(broker.replicas, "append", lambda *a, **k: AppendResult(append_error))
    assert await commit(broker, "g") == {("t", 0): answer}
    assert not broker.groups.state.pending.has_open("g")
    assert "g" not in broker.groups.state.groups
