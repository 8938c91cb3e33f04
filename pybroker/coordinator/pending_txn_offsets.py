"""Offsets committed inside transactions that have not ended yet (TxnOffsetCommit, KIP-98).

A transactional offset commit is in `__consumer_offsets` as soon as it is acknowledged, in a
transactional batch of its producer, but it counts only once that producer's COMMIT marker
follows it in the same partition; an ABORT marker drops it. Until then it is pending: OffsetFetch
does not return it, and answers UNSTABLE_OFFSET_COMMIT for its partition to a consumer that asks
for stable offsets. Pending offsets are kept by producer, since one marker ends everything its
producer wrote to a partition, and remember the log offset of their batch: at the commit marker
a pending offset replaces the committed one only if its record is the later of the two in the
log (Kafka's rule, so a plain OffsetCommit written after the transactional one wins).

A group stays "in a transaction" from its first pending offset until the marker, even if a
tombstone removed that offset meanwhile (Kafka's openTransactionsByGroup): retention does not
delete such a group.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from protocol.topic_partition import TopicPartition
from pybroker.coordinator.group_records import OffsetAndMetadata

__all__ = ["PositionedOffset", "PendingTxnOffsets"]


@dataclass(frozen=True)
class PositionedOffset:
    value: OffsetAndMetadata
    log_offset: int  # of the batch that holds the record


class PendingTxnOffsets:
    def __init__(self) -> None:
        # producer id -> group -> partition -> offset; a group maps to {} once tombstones
        # removed its offsets, so that it stays open until the marker.
        self._by_producer: dict[int, dict[str, dict[TopicPartition, PositionedOffset]]] = {}
        self._producers_of: dict[str, set[int]] = {}

    def add(self, producer_id: int, group: str, tp: TopicPartition, value: OffsetAndMetadata,
            log_offset: int) -> None:
        """A transactional commit record, replayed: a retried one replaces the earlier one."""
        groups = self._by_producer.setdefault(producer_id, {})
        groups.setdefault(group, {})[tp] = PositionedOffset(value, log_offset)
        self._producers_of.setdefault(group, set()).add(producer_id)

    def remove_partition(self, group: str, tp: TopicPartition) -> None:
        """An offset tombstone: it removes the partition's pending offsets too."""
        for producer_id in self._producers_of.get(group, ()):
            self._by_producer[producer_id][group].pop(tp, None)

    def remove_group(self, group: str) -> None:
        """The group is gone (its tombstone): whatever it had pending goes with it."""
        for producer_id in self._producers_of.pop(group, ()):
            groups = self._by_producer[producer_id]
            del groups[group]
            if not groups:
                del self._by_producer[producer_id]

    def complete(self, producer_id: int, include: Callable[[str], bool]
                 ) -> dict[str, dict[TopicPartition, PositionedOffset]]:
        """Take out the producer's pending offsets of the groups `include` accepts (those of
        the partition whose marker was written), by group."""
        groups = self._by_producer.get(producer_id)
        if groups is None:
            return {}
        done = {g: offsets for g, offsets in groups.items() if include(g)}
        for group in done:
            del groups[group]
            open_producers = self._producers_of[group]
            open_producers.discard(producer_id)
            if not open_producers:
                del self._producers_of[group]
        if not groups:
            del self._by_producer[producer_id]
        return done

    def is_pending(self, group: str, tp: TopicPartition) -> bool:
        return any(tp in self._by_producer[p][group] for p in self._producers_of.get(group, ()))

    def partitions(self, group: str) -> set[TopicPartition]:
        return {tp for p in self._producers_of.get(group, ())
                for tp in self._by_producer[p][group]}

    def has_open(self, group: str) -> bool:
        """Whether a transaction that committed offsets to the group has not ended."""
        return group in self._producers_of

    def groups(self) -> list[str]:
        """Every group with a transaction open."""
        return list(self._producers_of)

    def producers(self, group: str) -> set[int]:
        return set(self._producers_of.get(group, ()))

    def pending(self, producer_id: int, group: str) -> dict[TopicPartition, OffsetAndMetadata]:
        """The producer's pending offsets for the group (for inspection and tests)."""
        offsets = self._by_producer.get(producer_id, {}).get(group, {})
        return {tp: p.value for tp, p in offsets.items()}
