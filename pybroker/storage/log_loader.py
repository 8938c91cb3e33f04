"""Opening a partition directory: which segments exist, and whether they can be trusted.

Kafka's LogLoader, reduced to what a log needs at open:

- leftovers of interrupted work are removed: `*.deleted` segments (retention that crashed
  between rename and unlink), `*.tmp` files (checkpoints and snapshots half written),
  `*.cleaned` files (a cleaning that had not committed), index files whose `.log` is gone;
- a cleaning that had committed (its segment renamed `*.swap`) but not finished is completed,
  as Kafka does: the segments the swap file covers (base offsets from its base to its next
  offset) are deleted and the `.swap` suffix is dropped;
- a segment whose `.index` or `.timeindex` is missing gets them rebuilt from its log, unless
  the log is too small to have index entries (index files are created by their first
  entry, so a segment of less than `index.interval.bytes` may have none);
- after a clean shutdown only the active segment's tail is re-checked (CRC of the few batches
  after its last index entry: one short read), so opening thousands of partitions stays fast;
- after an unclean shutdown every segment from the one holding the recovery point onward is
  re-validated batch by batch; at the first torn or corrupt batch the segment is truncated
  there and every later segment is deleted (nothing after a hole can be trusted). Recovered
  segments are fsynced one by one, or (`sync=False`) left for the caller to sync the whole
  file system once: the log manager does, for thousands of partitions at a time.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from pybroker.storage.abstract_index import CorruptIndexError
from pybroker.storage.files import TMP_SUFFIX, FileCache
from pybroker.storage.log_config import LogConfig
from pybroker.storage.segment import (
    CLEANED_SUFFIX, DELETED_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, LogSegment, fsync_directory,
    parse_segment_file_name,
)

__all__ = ["load_segments"]

log = logging.getLogger(__name__)


def load_segments(directory: Path, config: LogConfig, *, initial_offset: int,
                  recovery_point: int, clean: bool, files: FileCache | None = None,
                  sync: bool = True) -> list[LogSegment]:
    """The directory's segments in offset order, recovered as the module docstring says.

    Creates the directory and an empty segment at `initial_offset` for a new log. `files`
    lends the segments their descriptors.
    """
    try:
        names = set(os.listdir(directory))
    except FileNotFoundError:
        directory.mkdir(parents=True, exist_ok=True)
        return [LogSegment(directory, initial_offset, config, create=True, files=files)]
    if any(name.endswith(SWAP_SUFFIX) for name in names):
        _complete_swaps(directory, config)
        names = set(os.listdir(directory))
    bases: set[int] = set()
    indexes: list[tuple[int, str]] = []  # (base offset, name) of every index file
    for name in names:
        if name.endswith((DELETED_SUFFIX, TMP_SUFFIX, CLEANED_SUFFIX)):
            (directory / name).unlink(missing_ok=True)
            continue
        parsed = parse_segment_file_name(name)
        if parsed is not None:
            if parsed[1] == LOG_SUFFIX:
                bases.add(parsed[0])
            else:
                indexes.append((parsed[0], name))
    for base, name in indexes:
        if base not in bases:
            (directory / name).unlink(missing_ok=True)

    segments: list[LogSegment] = []
    for base in sorted(bases):
        segment = LogSegment(directory, base, config, files=files)
        if any(index.path.name not in names for index in segment.indexes) \
                and segment.size > config.index_interval_bytes:
            log.info("%s: rebuilding missing index files", segment.log_path)
            segment.rebuild_indexes()
            segment.write_indexes()
            # Even with no entry to write (one batch), as Kafka's recovery leaves them: only
            # a segment no larger than the interval is like a new one, its files unmade.
            for index in segment.indexes:
                index.path.touch()
        segments.append(segment)
    if not segments:
        return [LogSegment(directory, initial_offset, config, create=True, files=files)]
    if clean:
        _check_active_segment(segments[-1])
    else:
        _recover(segments, recovery_point, sync)
    return segments


def _complete_swaps(directory: Path, config: LogConfig) -> None:
    """Finish cleanings that crashed after their commit point (the `.log.swap` rename).

    A swap segment replaces every segment whose base offset lies in [its base, its next
    offset): those are deleted (they may already be `.deleted`), then its files lose the
    suffix. Like Kafka's, the rule cannot see an old segment beyond the swap's last batch
    (one whose records were all cleaned away); such a segment survives with superseded
    records only, which the next cleaning removes again. Nothing committed is lost.
    """
    swap_files = [(parsed, name) for name in os.listdir(directory)
                  if (parsed := parse_segment_file_name(name, SWAP_SUFFIX)) is not None]
    swaps = sorted(base for (base, suffix), _ in swap_files if suffix == LOG_SUFFIX)
    for (base, _), name in swap_files:
        if base not in swaps:  # swap indexes without a swap log: the rename never got that far
            (directory / name).unlink(missing_ok=True)
    if not swaps:
        return
    ranges = []
    for base in swaps:
        segment = LogSegment(directory, base, config, file_suffix=SWAP_SUFFIX)
        try:
            segment.rebuild_indexes()  # cheap (headers only) and never trusts a half rename
            ranges.append((base, max(segment.read_next_offset(), base + 1)))
        finally:
            segment.close()
    for name in os.listdir(directory):
        parsed = parse_segment_file_name(name)  # None for the `.swap` files themselves
        if parsed is not None and any(lo <= parsed[0] < hi for lo, hi in ranges):
            log.info("%s: deleting %s, replaced by an interrupted cleaning", directory, name)
            (directory / name).unlink(missing_ok=True)
    for base in swaps:
        segment = LogSegment(directory, base, config, file_suffix=SWAP_SUFFIX)
        segment.change_file_suffixes(SWAP_SUFFIX, "")
        segment.close()
        log.info("%s: completed the swap of cleaned segment %d", directory, base)
    fsync_directory(directory)


def _check_active_segment(active: LogSegment) -> None:
    """After a clean shutdown only the active segment's tail can be off (a crash after the
    marker was written, a file edited by hand); check it cheaply, recover it if needed."""
    try:
        reason = active.verify_tail()
    except CorruptIndexError as exc:
        reason = str(exc)
    if reason is not None:
        log.warning("%s: %s; recovering the segment", active.log_path, reason)
        truncated = active.recover()
        if truncated:
            log.warning("%s: truncated %d invalid bytes", active.log_path, truncated)


def _recover(segments: list[LogSegment], recovery_point: int, sync: bool) -> None:
    """Re-validate from the segment holding the recovery point; truncate at the first bad
    batch and drop every segment after it. Recovered segments are fsynced (or, without
    `sync`, left for the caller to sync), so the recovery point may move to the log end."""
    for i, segment in enumerate(segments):
        if i + 1 < len(segments) and segments[i + 1].base_offset <= recovery_point:
            continue
        truncated = segment.recover()
        if sync:
            segment.flush()
        elif i + 1 < len(segments):
            # Below the recovery point next time, so its indexes must be on disk. Not the
            # active segment's: it is re-validated after every crash, and creating two index
            # files per partition was most of the time recovery of 5,000 partitions took.
            segment.write_indexes()
        if truncated:
            later = segments[i + 1:]
            log.warning("%s: truncated %d invalid bytes after an unclean shutdown; dropping "
                        "%d later segment(s)", segment.log_path, truncated, len(later))
            for dropped in later:
                dropped.delete()
            del segments[i + 1:]
            return
        if i + 1 == len(segments):
            log.debug("%s: recovered, no invalid bytes", segment.log_path)
