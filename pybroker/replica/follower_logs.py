"""The follower's side of replication: what a fetched partition means for this broker's log
(truncate where the logs diverge, append, follow the leader's high watermark).

`fetcher.py` moves the requests and calls these through its `FollowerLogs` protocol. A mixin
of `ReplicaManager` (`manager.py`), which owns and documents the state.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from pybroker.replica.partition import Partition
from pybroker.replica.purgatory import Purgatory, Watch
from pybroker.storage.partition_log import PartitionLog

__all__ = ["FollowerSide"]

log = logging.getLogger(__name__)


class FollowerSide:
    """Applying fetch responses to followed partitions; see `ReplicaManager` for the state."""

    purgatory: Purgatory
    _partitions: dict[TopicPartition, Partition]
    log_dir_failed: Callable[[PartitionLog, OSError], Any]  # ReplicaManager's

    # -- following (a cluster) -------------------------------------------------------------------
    def fetch_position(self, tp: TopicPartition) -> tuple[int, int, int] | None:
        """Where the fetcher of a followed partition fetches from: (the log end, the epoch of
        the last batch, the log start); None while the log does not exist."""
        part = self._partitions.get(tp)
        if part is None or part.is_leader or part.log.closed:
            return None
        plog = part.log
        return plog.log_end_offset, plog.latest_epoch, plog.log_start_offset

    def apply_fetched(self, tp: TopicPartition, leader_epoch: int, data: Any) -> ErrorCode:
        """One partition of a fetch response from the leader at `leader_epoch`: truncate where
        the logs diverge, append the batches unchanged, and move the follower's high
        watermark to min(the leader's, this log's end). Returns the error the fetcher backs
        off on (NONE when it can fetch again at once)."""
        part = self._partitions.get(tp)
        if part is None or part.is_leader or part.leader_epoch != leader_epoch:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        plog = part.log
        code = ErrorCode(data.error_code)
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            return self._out_of_range(part, data)
        if code != ErrorCode.NONE:
            return code
        diverging = data.get("diverging_epoch")
        if diverging is not None and diverging.end_offset >= 0:
            self._truncate_diverging(part, diverging.epoch, diverging.end_offset)
            return ErrorCode.NONE
        records = data.records
        if records:
            try:
                plog.append_as_follower(records)
            except OSError as exc:
                self.log_dir_failed(plog, exc)
                return ErrorCode.KAFKA_STORAGE_ERROR
            except Exception as exc:  # a torn or unexpected batch: fetch it again
                log.warning("replica %s-%d: cannot append fetched batches: %s", tp[0], tp[1],
                            exc)
                return ErrorCode.CORRUPT_MESSAGE
        if part.follow_leader_high_watermark(data.high_watermark):
            self.purgatory.notify(tp, Watch.HIGH_WATERMARK)  # consumers reading here
        return ErrorCode.NONE

    def _truncate_diverging(self, part: Partition, epoch: int, end_offset: int) -> None:
        """Kafka's getOffsetTruncationState: truncate to the leader's end of `epoch`, or, if
        this log's history of that epoch is shorter or differs, to where ours ends (the next
        fetch asks again with the earlier epoch)."""
        plog = part.log
        ours_epoch, ours_end = plog.end_offset_for_epoch(epoch)
        if ours_epoch == epoch:
            target = min(end_offset, ours_end, plog.log_end_offset)
        elif ours_epoch >= 0:
            target = min(ours_end, plog.log_end_offset)
        else:
            target = min(end_offset, plog.log_end_offset)
        if plog.truncate_to(target):
            log.info("replica %s-%d truncated to %d (leader epoch %d ends at %d there)",
                     part.topic, part.partition, target, epoch, end_offset)
        # An epoch entry with no batches (left from leading) must go too, or the next
        # fetch names it again.
        plog.leader_epoch_cache.truncate_from_end(plog.log_end_offset)

    def _out_of_range(self, part: Partition, data: Any) -> ErrorCode:
        """The leader has nothing this log can continue from (it starts after our end, or
        knows none of our epochs): start over, empty, at the leader's log start. Only this
        replica's copy is dropped; the leader has everything committed."""
        plog = part.log
        log.warning("replica %s-%d has no history in common with the leader: starting over "
                    "at offset %d", part.topic, part.partition, data.log_start_offset)
        plog.truncate_fully_and_start_at(max(0, data.log_start_offset))
        return ErrorCode.NONE
