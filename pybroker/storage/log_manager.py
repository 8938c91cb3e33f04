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

The periodic duties (`flush_dirty`, `checkpoint`, `cleanup`) are plain blocking methods; the
server runs them on its own schedule, in a worker thread where they fsync.
"""
from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from pybroker.storage.checkpoint import read_offsets, write_offsets
from pybroker.storage.log_config import LogConfig
from pybroker.storage.segment import LogSegment, fsync_directory
from pybroker.storage.partition_log import PartitionLog, parse_topic_partition, \
    partition_dir_name

__all__ = [
    "LogManager", "CLEAN_SHUTDOWN_FILE", "RECOVERY_POINT_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT", "HIGH_WATERMARK_CHECKPOINT",
]

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
DELETE_DIR_SUFFIX = "-delete"

TopicPartition = tuple[str, int]


def remove_dirs(paths: list[Path]) -> None:
    """Delete directories that `detach` left (blocking: a worker thread's job)."""
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


class LogManager:
    """Opens, creates, deletes and maintains the partition logs under `log_dirs`."""

    def __init__(self, log_dirs: list[str], *, default_config: LogConfig | None = None,
                 config_for: Callable[[str], LogConfig] | None = None) -> None:
        """Load every partition directory now (recovering them after an unclean shutdown).

        `config_for(topic)` gives each loaded log its config (default: `default_config`);
        `get_or_create` with a config replaces it later.
        """
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config or LogConfig()
        self._config_for = config_for
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._dir_counts: dict[Path, int] = dict.fromkeys(self.log_dirs, 0)
        self._lock = threading.Lock()
        self._closed = False
        self.had_clean_shutdown = True
        for log_dir in self.log_dirs:
            self._load_dir(log_dir)

    def _config(self, topic: str) -> LogConfig:
        return self._config_for(topic) if self._config_for else self.default_config

    def _load_dir(self, log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery_points = read_offsets(log_dir / RECOVERY_POINT_CHECKPOINT)
        start_offsets = read_offsets(log_dir / LOG_START_OFFSET_CHECKPOINT)
        high_watermarks = read_offsets(log_dir / HIGH_WATERMARK_CHECKPOINT)
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
            if tp in self._logs:
                log.error("%s-%s exists in two log dirs; ignoring %s", tp[0], tp[1], entry.path)
                continue
            self._logs[tp] = PartitionLog(
                entry.path, self._config(tp[0]), log_start_offset=start_offsets.get(tp),
                recovery_point=recovery_points.get(tp, 0),
                high_watermark=high_watermarks.get(tp), had_clean_shutdown=clean)
            self._dir_of[tp] = log_dir
            self._dir_counts[log_dir] += 1
        loaded = self._logs_in(log_dir)
        if not clean and loaded:
            self.had_clean_shutdown = False
            log.warning("%s: no clean shutdown marker; recovered %d log(s) from their "
                        "recovery points", log_dir, len(loaded))
            # Recovery moved recovery points to the log ends: record that before anything else.
            self._checkpoint_dir(log_dir, loaded)
        marker.unlink(missing_ok=True)

    # -- the logs ------------------------------------------------------------------------------
    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None, *,
                      leader_epoch: int | None = None) -> PartitionLog:
        """The partition's log, created empty in the least-loaded log dir if it does not exist.

        A given config replaces the existing log's (topic configs may have changed). A log
        created for its leader records where `leader_epoch` starts before anyone can append
        to it, as Kafka's makeLeader does: the first append then has no checkpoint to fsync
        on the event loop.
        """
        with self._lock:
            existing = self._logs.get((topic, partition))
            if existing is not None:
                if config is not None:
                    existing.config = config
                return existing
            log_dir = min(self.log_dirs, key=self._dir_counts.__getitem__)
            created = PartitionLog(log_dir / partition_dir_name(topic, partition),
                                   config or self._config(topic))
            if leader_epoch is not None:
                created.leader_epoch_cache.assign(leader_epoch, created.log_end_offset)
            self._logs[(topic, partition)] = created
            self._dir_of[(topic, partition)] = log_dir
            self._dir_counts[log_dir] += 1
            log.info("created log for %s-%d in %s", topic, partition, log_dir)
            return created

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
            if lg.maybe_flush(now_ms):
                flushed += 1
        return flushed

    def checkpoint(self, *, recovery_points: bool = True, log_start_offsets: bool = True) -> None:
        """Write the checkpoints of every dir: recovery points and high watermarks (with the
        leader-epoch checkpoints that a moved log start left pending), and log start offsets.
        The two groups can be written alone because Kafka gives them separate intervals
        (log.flush.offset.checkpoint.interval.ms, log.flush.start.offset.checkpoint.interval.ms).
        Blocking: the broker runs it in a worker thread."""
        for log_dir in self.log_dirs:
            self._checkpoint_dir(log_dir, self._logs_in(log_dir),
                                 recovery_points=recovery_points,
                                 log_start_offsets=log_start_offsets)
        if not recovery_points:
            return
        for plog in self.logs():
            try:
                plog.leader_epoch_cache.write_pending()
            except FileNotFoundError:
                pass  # the log was deleted meanwhile: its directory is gone

    def _checkpoint_dir(self, log_dir: Path, logs: list[PartitionLog], *,
                        recovery_points: bool = True, log_start_offsets: bool = True) -> None:
        live = [lg for lg in logs if lg.dir.exists()]
        if recovery_points:
            write_offsets(log_dir / RECOVERY_POINT_CHECKPOINT,
                          {(lg.topic, lg.partition): lg.recovery_point for lg in live})
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
                deleted += lg.delete_old_segments(now_ms)
        return deleted

    def close_due_deletes(self, now_ms: int) -> list[LogSegment]:
        """Every log's `.deleted` segments whose delay has passed, closed, for unlinking."""
        return [seg for lg in self.logs() for seg in lg.close_due_deletes(now_ms)]

    def close(self) -> None:
        """Flush and close every log, checkpoint, then mark each dir cleanly shut down."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for lg in self.logs():
            lg.close()
        self.checkpoint()
        for log_dir in self.log_dirs:
            marker = log_dir / CLEAN_SHUTDOWN_FILE
            with open(marker, "w") as f:
                f.flush()
                os.fsync(f.fileno())
            fsync_directory(log_dir)

    @property
    def closed(self) -> bool:
        return self._closed
