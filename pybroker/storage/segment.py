"""One log segment: a `.log` of wire-format batches with its `.index`, `.timeindex` and, once
a transaction aborts in it, `.txnindex`.

One module on purpose (about 660 lines): a segment's files change together (append, index, roll,
truncate, recover).

Files are named by the segment's base offset, zero-padded to 20 digits, so `ls` sorts them in
offset order (`00000000000000001234.log`), exactly as Kafka names them.

Theory of operation. The `.log` holds batches back to back, byte for byte as producers sent
them except for the fields the broker patches (base offset, leader epoch, LogAppendTime). It is
only appended to (one `os.write` per produce) and read with `os.pread`, never read whole:
finding an offset is a binary search in the offset index and a short forward walk over batch
headers from there. The indexes are derived data: after an unclean shutdown, or when an index
file is missing or implausible, they are rebuilt from the log.

What a segment knows about its tail (next offset, largest timestamp and where it is) is
computed lazily from the last index entries plus a scan of the few batches after them, so
opening a log never reads whole segments.

The `.log` descriptor is not the segment's own: it comes from a `FileCache` (`files`), which
may close it to open another file, so at most a bounded number are open however many segments
exist (`files.py`). Index files hold no descriptor at all (`abstract_index`).

Nothing here is thread-safe by itself; `PartitionLog` serialises structural changes. `flush`
may run in a worker thread while the event loop appends, which is safe because appends only add
bytes and fsync covers whatever has been written; it fsyncs through a descriptor of its own.
"""
from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from protocol.primitives import FileRegion
from protocol.records.batch import HEADER_SIZE, BatchHeader, walk_batches
from protocol.records.record import ControlRecord, control_record_of
from protocol.records.types import RecordError
from pybroker.storage.abstract_index import AbstractIndex, CorruptIndexError
from pybroker.storage.batch_walk import BatchWalk
from pybroker.storage.files import FileCache, fsync_directory, fsync_file
from pybroker.storage.log_config import LogConfig
from pybroker.storage.log_info import SegmentRead
from pybroker.storage.offset_index import OffsetIndex
from pybroker.storage.time_index import TimeIndex
from pybroker.storage.transaction_index import TransactionIndex

__all__ = [
    "LogSegment", "SegmentRead", "AppendedBatch", "segment_file_name", "segment_file_names",
    "parse_segment_file_name", "LOG_SUFFIX", "INDEX_SUFFIX", "TIME_INDEX_SUFFIX",
    "TXN_INDEX_SUFFIX",
    "SEGMENT_SUFFIXES", "DELETED_SUFFIX", "CLEANED_SUFFIX", "SWAP_SUFFIX", "INT32_MAX",
    "fsync_directory",
]

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"  # optional: only segments holding an ABORT marker have one
# Every file of a segment, the `.log` first: the one list of them, so that each is created,
# renamed, deleted and recovered everywhere.
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"  # a segment the log cleaner is still writing
SWAP_SUFFIX = ".swap"  # a cleaned segment committed to replace the segments it covers
INT32_MAX = 2**31 - 1

SCAN_CHUNK = 16 * 1024  # forward scans from an index entry: about 2 intervals
RECOVERY_CHUNK = 1024 * 1024  # whole-segment walks (recovery, rebuild, replay)

# (position of the batch inside the appended bytes, its size, base offset, last offset,
#  max timestamp)
AppendedBatch = tuple[int, int, int, int, int]


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def segment_file_names(base_offset: int, file_suffix: str = "") -> tuple[str, ...]:
    """The names of the segment at `base_offset`'s files, in SEGMENT_SUFFIXES order, each
    followed by `file_suffix` (`.cleaned`, `.swap`): for code that handles a segment's files
    by name, before or without opening it (loading, removing a cleaning's leftovers)."""
    return tuple(segment_file_name(base_offset, suffix) + file_suffix
                 for suffix in SEGMENT_SUFFIXES)


def parse_segment_file_name(name: str, file_suffix: str = "") -> tuple[int, str] | None:
    """(base offset, one of SEGMENT_SUFFIXES) if `name` is a segment file followed by
    `file_suffix`, else None: `00000000000000000042.index` -> (42, ".index"), but
    `00000000000000000042.index.swap` only with `file_suffix=".swap"`."""
    if file_suffix:
        if not name.endswith(file_suffix):
            return None
        name = name[:-len(file_suffix)]
    stem, dot, rest = name.partition(".")
    suffix = dot + rest
    if suffix in SEGMENT_SUFFIXES and stem.isdigit():
        return int(stem), suffix
    return None


def _now_ms() -> int:
    return int(time.time() * 1000)


class LogSegment:
    """A `.log` file and its two indexes, named by `base_offset`."""

    def __init__(self, directory: Path, base_offset: int, config: LogConfig, *,
                 create: bool = False, file_suffix: str = "",
                 files: FileCache | None = None) -> None:
        """`file_suffix` (`.cleaned`, `.swap`) names files that are not yet part of the log.
        `files` lends the `.log` descriptor (default: a small cache of the segment's own)."""
        self.files = files if files is not None else FileCache(0)
        self.directory = directory
        self.base_offset = base_offset
        self._log_name, index_name, time_index_name, txn_index_name = segment_file_names(
            base_offset, file_suffix)
        self.offset_index = OffsetIndex(directory / index_name, base_offset,
                                        config.segment_index_bytes, directory=directory)
        self.time_index = TimeIndex(directory / time_index_name, base_offset,
                                    config.segment_index_bytes, directory=directory)
        # Not one of `indexes`: it is not derived from this segment's log alone (an aborted
        # transaction may start in an earlier segment) and its file is optional.
        self.txn_index = TransactionIndex(directory, txn_index_name)
        self.index_interval_bytes = config.index_interval_bytes
        self.created_ms = _now_ms()
        # segment.jitter.ms: taken off this segment's roll age, drawn once as Kafka does, so
        # that partitions created together do not all roll (and get deleted) together.
        jitter = min(config.segment_jitter_ms, config.segment_ms)
        self.roll_jitter_ms = random.randrange(jitter) if jitter > 0 else 0
        self.closed = False
        self._fd: int | None = None
        if create:
            # Created and closed: creating logs runs in a worker thread, which must not take
            # descriptors from the event loop's cache; the first append opens it there.
            fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC,
                         0o644)
            try:
                self._size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            for index in self.indexes:
                if not index.path.exists():
                    index.mark_new()
        else:
            self._size = os.stat(self.log_path).st_size
        self._bytes_since_last_index_entry = 0
        self._indexes_checked = False
        # Where reads ended: offset -> file position of the batch that follows (see
        # `translate_offset`). A consumer's next fetch starts exactly there.
        self._read_ends: dict[int, int] | None = None  # created by the first read
        # Tail state, computed on first need (see module docstring).
        self._tail_loaded = False
        self._next_offset = base_offset
        self._max_timestamp = -1
        self._offset_of_max_timestamp = base_offset
        self._rolling_timestamp: int | None = None

    def __repr__(self) -> str:
        return f"LogSegment({self._log_name}, size={self._size})"

    @property
    def log_path(self) -> Path:
        """Built on use from the directory and a name: a Path per segment cost ~300 bytes."""
        return self.directory / self._log_name

    @log_path.setter
    def log_path(self, path: Path) -> None:  # renames stay in the directory
        self._log_name = path.name

    # -- files -------------------------------------------------------------------------------
    @property
    def indexes(self) -> tuple[AbstractIndex, ...]:
        """The index files, in SEGMENT_SUFFIXES order after the `.log`: flushed, closed,
        renamed and deleted with it. Built on use, not held: a tuple per segment costs memory
        across 100,000 segments."""
        return self.offset_index, self.time_index

    @property
    def fd(self) -> int:
        """The `.log` file descriptor, from the cache (opened on demand). Valid until this
        thread asks the same cache for another file: use it at once, never across an await."""
        if self.closed:
            raise ValueError(f"{self.log_path} is closed")
        return self.files.get(self)

    def _cached_path(self) -> Path:
        return self.log_path

    def _walk(self, start: int, *, chunk: int, verify_crc: bool = False) -> BatchWalk:
        """The batches from file position `start` to the current end (see `BatchWalk`)."""
        return BatchWalk(self.fileno, start, self._size, chunk=chunk, verify_crc=verify_crc)

    def set_files(self, files: FileCache) -> None:
        """Take descriptors from `files` from now on (a log loaded or a segment cleaned with
        a private cache joins the broker's); closes the one held."""
        self.files.close(self)
        self.files = files

    @property
    def size(self) -> int:
        return self._size

    @property
    def is_empty(self) -> bool:
        return self._size == 0

    def flush(self) -> None:
        """fsync the log and its indexes.

        May run in a worker thread while another thread closes the segment (retention,
        truncation): an fsync failing because the file was closed meanwhile is not an error.
        """
        try:
            if not self.closed:
                fsync_file(self.log_path)
            for index in self.indexes:
                index.flush()
            self.txn_index.flush()
        except OSError:
            if not self.closed:
                raise

    def write_indexes(self) -> None:
        """Append the index entries their files lack, without fsync (the caller syncs the
        whole file system once: recovery, clean shutdown)."""
        for index in self.indexes:
            index.write_pending()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.files.close(self)
        for index in self.indexes:
            index.close()

    def close_handles(self) -> None:
        """Release the descriptor and write nothing: the segment's dir has failed, and a
        write there could only fail again (Kafka's closeHandlers)."""
        if self.closed:
            return
        self.closed = True
        self.files.close(self)

    def delete(self) -> None:
        """Close and remove the segment's files (whichever still exist)."""
        self.close()
        self.log_path.unlink(missing_ok=True)
        for index in self.indexes:
            index.delete()
        self.txn_index.delete()

    def rename_for_deletion(self) -> None:
        """Append `.deleted` to the file names; open descriptors keep working until `delete`.

        A crash after this leaves only `.deleted` files, which the next load removes.
        """
        new_log = self.log_path.with_name(self.log_path.name + DELETED_SUFFIX)
        os.rename(self.log_path, new_log)
        self.log_path = new_log
        for index in self.indexes:
            index.rename(index.path.with_name(index.path.name + DELETED_SUFFIX))
        txn = self.txn_index
        txn.rename(txn.path.with_name(txn.path.name + DELETED_SUFFIX))

    def change_file_suffixes(self, old: str, new: str) -> None:
        """Rename the segment's files from `<name><old>` to `<name><new>` (Kafka's
        changeFileSuffixes); open descriptors keep working.

        The indexes go first and the `.log` last: loading keys on the `.log` name, and an
        index whose log is elsewhere is just rebuilt or removed.
        """
        for index in self.indexes:
            index.rename(_replace_suffix(index.path, old, new))
        self.txn_index.rename(_replace_suffix(self.txn_index.path, old, new))
        new_log = _replace_suffix(self.log_path, old, new)
        os.rename(self.log_path, new_log)
        self.log_path = new_log

    @property
    def last_modified_ms(self) -> int:
        try:
            return int(os.stat(self.log_path).st_mtime * 1000)
        except FileNotFoundError:
            return 0

    # -- tail state --------------------------------------------------------------------------
    def ensure_indexes(self, *, strict: bool = False) -> None:
        """Load and sanity-check both indexes once, rebuilding them from the log if they are
        implausible (a torn entry, entries out of order or pointing past the log). With
        `strict`, raise CorruptIndexError instead so the caller can run a full recovery."""
        if self._indexes_checked:
            return
        try:
            for index in self.indexes:
                index.load()
            self.offset_index.check_positions(self._size)
        except CorruptIndexError as exc:
            if strict:
                raise
            log.warning("%s: %s; rebuilding indexes", self.log_path, exc)
            self.rebuild_indexes()
        self._indexes_checked = True

    def _ensure_tail(self) -> None:
        if self._tail_loaded:
            return
        self.ensure_indexes()
        _, position = self.offset_index.lookup(2**63 - 1)
        ts, ts_offset = self.time_index.last_entry()
        next_offset, max_ts, max_offset = self.base_offset, ts, ts_offset
        for _, header in self._walk(position, chunk=SCAN_CHUNK):
            next_offset = header.next_offset
            if header.max_timestamp > max_ts:
                max_ts, max_offset = header.max_timestamp, header.base_offset
        self._next_offset = next_offset
        self._max_timestamp = max_ts
        self._offset_of_max_timestamp = max_offset if max_ts >= 0 else self.base_offset
        self._tail_loaded = True

    def read_next_offset(self) -> int:
        """The offset after the last batch (the base offset when empty)."""
        self._ensure_tail()
        return self._next_offset

    @property
    def max_timestamp_so_far(self) -> int:
        self._ensure_tail()
        return self._max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        """Base offset of the first batch holding the segment's largest timestamp."""
        self._ensure_tail()
        return self._offset_of_max_timestamp

    @property
    def largest_timestamp(self) -> int:
        """What time retention compares: the largest record timestamp, else the file's mtime."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.last_modified_ms

    def verify_tail(self) -> str | None:
        """Check CRCs from the last index entry to the end; the reason if something is wrong.

        Run on the active segment at every load, even after a clean shutdown: it costs one
        short read and catches a tail that was torn or scribbled on while the broker was down.
        """
        self.ensure_indexes(strict=True)
        _, position = self.offset_index.last_entry()
        walk = self._walk(position, verify_crc=True, chunk=RECOVERY_CHUNK)
        for _ in walk:
            pass
        if walk.reason is None and walk.valid_end != self._size:
            return f"log ends at {self._size} but batches end at {walk.valid_end}"
        return walk.reason

    # -- rolling -----------------------------------------------------------------------------
    def _rolling_based_timestamp(self) -> int | None:
        if self._rolling_timestamp is None and self._size > 0:
            buf = os.pread(self.fd, HEADER_SIZE, 0)
            if len(buf) == HEADER_SIZE:
                self._rolling_timestamp = BatchHeader.unpack_from(buf).max_timestamp
        return self._rolling_timestamp

    def should_roll(self, config: LogConfig, messages_size: int, max_offset: int,
                    max_timestamp: int, now_ms: int) -> bool:
        """Kafka's roll rule: the append would not fit, the segment is old, an index is full,
        or the new offsets would not fit the indexes' 32-bit relative offsets."""
        if self._size == 0:
            return False
        if self._size + messages_size > config.segment_bytes:
            return True
        rolling = self._rolling_based_timestamp()
        waited = (max_timestamp - rolling if rolling is not None and rolling >= 0
                  else now_ms - self.created_ms)
        if waited > config.segment_ms - self.roll_jitter_ms:
            return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        return max_offset - self.base_offset > INT32_MAX

    def on_become_inactive(self) -> None:
        """Seal the indexes when a newer segment takes over appends."""
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp,
                                     skip_full_check=True)
        for index in self.indexes:
            index.close_writer()

    # -- appending ---------------------------------------------------------------------------
    def append(self, data: bytes | bytearray | memoryview,
               batches: Sequence[AppendedBatch]) -> None:
        """Write already-validated, already-patched batches and index them.

        `batches` describes each batch in `data`: its position there, size, base and last
        offsets and max timestamp. The write happens before the index entries, so a crash in between
        leaves an index that is merely sparser than usual.
        """
        self._ensure_tail()
        start = self._size
        view = memoryview(data)
        written = 0
        try:
            while written < len(view):
                written += os.write(self.fd, view[written:])
        except OSError:
            # A partial write (disk full) must not leave half a batch for the next append
            # to land behind.
            os.ftruncate(self.fd, start)
            raise
        if start == 0 and batches:
            self._rolling_timestamp = batches[0][4]
        self._index_batches(start, batches)
        self._size = start + written

    def _index_batches(self, start: int, batches: Sequence[AppendedBatch]) -> None:
        interval = self.index_interval_bytes
        since = self._bytes_since_last_index_entry
        max_ts = self._max_timestamp
        max_offset = self._offset_of_max_timestamp
        for rel, size, base_offset, last_offset, max_timestamp in batches:
            if max_timestamp > max_ts:
                max_ts, max_offset = max_timestamp, base_offset
            if since > interval:
                self.offset_index.append(base_offset, start + rel)
                self.time_index.maybe_append(max_ts, max_offset)
                since = 0
            since += size
            self._next_offset = last_offset + 1
        self._bytes_since_last_index_entry = since
        self._max_timestamp = max_ts
        self._offset_of_max_timestamp = max_offset

    # -- finding -----------------------------------------------------------------------------
    def translate_offset(self, offset: int, start_position: int = 0,
                         ) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= `offset`.

        A read that ended at `offset` remembered where the next batch starts: a consumer
        fetching from there (the usual case) skips the index lookup and the walk over the
        batches between the index entry and its own (tens of them when batches are small).
        """
        self.ensure_indexes()
        position = self._read_ends.get(offset) if self._read_ends is not None else None
        if position is not None and position >= start_position:
            # The batch there is the answer (it starts where a read of whole batches ended):
            # read its header alone rather than walking a chunk of batches.
            buf = os.pread(self.fd, HEADER_SIZE, position)
            if len(buf) == HEADER_SIZE:
                header = BatchHeader.unpack_from(buf)
                if (header.magic == 2 and header.last_offset >= offset
                        and position + header.size <= self._size):
                    return position, header
        if position is None:
            _, position = self.offset_index.lookup(offset)
        for pos, header in self._walk(max(position, start_position), chunk=SCAN_CHUNK):
            if header.last_offset >= offset:
                return pos, header
        return None

    def read(self, offset: int, max_size: int, *, max_offset: int,
             min_one_message: bool = True, region_min_batch: int = 0) -> SegmentRead | None:
        """Whole batches from the one holding `offset`, up to `max_size` bytes.

        None when the segment has no batch at or after `offset`. Batches whose last offset is
        at or past `max_offset` are never returned. The first batch comes back whole even if
        it alone exceeds `max_size` (Kafka's rule, so a consumer can always make progress),
        unless `min_one_message` is false.

        With `region_min_batch`, when the first batch is at least that large the records come
        back as a `FileRegion` of this segment's file (for sendfile) instead of bytes: the
        same byte range, located by reading batch headers only. Small batches are read into
        memory as usual: one pread and a walk in memory beat a header read per batch.
        """
        found = self.translate_offset(offset)
        if found is None:
            return None
        position, first = found
        if first.last_offset >= max_offset:
            return SegmentRead(position, b"", first.base_offset, first.base_offset)
        if first.size > max_size and not min_one_message:
            return SegmentRead(position, b"", first.base_offset, first.base_offset)
        if region_min_batch:
            if first.size >= region_min_batch:
                # Small batches after the first end the region (a header read each would
                # cost more than copying them); the next fetch reads them into memory.
                length, next_offset = self._slice_from(position, first, max_size,
                                                       max_offset,
                                                       stop_below=region_min_batch // 4)
                self._remember_read_end(next_offset, position + length)
                return SegmentRead(position, FileRegion(self, position, length),
                                   first.base_offset, next_offset)
            rest, next_offset = self._size - position, self._next_offset
            if (region_min_batch <= rest <= max_size and self._tail_loaded
                    and next_offset <= max_offset):
                # The rest of the segment, small batches or not: it ends with a whole batch
                # (appends write whole batches, on the event loop, as this read runs) and
                # every offset in it is below max_offset, so it is located without a walk.
                self._remember_read_end(next_offset, self._size)
                return SegmentRead(position, FileRegion(self, position, rest),
                                   first.base_offset, next_offset)
        if first.size > max_size:
            data = os.pread(self.fd, first.size, position)
            self._remember_read_end(first.next_offset, position + first.size)
            return SegmentRead(position, data, first.base_offset, first.next_offset)
        data = os.pread(self.fd, min(max_size, self._size - position), position)
        batches, valid, _ = walk_batches(data, verify_crc=False)
        length, next_offset = 0, first.base_offset
        for rel, header in batches:
            if header.last_offset >= max_offset:
                break
            length, next_offset = rel + header.size, header.next_offset
        self._remember_read_end(next_offset, position + length)
        if length != len(data):
            # A Fetch (region_min_batch given) takes any buffer: a view of the whole batches,
            # not a copy of them; other readers (the coordinators' loads) are given bytes.
            return SegmentRead(position, memoryview(data)[:length] if region_min_batch
                               else data[:length], first.base_offset, next_offset)
        return SegmentRead(position, data, first.base_offset, next_offset)

    def _remember_read_end(self, next_offset: int, position: int) -> None:
        ends = self._read_ends
        if ends is None:
            ends = self._read_ends = {}
        elif len(ends) >= 64:  # a few consumers per partition; forget all rather than track age
            ends.clear()
        ends[next_offset] = position

    def _slice_from(self, position: int, first: BatchHeader, max_size: int,
                    max_offset: int, stop_below: int = 0) -> tuple[int, int]:
        """(length, next offset) of the whole batches from `first` at `position` that fit
        `max_size` (the first always counts) and end below `max_offset`, stopping before
        any batch smaller than `stop_below` bytes."""
        fd = self.fd
        length, next_offset = first.size, first.next_offset
        pos = position + first.size
        while pos + HEADER_SIZE <= self._size:
            header = BatchHeader.unpack_from(os.pread(fd, HEADER_SIZE, pos))
            if (header.last_offset >= max_offset or length + header.size > max_size
                    or pos + header.size > self._size or header.size < stop_below):
                break
            length += header.size
            next_offset = header.next_offset
            pos += header.size
        return length, next_offset

    def fileno(self) -> int:
        """The `.log` descriptor (a `FileRegion` source); ValueError once closed."""
        if self.closed:
            raise ValueError(f"{self.log_path} is closed")
        return self.fd

    def read_batch(self, position: int, header: BatchHeader) -> bytes:
        return os.pread(self.fd, header.size, position)

    def read_marker(self, position: int, header: BatchHeader) -> ControlRecord | None:
        """The record of the control batch at `position` (producer-state replay reads each
        marker to learn whether it commits or aborts); None if it cannot be read, which
        replay treats as a control record of unknown type."""
        try:
            return control_record_of(self.read_batch(position, header))
        except RecordError as exc:
            log.warning("%s: unreadable control batch at %d: %s", self.log_path, position, exc)
            return None

    def batches_from(self, offset: int) -> Iterator[tuple[int, BatchHeader]]:
        """Every batch from the one holding `offset` to the end (producer-state replay)."""
        self.ensure_indexes()
        _, position = self.offset_index.lookup(offset)
        for pos, header in self._walk(position, chunk=RECOVERY_CHUNK):
            if header.last_offset >= offset:
                yield pos, header

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int,
                                 ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `start_offset` whose timestamp
        is >= `timestamp`, or None if this segment has none.

        The time index and offset index narrow the search to a few batches; only a batch
        whose max timestamp qualifies is read and decoded, to pick the exact record.
        """
        from protocol.records.record import decode_batch  # not needed on the hot paths

        self.ensure_indexes()
        _, ts_offset = self.time_index.lookup(timestamp)
        _, position = self.offset_index.lookup(max(ts_offset, start_offset))
        for pos, header in self._walk(position, chunk=SCAN_CHUNK):
            if header.max_timestamp < timestamp or header.last_offset < start_offset:
                continue
            for record in decode_batch(self.read_batch(pos, header)):
                if record.offset >= start_offset and record.timestamp >= timestamp:
                    return record.offset, record.timestamp
        return None

    def max_timestamp_record(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record holding the segment's largest timestamp."""
        from protocol.records.record import decode_batch

        max_ts = self.max_timestamp_so_far
        if max_ts < 0:
            return None
        found = self.translate_offset(self.offset_of_max_timestamp)
        while found is not None:
            pos, header = found
            if header.max_timestamp == max_ts:
                for record in decode_batch(self.read_batch(pos, header)):
                    if record.timestamp == max_ts:
                        return record.offset, record.timestamp
            found = self.translate_offset(header.next_offset, pos + header.size)
        return None

    # -- truncation and recovery -------------------------------------------------------------
    def truncate_to(self, offset: int) -> int:
        """Remove the batch holding `offset` and everything after it; returns bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position, header = found
        for index in self.indexes:
            index.truncate_to(header.base_offset)
        self.txn_index.truncate_to(header.base_offset)
        removed = self._size - position
        self._read_ends = None
        os.ftruncate(self.fd, position)
        self._size = position
        self._bytes_since_last_index_entry = 0
        self._tail_loaded = False
        if position == 0:
            self._rolling_timestamp = None
        return removed

    def recover(self) -> int:
        """Re-validate every batch (CRC, magic, length, offsets), rebuild both indexes, and
        truncate whatever follows the last good batch. Returns the bytes truncated."""
        valid_end = self._reindex(verify_crc=True)
        truncated = self._size - valid_end
        if truncated:
            self._read_ends = None
            os.ftruncate(self.fd, valid_end)
            self._size = valid_end
            self._rolling_timestamp = None
        return truncated

    def rebuild_indexes(self) -> None:
        """Recreate both indexes from the log (headers only, no CRC): they are derived data."""
        self._reindex(verify_crc=False)

    def _reindex(self, *, verify_crc: bool) -> int:
        for index in self.indexes:
            index.mark_empty()
        self._bytes_since_last_index_entry = 0
        self._max_timestamp = -1
        self._offset_of_max_timestamp = self.base_offset
        self._next_offset = self.base_offset
        self._tail_loaded = True
        self._indexes_checked = True
        walk = self._walk(0, verify_crc=verify_crc, chunk=RECOVERY_CHUNK)
        valid_end = 0
        expected = self.base_offset
        for pos, header in walk:
            if header.base_offset < expected or header.last_offset - self.base_offset > INT32_MAX:
                log.warning("%s: batch at %d has offsets %d..%d, expected >= %d",
                            self.log_path, pos, header.base_offset, header.last_offset, expected)
                break
            self._index_batches(pos, ((0, header.size, header.base_offset, header.last_offset,
                                       header.max_timestamp),))
            expected = header.next_offset
            valid_end = pos + header.size
        else:
            if walk.reason is not None:
                log.warning("%s: %s", self.log_path, walk.reason)
        self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp,
                                     skip_full_check=True)
        return valid_end


def _replace_suffix(path: Path, old: str, new: str) -> Path:
    name = path.name
    if old and not name.endswith(old):
        raise ValueError(f"{path} does not end with {old!r}")
    return path.with_name((name[:-len(old)] if old else name) + new)
