"""A segment's `.txnindex`: the aborted transactions whose ABORT marker is in the segment
(Kafka's TransactionIndex and AbortedTxn).

Theory of operation. A read_committed consumer receives aborted data along with committed
data and drops it itself, so a fetch answers, beside the records, with the (producer id, first
offset) of every aborted transaction the fetched range overlaps. Those are found here rather
than by reading the log: one 34-byte entry per aborted transaction, Kafka's layout,

    int16 version (0), int64 producerId, int64 firstOffset, int64 lastOffset (the marker),
    int64 lastStableOffset (the partition's LSO right after the abort),

appended to the segment holding the marker, so entries are in marker order. The last stable
offset bounds searches: once an entry's is at or past the upper end of a fetch, every
transaction starting below that end has completed, so no later segment can hold one that
matters.

The file is optional: a segment without one has no aborted transaction, so it is created by
the first entry. Entries are few (one per aborted transaction) and appended one at a time
with a single write; the file is fsynced with its segment. Like the other indexes it is
derived data: after an unclean shutdown the log rebuilds it while replaying producer state
(`PartitionLog`). A file whose size is not a whole number of entries lost a torn last write:
it is cut back to whole entries.
"""
from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pybroker.storage.producer_state import CompletedTxn

__all__ = ["AbortedTxn", "TransactionIndex", "TXN_ENTRY"]

log = logging.getLogger(__name__)

TXN_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first, last, last stable offset
_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int

    def pack(self) -> bytes:
        return TXN_ENTRY.pack(_VERSION, self.producer_id, self.first_offset, self.last_offset,
                              self.last_stable_offset)


class TransactionIndex:
    """The aborted transactions of one segment, loaded on first use and mirrored to a file."""

    __slots__ = ("_dir", "_name", "_entries", "_dirty", "_deleted")

    def __init__(self, directory: Path, name: str) -> None:
        self._dir = directory
        self._name = name
        self._entries: list[AbortedTxn] | None = None  # None: not read yet
        self._dirty = False
        self._deleted = False

    @property
    def path(self) -> Path:
        return self._dir / self._name

    # -- reading -----------------------------------------------------------------------------
    def _load(self) -> list[AbortedTxn]:
        entries = self._entries
        if entries is not None:
            return entries
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        whole = len(data) - len(data) % TXN_ENTRY.size
        if whole != len(data):
            log.warning("%s: size %d is not a multiple of %d; dropping the torn last entry",
                        self.path, len(data), TXN_ENTRY.size)
            os.truncate(self.path, whole)
        entries = []
        for pos in range(0, whole, TXN_ENTRY.size):
            version, pid, first, last, lso = TXN_ENTRY.unpack_from(data, pos)
            if version != _VERSION:
                log.warning("%s: entry at %d has unknown version %d; ignoring the rest",
                            self.path, pos, version)
                break
            entries.append(AbortedTxn(pid, first, last, lso))
        self._entries = entries
        return entries

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._load())

    def collect(self, start_offset: int, upper_offset: int) -> tuple[list[AbortedTxn], bool]:
        """The entries whose transaction overlaps [start_offset, upper_offset) (last offset
        at or after the start, first offset below the upper end), and whether the search is
        complete: an entry's last stable offset reached `upper_offset`, so later segments
        hold nothing that overlaps (see the module docstring)."""
        out = []
        for entry in self._load():
            if entry.last_offset >= start_offset and entry.first_offset < upper_offset:
                out.append(entry)
            if entry.last_stable_offset >= upper_offset:
                return out, True
        return out, False

    # -- writing -----------------------------------------------------------------------------
    def append(self, entry: AbortedTxn) -> None:
        """Add an entry (markers come in offset order); written to the file at once.

        ValueError if its marker is not after the last entry's: the index would no longer
        be in marker order, which searches rely on.
        """
        entries = self._load()
        if entries and entry.last_offset <= entries[-1].last_offset:
            raise ValueError(f"{self.path}: aborted transaction ending at {entry.last_offset} "
                             f"is not after {entries[-1].last_offset}")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, entry.pack())
        finally:
            os.close(fd)
        entries.append(entry)
        self._dirty = True
        self._deleted = False

    def append_completed(self, txn: CompletedTxn) -> None:
        """Index a transaction a marker in this segment ended, if it aborted."""
        if txn.is_aborted:
            self.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset,
                                   txn.last_stable_offset))

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after `offset` (the log was cut there)."""
        entries = self._load()
        keep = len(entries)
        while keep and entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep == len(entries):
            return
        del entries[keep:]
        self._rewrite(entries)

    def reset(self) -> None:
        """Forget every entry and remove the file (before a rebuild)."""
        self._entries = []
        self.path.unlink(missing_ok=True)
        self._dirty = False

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        if not entries:
            self.path.unlink(missing_ok=True)
            self._dirty = False
            return
        os.truncate(self.path, len(entries) * TXN_ENTRY.size)
        self._dirty = True

    def flush(self) -> None:
        """fsync the file if an entry was written since the last flush."""
        if not self._dirty or self._deleted:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            self._dirty = False
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._dirty = False

    def close(self) -> None:
        """Nothing is held open; kept for symmetry with the other indexes."""

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        self._deleted = True

    def rename(self, path: Path) -> None:
        """Move the file (if there is one) to `path`; the entries in memory stay."""
        try:
            os.rename(self.path, path)
        except FileNotFoundError:
            pass
        self._dir, self._name = path.parent, path.name
