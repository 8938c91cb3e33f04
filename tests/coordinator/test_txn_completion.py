"""The transaction coordinator's last step over a real Broker (real logs, no sockets): once
every marker is written, CompleteCommit or CompleteAbort goes to __transaction_state. Until it
is there the transaction stays PrepareCommit/PrepareAbort and every InitProducerId for its id
answers CONCURRENT_TRANSACTIONS, so an append the log cannot take now must be tried again."""
from __future__ import annotations

from pathlib import Path
from typing import AsyncIterator

import pytest
import trio

from protocol.errors import ErrorCode as E
from pybroker.broker import Broker
from pybroker.coordinator.txn_state import TxnState as S
from tests.helpers import broker_config

TXN = "tx"


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    b = Broker(broker_config(tmp_path / "logs"))
    await b.topics.create_topic("t", 1, 1, {})
    yield b
    b.close()


def state(broker: Broker) -> S | None:
    code, txn = broker.transactions.describe(TXN)
    return None if code or txn is None else txn.state


@pytest.mark.parametrize("refusal", [E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND])
@pytest.mark.parametrize("commit", [True, False])
async def test_a_completion_the_log_refuses_for_now_is_written_once_it_can(
        broker: Broker, commit: bool, refusal: E) -> None:
    """A node's restart, as PYBROKER_NUM_CORES=2 met it (test_transactions_faults.py's
    committing kill): the worker that comes up first leads every partition of
    __transaction_state with itself alone in the ISR until the other is back, below the
    topic's min.insync.replicas of 2, and finishes a PrepareCommit it loaded in that time.
    The append of its CompleteCommit is refused NOT_ENOUGH_REPLICAS. Kafka's marker channel
    retries such an append (COORDINATOR_NOT_AVAILABLE, its txnLogAppendRetryQueue) while it
    coordinates the id; given up, the transaction stayed PrepareCommit for good. The ISR may
    also shrink below it while the append waits for the followers (AFTER_APPEND), which
    Kafka's coordinator takes for COORDINATOR_NOT_AVAILABLE too."""
    txns = broker.transactions
    refused: list[int] = []
    short_isr = True
    append = txns.topic.append

    async def while_the_isr_is_short(partition: int, batch: bytes) -> tuple[E, int]:
        if short_isr and state(broker) in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            refused.append(partition)  # the completion: nothing else is written meanwhile
            return refusal, -1
        return await append(partition, batch)
    txns.topic.append = while_the_isr_is_short  # type: ignore[method-assign]

    async with trio.open_nursery() as nursery:
        await nursery.start(txns.run)
        code, pid, epoch = await txns.init_producer_id(TXN, 60_000)
        assert code == E.NONE
        assert await txns.add_partitions(TXN, pid, epoch, [("t", 0)]) == E.NONE
        nursery.start_soon(txns.end_transaction, TXN, pid, epoch, commit)
        with trio.fail_after(10):
            while len(refused) < 2:  # refused, and tried again
                await trio.sleep(0.01)
        assert state(broker) is (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
        assert (await txns.init_producer_id(TXN, 60_000))[0] == E.CONCURRENT_TRANSACTIONS
        short_isr = False  # the follower is back in the ISR
        with trio.fail_after(10):
            while state(broker) is not (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT):
                await trio.sleep(0.01)
        assert await txns.init_producer_id(TXN, 60_000) == (E.NONE, pid, epoch + 1)
        nursery.cancel_scope.cancel()
