"""All partition logs of a broker, across its `log.dirs` (Kafka's LogManager).

Theory of operation. Each log dir holds one directory per partition (`<topic>-<partition>`)
and four small files:

- `recovery-point-offset-checkpoint`: per partition, the offset below which data is fsynced;
- `log-start-offset-checkpoint`: per partition, the first offset still readable (it can lie
  inside the first segment after DeleteRecords, so it cannot be derived from file names);
- `replication-offset-checkpoint`: per partition, the high watermark, so consumers see the
  same committed data after a restart;
- `.kafka_cleanshutdown`: present only while the broker is stopped after a clean `close()`;
- `.lock`: locked by the broker that owns the dir (`log_dir_lock`), taken before this class
  reads anything, so a second broker never loads, recovers or marks a dir that one is serving.

At start, a log dir without the marker had an unclean shutdown: every log in it re-validates
its segments from its recovery point (truncating torn or corrupt tails, rebuilding indexes).
With the marker, logs are opened trusting their files, reading little more than the active
segment's last index entries, so thousands of partitions open in well under a second. The
marker is removed once loading is done and rewritten by `close()` after everything is flushed
and checkpointed. Directories named `*-delete` (a deletion interrupted by a crash) are removed.

Many partitions. Open files are bounded by design (`files.py`): each log loads with a
private descriptor cache it empties when the log is loaded, so recovering 50,000 partitions
holds a few files open at a time; loaded logs share one `FileCache` sized from the open-file
limit. Logs load one at a time by default: with the page cache warm (a process killed, not a
machine), a pool of threads only contended for the GIL (5,000 partitions after kill -9: 1.4 s
with one worker, 2.0 s with two or four); `load_workers` runs a pool, for cold disks. Nothing is fsynced per partition
where a log dir's worth can be synced at once: recovery and `close()` write without fsync,
then sync the log dir's file system once (`sync_filesystem`) before the checkpoints that say
"durable up to here" are written, once per log dir.

The periodic duties (`flush_dirty`, `checkpoint`, `cleanup`) are plain blocking methods; the
server runs them on its own schedule, in a worker thread where they fsync.

A log dir unusable at start (not a directory, not writable, found so by `LogDirLocks`, or an
OSError while loading it) starts offline and the others are served; none left is an error
(Kafka's createAndValidateLogDirs and loadLogs). While a dir is offline, a replica that should
exist (`get_or_create(new=False)`, at start) is not created empty elsewhere: it is offline.

A failed log dir (KIP-112). A write that fails with an OSError (EIO, ENOSPC, EROFS) in one of
the dirs, whoever makes it (an append on the event loop, a flush or checkpoint in a worker
thread), takes that dir offline through `fail_dir`, and only it: its logs leave `get` and
are remembered as offline, so their partitions answer KAFKA_STORAGE_ERROR and are never
recreated in another dir while this broker runs (Kafka's getOrCreateLog refuses a non-new log
while any dir is offline). The dir gets no checkpoint and no clean-shutdown marker from then
on, so the next start, the disk repaired, recovers its logs from their recovery points.
`on_dir_offline` (set by the replica manager) hears of each dir once, from whatever thread
found it.

Who closes a failed dir's logs. Their descriptors belong to the thread that uses them (the
event loop, `files.py`), which may be between taking one (`LogSegment.fd`, a FileRegion's
`fileno()`) and using it when a worker thread finds the dir failed. Closed by the worker, the
number could be reused by the next file any thread opens, and the loop's write or sendfile
would go to that file. So the listener, having let the partitions go on the loop, closes them
there (`close_failed`), as Kafka closes a failed dir's logs only after its partitions are
offline; without a listener `fail_dir` closes them itself.
"""
from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from protocol.topic_partition import TopicPartition
from pybroker.stats.latency_histogram import LatencyHistogram
from pybroker.storage.checkpoint import read_offsets, write_offsets
from pybroker.storage.files import MIN_CAPACITY, FileCache, can_sync_filesystem, \
    fsync_directory, sync_filesystem
from pybroker.storage.log_config import LogConfig
from pybroker.storage.log_dir_lock import LogDirsFailed
from pybroker.storage.segment import LogSegment
from pybroker.storage.partition_log import PartitionLog, parse_topic_partition, \
    partition_dir_name

__all__ = [
    "LogManager", "KafkaStorageException", "CLEAN_SHUTDOWN_FILE", "RECOVERY_POINT_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT", "HIGH_WATERMARK_CHECKPOINT",
]

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
DELETE_DIR_SUFFIX = "-delete"


class KafkaStorageException(Exception):
    """Kafka's name: the partition's log is in an offline log dir (KAFKA_STORAGE_ERROR)."""


def remove_dirs(paths: list[Path]) -> None:
    """Delete directories that `detach` left (blocking: a worker thread's job)."""
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


class LogManager:
    """Opens, creates, deletes and maintains the partition logs under `log_dirs`."""

    def __init__(self, log_dirs: list[str], *, default_config: LogConfig | None = None,
                 config_for: Callable[[str], LogConfig] | None = None,
                 files: FileCache | None = None, load_workers: int | None = None,
                 offline_dirs: Mapping[Path, str] | None = None) -> None:
        """Load every partition directory now (recovering them after an unclean shutdown).

        `config_for(topic)` gives each loaded log its config (default: `default_config`);
        `get_or_create` with a config replaces it later. `files` is the descriptor cache the
        logs share (default: sized from the open-file limit); `load_workers` the size of the
        loading pool (default 1: see the module docstring). `offline_dirs` (dir -> why) are
        dirs found unusable before (`LogDirLocks`): they start offline, never read. A dir
        whose loading fails with an OSError goes offline too; OSError when none is left.
        """
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config or LogConfig()
        self._config_for = config_for
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._dir_counts: dict[Path, int] = dict.fromkeys(self.log_dirs, 0)
        # Failed dirs and why, and the partitions whose logs were in them (`fail_dir`).
        self.offline_dirs: dict[Path, str] = {}
        self._offline: dict[TopicPartition, Path] = {}
        self.on_dir_offline: Callable[[Path], None] | None = None
        # A failed dir's logs, still open until `close_failed` (see the module docstring).
        self._failed_open: dict[Path, list[PartitionLog]] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.had_clean_shutdown = True
        self.files = files if files is not None else FileCache()
        self._load_workers = max(1, load_workers or 1)
        # Every flush of these logs, timed (pybroker_log_flush_duration_seconds).
        self.flush_stats = LatencyHistogram()
        for log_dir, why in (offline_dirs or {}).items():
            self.offline_dirs[Path(log_dir)] = why
        for log_dir in self.online_dirs:
            try:
                self._load_dir(log_dir)
            except OSError as exc:  # as Kafka's loadLogs: "Error while loading log dir"
                log.error("Error while loading log dir %s", log_dir, exc_info=True)
                self.fail_dir(log_dir, exc)
        if not self.online_dirs:
            raise LogDirsFailed(errno.EIO, "Shutdown broker because all log dirs in "
                                f"{', '.join(map(str, self.log_dirs))} have failed: "
                                + "; ".join(f"{d}: {why}"
                                            for d, why in self.offline_dirs.items()))

    def _config(self, topic: str) -> LogConfig:
        return self._config_for(topic) if self._config_for else self.default_config

    def _load_dir(self, log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery_points = read_offsets(log_dir / RECOVERY_POINT_CHECKPOINT)
        start_offsets = read_offsets(log_dir / LOG_START_OFFSET_CHECKPOINT)
        high_watermarks = read_offsets(log_dir / HIGH_WATERMARK_CHECKPOINT)
        found: dict[TopicPartition, str] = {}
        for entry in os.scandir(log_dir):
            if not entry.is_dir():
                continue
            if entry.name.endswith(DELETE_DIR_SUFFIX):
                log.info("removing %s, left by an interrupted deletion", entry.path)
                shutil.rmtree(entry.path, ignore_errors=True)
                continue
            try:
                tp = parse_topic_partition(entry.name)
            except ValueError:
                continue
            if tp in self._logs or tp in found:
                log.error("%s-%s exists in two log dirs; ignoring %s", tp[0], tp[1], entry.path)
                continue
            found[tp] = entry.path

        def load(item: tuple[TopicPartition, str]) -> PartitionLog:
            tp, path = item
            return self._open_log(path, self._config(tp[0]), log_start_offset=start_offsets.get(tp),
                                  recovery_point=recovery_points.get(tp, 0),
                                  high_watermark=high_watermarks.get(tp),
                                  had_clean_shutdown=clean)

        def load_or_fail(item: tuple[TopicPartition, str]) -> PartitionLog | OSError:
            try:
                return load(item)
            except OSError as exc:
                return exc

        if len(found) > 1 and self._load_workers > 1:
            with ThreadPoolExecutor(self._load_workers, thread_name_prefix="log-loader") as pool:
                results = list(pool.map(load_or_fail, found.items()))
        else:
            results = [load_or_fail(item) for item in found.items()]
        loaded = [r for r in results if isinstance(r, PartitionLog)]
        failures = [r for r in results if isinstance(r, OSError)]
        if failures:  # the dir goes offline, its partitions with it (`__init__`)
            for plog in loaded:
                plog.close_handles()
            with self._lock:
                for tp in found:
                    self._offline[tp] = log_dir
            raise failures[0]
        for tp, plog in zip(found, loaded):
            self._logs[tp] = plog
            self._dir_of[tp] = log_dir
            self._dir_counts[log_dir] += 1
        if not clean and loaded:
            self.had_clean_shutdown = False
            # Recovered segments were written without fsync: one sync of the file system
            # makes them durable, then the recovery points move to the log ends and are
            # recorded before anything else.
            self._sync_dir(log_dir, loaded)
            for plog in loaded:
                plog.mark_synced()
            log.warning("%s: no clean shutdown marker; recovered %d log(s) from their "
                        "recovery points", log_dir, len(loaded))
            self._checkpoint_dir(log_dir, loaded)
        marker.unlink(missing_ok=True)

    def _open_log(self, path: str | Path, config: LogConfig, **kwargs: Any) -> PartitionLog:
        """A log loaded (or created) with a private descriptor cache, then joined to the
        shared one: loading runs in worker threads, which must not take descriptors from a
        cache the event loop uses (`files.py`), and holds a few files at a time."""
        private = FileCache(MIN_CAPACITY)
        plog = PartitionLog(path, config, files=private, sync_recovery=False, **kwargs)
        plog.set_files(self.files)
        plog.flush_timer = self.flush_stats
        return plog

    def _sync_dir(self, log_dir: Path, logs: list[PartitionLog]) -> None:
        """Make everything written under `log_dir` durable: one syncfs, or (where there is
        none) a flush of every log."""
        if not sync_filesystem(log_dir):
            for plog in logs:
                for segment in plog.segments:
                    segment.flush()

    # -- failed log dirs (KIP-112) -------------------------------------------------------------
    @property
    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def fail_dir(self, log_dir: Path, exc: BaseException) -> bool:
        """Take `log_dir` offline after a failed write there (see the module docstring);
        False if it already was. Thread-safe."""
        with self._lock:
            if log_dir in self.offline_dirs or log_dir not in self._dir_counts:
                return False
            self.offline_dirs[log_dir] = f"{type(exc).__name__}: {exc}"
            failed = [tp for tp, d in self._dir_of.items() if d == log_dir]
            logs = []
            for tp in failed:
                logs.append(self._logs.pop(tp))
                del self._dir_of[tp]
                self._offline[tp] = log_dir
            self._dir_counts[log_dir] = 0
            self._failed_open[log_dir] = logs
        log.error("log dir %s failed (%s): it is offline, with the %d partition(s) it held",
                  log_dir, self.offline_dirs[log_dir], len(logs))
        listener = self.on_dir_offline
        if listener is None:
            self.close_failed(log_dir)
        else:
            listener(log_dir)
        return True

    def close_failed(self, log_dir: Path) -> None:
        """Close the logs of a dir `fail_dir` took offline, writing nothing; called by the
        `on_dir_offline` listener on the thread that uses their descriptors, once nothing
        there can reach them (see the module docstring). Idempotent."""
        with self._lock:
            logs = self._failed_open.pop(log_dir, [])
        for plog in logs:
            plog.close_handles()

    def fail_log(self, plog: PartitionLog, exc: BaseException) -> bool:
        """A write to `plog` failed: take its log dir offline (`fail_dir`). False, and nothing
        done, for a log no longer here (deleted meanwhile: its files went with it)."""
        tp = (plog.topic, plog.partition)
        log_dir = self._dir_of.get(tp) if self._logs.get(tp) is plog else None
        return log_dir is not None and self.fail_dir(log_dir, exc)

    def is_offline(self, topic: str, partition: int) -> bool:
        """Whether the partition's log was in a dir that failed."""
        return (topic, partition) in self._offline

    def offline_partitions(self, log_dir: Path | None = None) -> list[TopicPartition]:
        """The partitions whose logs were in `log_dir` (default: in any failed dir)."""
        return [tp for tp, d in list(self._offline.items()) if log_dir in (None, d)]

    # -- the logs ------------------------------------------------------------------------------
    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None, *,
                      leader_epoch: int | None = None, sync: bool = True,
                      new: bool = True) -> PartitionLog:
        """The partition's log, created empty in the least-loaded log dir if it does not exist.

        `new=False` says the replica should exist already (a broker starting up: Kafka's
        LeaderAndIsr `isNew` false): while a dir is offline its log may be in there, so none
        is created elsewhere, which would serve it empty; the partition is offline instead
        (Kafka's getOrCreateLog). It is counted under the first offline dir: which one held
        it cannot be told.

        A given config replaces the existing log's (topic configs may have changed). A log
        created for its leader records where `leader_epoch` starts before anyone can append
        to it, as Kafka's makeLeader does: the first append then has no checkpoint to fsync
        on the event loop. Without `sync` that checkpoint is not fsynced: the caller creating
        many logs calls `sync()` once after them.

        KafkaStorageException for a partition whose log dir failed, or when the log cannot be
        created (the dir it was to go in is then offline).
        """
        with self._lock:
            existing = self._logs.get((topic, partition))
            if existing is not None:
                if config is not None:
                    existing.config = config
                return existing
            failed_dir = self._offline.get((topic, partition))
            if failed_dir is not None:
                raise KafkaStorageException(f"the log dir {failed_dir} of {topic}-{partition} "
                                            "is offline")
            if not new and self.offline_dirs:
                offline = list(self.offline_dirs)
                self._offline[(topic, partition)] = offline[0]
                raise KafkaStorageException(
                    f"Can not create log for {topic}-{partition} because log directories "
                    f"{','.join(map(str, offline))} are offline")
            online = self.online_dirs
            if not online:
                raise KafkaStorageException(f"no log dir is online to create {topic}-{partition}")
            log_dir = min(online, key=self._dir_counts.__getitem__)
            try:
                created = self._open_log(log_dir / partition_dir_name(topic, partition),
                                         config or self._config(topic))
                if leader_epoch is not None:
                    created.leader_epoch_cache.assign(leader_epoch, created.log_end_offset,
                                                      sync=sync)
            except OSError as exc:
                failure = exc
            else:
                self._logs[(topic, partition)] = created
                self._dir_of[(topic, partition)] = log_dir
                self._dir_counts[log_dir] += 1
                log.info("created log for %s-%d in %s", topic, partition, log_dir)
                return created
        self.fail_dir(log_dir, failure)
        raise KafkaStorageException(f"cannot create the log of {topic}-{partition} in "
                                    f"{log_dir}: {failure}") from failure

    def delete(self, topic: str, partition: int) -> bool:
        """Close and remove a partition's log (renamed `*-delete` first); False if absent."""
        with self._lock:
            removed = self._logs.pop((topic, partition), None)
            log_dir = self._dir_of.pop((topic, partition), None)
            if log_dir is not None:
                self._dir_counts[log_dir] -= 1
        if removed is None:
            return False
        removed.delete()
        return True

    def detach(self, topic: str, partition: int) -> Path | None:
        """Like `delete`, but leave the renamed `*-delete` directory for the caller to remove
        (PartitionLog.detach); None if there was no such log."""
        with self._lock:
            removed = self._logs.pop((topic, partition), None)
            log_dir = self._dir_of.pop((topic, partition), None)
            if log_dir is not None:
                self._dir_counts[log_dir] -= 1
        return None if removed is None else removed.detach()

    def logs(self) -> list[PartitionLog]:
        return list(self._logs.values())

    def _logs_in(self, log_dir: Path) -> list[PartitionLog]:
        return [lg for tp, lg in list(self._logs.items()) if self._dir_of.get(tp) == log_dir]

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._dir_of.get((topic, partition))

    def __len__(self) -> int:
        return len(self._logs)

    def __contains__(self, tp: TopicPartition) -> bool:
        return tp in self._logs

    # -- periodic duties -----------------------------------------------------------------------
    def flush_dirty(self, now_ms: int) -> int:
        """flush.ms: fsync logs whose unflushed data is old enough, and segments that rolled
        since the last flush. Returns the number of logs flushed. Blocking."""
        flushed = 0
        for lg in self.logs():
            try:
                if lg.maybe_flush(now_ms):
                    flushed += 1
            except OSError as exc:
                self.fail_log(lg, exc)
        return flushed

    def checkpoint(self, *, recovery_points: bool = True, log_start_offsets: bool = True,
                   high_watermarks: bool = True) -> None:
        """Write the checkpoints of every dir: recovery points (with the leader-epoch
        checkpoints that a moved log start left pending), log start offsets, high watermarks.
        Each group can be written alone because Kafka gives them separate intervals
        (log.flush.offset.checkpoint.interval.ms, log.flush.start.offset.checkpoint.interval.ms,
        replica.high.watermark.checkpoint.interval.ms). Blocking: the broker runs it in a
        worker thread."""
        for log_dir in self.online_dirs:
            try:
                self._checkpoint_dir(log_dir, self._logs_in(log_dir),
                                     recovery_points=recovery_points,
                                     log_start_offsets=log_start_offsets,
                                     high_watermarks=high_watermarks)
            except OSError as exc:
                self.fail_dir(log_dir, exc)
        if not recovery_points:
            return
        for plog in self.logs():
            try:
                plog.leader_epoch_cache.write_pending()
            except FileNotFoundError:
                pass  # the log was deleted meanwhile: its directory is gone
            except OSError as exc:
                self.fail_log(plog, exc)

    def _checkpoint_dir(self, log_dir: Path, logs: list[PartitionLog], *,
                        recovery_points: bool = True, log_start_offsets: bool = True,
                        high_watermarks: bool = True) -> None:
        live = [lg for lg in logs if lg.dir.exists()]
        if recovery_points:
            write_offsets(log_dir / RECOVERY_POINT_CHECKPOINT,
                          {(lg.topic, lg.partition): lg.recovery_point for lg in live})
        if high_watermarks:
            write_offsets(log_dir / HIGH_WATERMARK_CHECKPOINT,
                          {(lg.topic, lg.partition): lg.high_watermark for lg in live})
        if log_start_offsets:
            write_offsets(log_dir / LOG_START_OFFSET_CHECKPOINT,
                          {(lg.topic, lg.partition): lg.log_start_offset for lg in live})

    def cleanup(self, now_ms: int) -> int:
        """Retention over every log; returns the number of segments deleted."""
        deleted = 0
        for lg in self.logs():
            if not lg.closed:
                try:
                    deleted += lg.delete_old_segments(now_ms)
                except OSError as exc:
                    self.fail_log(lg, exc)
        return deleted

    def close_due_deletes(self, now_ms: int) -> list[LogSegment]:
        """Every log's `.deleted` segments whose delay has passed, closed, for unlinking."""
        return [seg for lg in self.logs() for seg in lg.close_due_deletes(now_ms)]

    def sync(self) -> None:
        """Make everything written in the log dirs so far durable (one syncfs per dir)."""
        for log_dir in self.online_dirs:
            try:
                self._sync_dir(log_dir, self._logs_in(log_dir))
            except OSError as exc:
                self.fail_dir(log_dir, exc)

    def close(self) -> None:
        """Close every log, sync each log dir once, checkpoint, then mark each dir cleanly
        shut down. Logs close without fsyncs of their own: one syncfs per dir covers them."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for log_dir in list(self._failed_open):  # a listener that never closed them
            self.close_failed(log_dir)
        one_sync = can_sync_filesystem()
        for lg in self.logs():
            try:
                lg.close(sync=not one_sync)
            except OSError as exc:
                self.fail_log(lg, exc)
        if one_sync:
            for log_dir in self.online_dirs:
                logs = self._logs_in(log_dir)
                try:
                    sync_filesystem(log_dir)
                except OSError as exc:
                    self.fail_dir(log_dir, exc)
                    continue
                for lg in logs:
                    lg.mark_synced()
        self.checkpoint()
        # A failed dir gets no marker: the next start recovers its logs.
        for log_dir in self.online_dirs:
            marker = log_dir / CLEAN_SHUTDOWN_FILE
            try:
                with open(marker, "w") as f:
                    f.flush()
                    os.fsync(f.fileno())
                fsync_directory(log_dir)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    marker.unlink(missing_ok=True)
                self.fail_dir(log_dir, exc)

    @property
    def closed(self) -> bool:
        return self._closed
