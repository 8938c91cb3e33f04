"""What the log cleaner knows about transactions while it walks a log (Kafka's
CleanedTransactionMetadata).

Theory of operation. Compaction must drop the data of aborted transactions (no consumer may
ever see it, and a key's aborted value must not supersede its committed one), keep committed
transactional data like any other, and keep each marker while any batch of its transaction is
left (replay at load would otherwise think the transaction still open). Batches carry no
outcome, so the cleaner learns it from the `.txnindex` entries of the range it cleans, taken
when it plans: walking the batches in offset order, an aborted transaction becomes "aborting"
for its producer from its first offset until its ABORT marker, and every transactional batch
of that producer in between is aborted data. A transactional batch of any other producer
belongs to a transaction that will commit, which its COMMIT marker ends.

Each marker then tells whether batches of its transaction were seen on this walk, which, since
every walk starts at the log start, is whether any is left in the log: if none were, the
marker may go once its delete horizon passes (`record_filter.filter_control_batch`).
"""
from __future__ import annotations

from collections import deque

from protocol.records.batch import TRANSACTIONAL, BatchHeader
from protocol.records.record import ControlRecord, ControlType
from pybroker.storage.transaction_index import AbortedTxn

__all__ = ["CleanedTransactions"]


class CleanedTransactions:
    """One walk over a log's batches, in offset order; see the module docstring."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._pending = deque(sorted(aborted, key=lambda txn: txn.first_offset))
        self._by_marker = {txn.last_offset: txn for txn in aborted}
        # producer id -> [its aborted transaction under way, whether a batch of it was seen]
        self._aborting: dict[int, list] = {}
        self._committing: set[int] = set()

    def _start_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0].first_offset <= offset:
            txn = pending.popleft()
            self._aborting.setdefault(txn.producer_id, [txn, False])

    def is_aborted(self, header: BatchHeader) -> bool:
        """Whether this data batch belongs to an aborted transaction (drop it)."""
        self._start_up_to(header.last_offset)
        if not header.attributes & TRANSACTIONAL:
            return False
        aborting = self._aborting.get(header.producer_id)
        if aborting is not None:
            aborting[1] = True
            return True
        self._committing.add(header.producer_id)
        return False

    def marker_removable(self, header: BatchHeader, record: ControlRecord | None) -> bool:
        """Whether this control batch's transaction has no batch left, so that the marker
        may go at its delete horizon. Markers that cannot be read, or of other control
        types, are kept."""
        self._start_up_to(header.last_offset)
        if record is None:
            return False
        pid = header.producer_id
        if record.type == ControlType.ABORT:
            aborting = self._aborting.pop(pid, None)
            return aborting is None or not aborting[1]
        if record.type == ControlType.COMMIT:
            if pid in self._committing:
                self._committing.discard(pid)
                return False
            return True
        return False

    def aborted_ended_by(self, marker_offset: int) -> AbortedTxn | None:
        """The `.txnindex` entry of the aborted transaction whose marker is at this offset:
        a cleaned segment that keeps the marker keeps the entry."""
        return self._by_marker.get(marker_offset)
