"""How far a consumer group is behind, partition by partition: one computation shared by
/metrics (`ops/metrics.py`) and the status page (`ops/status/page.py`), so the two never
disagree on what a group's lag is.

Lag is the partition's high watermark (what a consumer can read, what ListOffsets(latest)
answers) minus the committed offset, never negative (a commit may be ahead of a watermark
that a truncation moved back). It is known only for partitions this broker holds a replica
of: in a cluster the group's coordinator may host only some of its partitions, and then the
others' lag is unknown here (None), not zero.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pybroker.coordinator.group_records import OffsetAndMetadata
    from pybroker.replica.manager import ReplicaManager

__all__ = ["PartitionLag", "group_lag", "total_lag"]


@dataclass(frozen=True, slots=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int
    # The high watermark of this broker's replica; None when it holds none.
    end: int | None

    @property
    def lag(self) -> int | None:
        return None if self.end is None else max(0, self.end - self.committed)


def group_lag(offsets: Mapping[tuple[str, int], "OffsetAndMetadata"],
              replicas: "ReplicaManager") -> Iterator[PartitionLag]:
    """One group's committed offsets (GroupStateMachine.offsets[group]) with their lag, in the
    order they are stored."""
    for (topic, partition), committed in offsets.items():
        part = replicas.hosted_partition(topic, partition)
        yield PartitionLag(topic, partition, committed.offset,
                           None if part is None else part.high_watermark)


def total_lag(lags: Iterator[PartitionLag]) -> int:
    """The sum over the partitions whose lag is known here."""
    return sum(lag.lag or 0 for lag in lags)
