"""Which compacted log to clean next, and how far each is clean (Kafka's LogCleanerManager).

Theory of operation. A compacted log ("compact" or "compact,delete" in cleanup.policy) is
split at its *first dirty offset*, kept per log in `cleaner-offset-checkpoint` (one per log
dir, Kafka's text format): below it the log has been cleaned, from it on records may repeat
keys. This module owns that split and the choice of what to clean; the cleaning itself and the
swap are `cleaner.LogCleaner`'s, which reports back through `done_cleaning` and
`mark_uncleanable`.

Planning (event-loop thread, `plan`, `grab_filthiest_log`): the cleanable range ends at the
*first uncleanable offset*: the active segment's base, the last stable offset (the high
watermark, or the first offset of a transaction not yet decided and replicated), and, with
min.compaction.lag.ms, the first segment holding a record younger than the lag; only whole
segments below it count. The log is cleaned when its dirty ratio (dirty bytes / cleanable
bytes) exceeds min.cleanable.dirty.ratio, when its oldest dirty record is older than
max.compaction.lag.ms, or when a tombstone it keeps has reached its delete horizon. Each
segment read gets its own descriptor, opened here, so retention closing a segment meanwhile
is harmless.

The earliest pending delete horizon of each log is remembered (in memory), so the log is
cleaned again when it is reached even if nothing new was written. A checkpoint belongs to the
PartitionLog object it was taken for: a topic deleted and recreated under the same name starts
dirty from its log start. A log whose planning or cleaning fails is left alone until the broker
restarts, as Kafka marks a partition uncleanable.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from protocol.topic_partition import TopicPartition
from pybroker.storage.checkpoint import read_offsets, write_offsets
from pybroker.storage.log_config import LONG_MAX
from pybroker.storage.segment import LogSegment

if TYPE_CHECKING:
    from pybroker.storage.log_manager import LogManager
    from pybroker.storage.partition_log import PartitionLog
    from pybroker.storage.transaction_index import AbortedTxn

__all__ = ["LogCleanerManager", "CleaningPlan", "SourceSegment", "CLEANER_CHECKPOINT"]

# The cleaner's one logger, as before planning had a module of its own: log settings that
# name it keep covering every cleaner message.
log = logging.getLogger("pybroker.storage.cleaner")

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class SourceSegment:
    """A segment as the cleaner reads it: through its own descriptor, up to its size at
    planning time (segments below the active one only change by truncation or deletion,
    which the commit detects)."""

    segment: LogSegment
    size: int
    next_base: int  # base offset of the following segment: an upper bound of this one's
    fd: int = -1


@dataclass
class CleaningPlan:
    """What planning chose for one log; cleaning consumes it (closing its descriptors)."""

    log: PartitionLog
    first_dirty: int
    first_uncleanable: int
    sources: list[SourceSegment]  # every cleanable segment, from the log's first
    first_dirty_index: int  # sources[first_dirty_index:] are dirty
    clean_bytes: int
    dirty_bytes: int
    now_ms: int
    reason: str
    # The aborted transactions of the cleanable range (`.txnindex` entries), read here on
    # the event loop so that cleaning never reads an index the log may be appending to.
    aborted: list[AbortedTxn] = field(default_factory=list)

    @property
    def topic_partition(self) -> TopicPartition:
        return self.log.topic, self.log.partition

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    def close(self) -> None:
        for src in self.sources:
            if src.fd >= 0:
                os.close(src.fd)
                src.fd = -1


class LogCleanerManager:
    """The cleaner's bookkeeping over a LogManager's logs: checkpoints, delete horizons, the
    logs left alone, and the plans. Event-loop thread only, except `write_checkpoint_files`
    (see the module docstring)."""

    def __init__(self, logs: LogManager) -> None:
        self.logs = logs
        self._checkpoints: dict[TopicPartition, int] = {}
        for log_dir in logs.online_dirs:  # an offline dir is not read (KIP-112)
            self._checkpoints.update(read_offsets(log_dir / CLEANER_CHECKPOINT))
        # The log each checkpoint belongs to: a topic deleted and recreated under the same
        # name is a new PartitionLog object and starts dirty from its log start.
        self._owners: dict[TopicPartition, PartitionLog] = {}
        self._horizons: dict[TopicPartition, int] = {}
        self._uncleanable: dict[TopicPartition, PartitionLog] = {}
        self._dirty_dirs: set[Path] = set()

    # -- checkpoints ---------------------------------------------------------------------------
    def first_dirty_offset(self, plog: PartitionLog) -> int:
        """The checkpointed first dirty offset, reset to the log start if it is stale."""
        tp = (plog.topic, plog.partition)
        owner = self._owners.get(tp)
        if owner is not plog:
            if owner is not None:
                self._checkpoints.pop(tp, None)
                self._horizons.pop(tp, None)
            self._owners[tp] = plog
        offset = self._checkpoints.get(tp, plog.log_start_offset)
        if offset < plog.log_start_offset or offset > plog.log_end_offset:
            offset = plog.log_start_offset
        return offset

    def checkpoint_files(self) -> list[tuple[Path, dict[TopicPartition, int]]]:
        """The `cleaner-offset-checkpoint` files whose content changed since last asked, with
        their entries (a snapshot: write them from any thread)."""
        out = []
        for log_dir in sorted(self._dirty_dirs):
            live = {}
            for plog in self.logs.logs():
                tp = (plog.topic, plog.partition)
                if (tp in self._checkpoints and self._owners.get(tp) is plog
                        and self.logs.log_dir_of(*tp) == log_dir):
                    live[tp] = self._checkpoints[tp]
            out.append((log_dir / CLEANER_CHECKPOINT, live))
        self._dirty_dirs.clear()
        return out

    @staticmethod
    def write_checkpoint_files(files: list[tuple[Path, dict[TopicPartition, int]]]) -> None:
        for path, entries in files:
            write_offsets(path, entries)

    def done_cleaning(self, plog: PartitionLog, end_offset: int, next_horizon: int, *,
                      write_checkpoint: bool) -> None:
        """A cleaning of `plog` up to `end_offset` is committed: move its first dirty offset
        there (unless the log was replaced meanwhile) and remember the earliest delete horizon
        it keeps (LONG_MAX: none). With `write_checkpoint=False` the caller writes the files
        later, off the event loop (`checkpoint_files`, `write_checkpoint_files`)."""
        tp = (plog.topic, plog.partition)
        if self._owners.get(tp) is plog and self.logs.get(*tp) is plog:
            self._checkpoints[tp] = end_offset
            log_dir = self.logs.log_dir_of(*tp)
            if log_dir is not None:
                self._dirty_dirs.add(log_dir)
                if write_checkpoint:
                    self.write_checkpoint_files(self.checkpoint_files())
        if next_horizon < LONG_MAX:
            self._horizons[tp] = next_horizon
        else:
            self._horizons.pop(tp, None)

    def mark_uncleanable(self, plog: PartitionLog) -> None:
        """Leave `plog` alone until restart (its planning or cleaning failed)."""
        self._uncleanable[(plog.topic, plog.partition)] = plog

    # -- planning ------------------------------------------------------------------------------
    def plan(self, plog: PartitionLog, now_ms: int | None = None, *,
             force: bool = False) -> CleaningPlan | None:
        """Choose what to clean in `plog`, or None if it needs no cleaning now.

        `force` ignores the dirty ratio (not the lags, nor the active segment).
        """
        plan = self._assess(plog, now_ms, force)
        if plan is not None:
            self._open(plan)
        return plan

    @staticmethod
    def _open(plan: CleaningPlan) -> None:
        """Give the chosen plan its descriptors and its aborted transactions."""
        plan.aborted = plan.log.collect_aborted_transactions(
            plan.sources[0].segment.base_offset, plan.first_uncleanable)
        try:
            for src in plan.sources:
                src.fd = os.open(src.segment.log_path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            plan.close()
            raise

    def _assess(self, plog: PartitionLog, now_ms: int | None,
                force: bool) -> CleaningPlan | None:
        now = _now_ms() if now_ms is None else now_ms
        tp = (plog.topic, plog.partition)
        if plog.closed or not plog.config.compact_enabled:
            return None
        if self._uncleanable.get(tp) is plog:
            return None
        config = plog.config
        segments = list(plog.segments)
        if len(segments) < 2:
            return None
        first_dirty = self.first_dirty_offset(plog)
        limit = min(segments[-1].base_offset, plog.last_stable_offset)
        if config.min_compaction_lag_ms > 0:
            for seg, nxt in zip(segments, segments[1:]):
                if nxt.base_offset > first_dirty and \
                        seg.largest_timestamp > now - config.min_compaction_lag_ms:
                    limit = min(limit, seg.base_offset)
                    break
        sources: list[SourceSegment] = []
        for seg, nxt in zip(segments, segments[1:]):
            if nxt.base_offset > limit:
                break
            sources.append(SourceSegment(seg, seg.size, nxt.base_offset))
        if not sources:
            return None
        dirty_index = next((i for i, s in enumerate(sources) if s.next_base > first_dirty),
                           len(sources))
        clean_bytes = sum(s.size for s in sources[:dirty_index])
        dirty_bytes = sum(s.size for s in sources[dirty_index:])
        total = clean_bytes + dirty_bytes
        ratio = dirty_bytes / total if total else 0.0
        reason = ""
        if force:
            reason = "forced"
        elif dirty_bytes > 0 and ratio > config.min_cleanable_dirty_ratio:
            reason = f"dirty ratio {ratio:.2f} > {config.min_cleanable_dirty_ratio}"
        elif dirty_bytes > 0 and self._overdue(sources[dirty_index], config.max_compaction_lag_ms,
                                               now):
            reason = "max.compaction.lag.ms passed"
        elif self._horizons.get(tp, LONG_MAX) <= now:
            reason = "a tombstone reached its delete horizon"
        if not reason:
            return None
        return CleaningPlan(plog, first_dirty, limit, sources, dirty_index, clean_bytes,
                            dirty_bytes, now, reason)

    @staticmethod
    def _overdue(first_dirty: SourceSegment, max_lag_ms: int, now: int) -> bool:
        """Kafka's rule: the first batch of the first dirty segment is older than the lag."""
        if max_lag_ms >= LONG_MAX:
            return False
        found = first_dirty.segment.translate_offset(first_dirty.segment.base_offset)
        if found is None:
            return False
        ts = found[1].max_timestamp
        return 0 <= ts < now - max_lag_ms

    def grab_filthiest_log(self, now_ms: int | None = None, *,
                           exclude: set[TopicPartition] | None = None) -> CleaningPlan | None:
        """The plan of the log most in need of cleaning (highest dirty ratio), or None."""
        now = _now_ms() if now_ms is None else now_ms
        best: CleaningPlan | None = None
        for plog in self.logs.logs():
            if exclude and (plog.topic, plog.partition) in exclude:
                continue
            try:
                plan = self._assess(plog, now, False)
            except Exception:
                log.exception("cannot plan cleaning %s; leaving it alone", plog)
                self.mark_uncleanable(plog)
                continue
            if plan is not None and (best is None or plan.dirty_ratio > best.dirty_ratio):
                best = plan
        if best is not None:
            self._open(best)
        return best
