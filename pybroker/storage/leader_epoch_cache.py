"""Leader epoch -> first offset written in that epoch (Kafka's LeaderEpochFileCache).

Every batch is stamped with the epoch of the leader that appended it; this cache records where
each epoch began, in the partition's `leader-epoch-checkpoint` file (Kafka's text format:
version 0, a count, then "epoch start_offset" lines). It answers OffsetForLeaderEpoch: "where
did epoch E end on this replica?", the question a follower asks after a leader change to find
where its log diverges from the new leader's, and then truncate there.

Entries are strictly increasing in both epoch and start offset. The file is rewritten (small,
atomic, fsynced) whenever an epoch is added or the log is truncated at its end, which happens
once per leader change, not per append: a checkpoint missing an entry would answer wrongly.
Moving the log start (retention, DeleteRecords) only leaves stale entries before it, which
loading drops again (`truncate_from_start` at every load), so that rewrite waits for
`write_pending`, which the broker runs in a worker thread: retention expiring segments of
many partitions at once would otherwise fsync one file per partition on the event loop
(Kafka moved the same write to a background task, KAFKA-16541).
"""
from __future__ import annotations

import logging
import threading
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from pathlib import Path

from pybroker.storage.checkpoint import CheckpointError, read_checkpoint, write_checkpoint

__all__ = ["LeaderEpochFileCache", "EpochEntry", "LEADER_EPOCH_CHECKPOINT", "UNDEFINED_EPOCH",
           "UNDEFINED_EPOCH_OFFSET"]

log = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


class LeaderEpochFileCache:
    def __init__(self, directory: Path) -> None:
        self._dir = directory
        self._entries: list[EpochEntry] = []
        self._pending = False  # entries changed since the file was last written
        # Held while writing, so a deferred write in a worker thread cannot put an older list
        # over a newer one: whoever holds it writes the entries as they are then.
        self._write_lock = threading.Lock()
        try:
            rows = read_checkpoint(self.path, 2)
        except (CheckpointError, OSError) as exc:
            log.warning("ignoring unreadable %s: %s", self.path, exc)
            rows = None
            self._exists = True
        else:
            self._exists = rows is not None
        for epoch, offset in rows or ():
            try:
                entry = EpochEntry(int(epoch), int(offset))
            except ValueError:
                log.warning("ignoring bad entry in %s: %s %s", self.path, epoch, offset)
                continue
            if self._entries and (entry.epoch <= self._entries[-1].epoch
                                  or entry.start_offset < self._entries[-1].start_offset):
                log.warning("ignoring out-of-order entry in %s: %s", self.path, entry)
                continue
            self._entries.append(entry)

    @property
    def path(self) -> Path:
        return self._dir / LEADER_EPOCH_CHECKPOINT

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def _flush(self, sync: bool = True) -> None:
        with self._write_lock:
            self._pending = False
            write_checkpoint(self.path,
                             [f"{e.epoch} {e.start_offset}" for e in list(self._entries)],
                             sync=sync, new=not self._exists)
            self._exists = True

    def write_pending(self, *, sync: bool = True) -> bool:
        """Write a change `truncate_from_start` deferred; True if there was one. Blocking (an
        fsync, unless the caller syncs the file system itself): for a worker thread."""
        if not self._pending:
            return False
        self._flush(sync)
        return True

    def assign(self, epoch: int, start_offset: int, *, sync: bool = True) -> bool:
        """Note that `epoch` starts at `start_offset`; True if the cache changed.

        A repeat of the latest epoch is ignored. Entries that would break monotonicity (an
        epoch at or above the new one, or a start offset at or beyond it) are dropped first,
        as Kafka does: the newest information about the log wins.
        """
        if epoch < 0:
            return False
        if self._entries:
            last = self._entries[-1]
            if last.epoch == epoch and last.start_offset <= start_offset:
                return False
        self._entries = [e for e in self._entries
                         if e.epoch < epoch and e.start_offset < start_offset]
        self._entries.append(EpochEntry(epoch, start_offset))
        self._flush(sync)
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetForLeaderEpoch reports them.

        The end offset of an epoch is the start offset of the next higher epoch (or the log end
        for the latest epoch). A requested epoch we never saw maps to the largest epoch below
        it; one above every epoch we know, or no entries at all, gives (-1, -1).
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._entries[-1].epoch:
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        higher = bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = higher - 1
        if floor < 0:
            return requested_epoch, self._entries[higher].start_offset
        return self._entries[floor].epoch, self._entries[higher].start_offset

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose range holds `offset`, or -1 before the first entry."""
        starts = [e.start_offset for e in self._entries]
        i = bisect_right(starts, offset) - 1
        return self._entries[i].epoch if i >= 0 else UNDEFINED_EPOCH

    def truncate_from_end(self, end_offset: int, *, defer: bool = False) -> None:
        """Drop epochs starting at or after `end_offset` (the log was truncated there).

        With `defer` the file is rewritten by `write_pending`: for loading, where the entries
        dropped describe offsets that are not in the log (a crash before the write drops
        them again at the next start), so the write need not hold up the start.
        """
        starts = [e.start_offset for e in self._entries]
        keep = bisect_left(starts, end_offset)
        if keep < len(self._entries):
            del self._entries[keep:]
            if defer:
                self._pending = True
            else:
                self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget epochs wholly before a new log start offset; the epoch holding it now
        starts there."""
        starts = [e.start_offset for e in self._entries]
        last_before = bisect_right(starts, start_offset) - 1
        if last_before < 0:
            return
        entry = self._entries[last_before]
        if last_before == 0 and entry.start_offset == start_offset:
            return
        self._entries = [EpochEntry(entry.epoch, start_offset)] + self._entries[last_before + 1:]
        self._pending = True  # written by `write_pending`, off the event loop

    def clear(self) -> None:
        if self._entries or self.path.exists():
            self._entries = []
            self._flush()
