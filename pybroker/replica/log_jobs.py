"""The broker's log jobs (Kafka's LogManager scheduler and its cleaner threads): retention,
flushing, the three checkpoints, the removal of `.deleted` files and the log cleaner's passes.

`storage/` may not import trio, so the jobs that run its blocking work in worker threads live
here. The broker builds one from the parts it uses and starts `run` in its nursery; a test
runs a job at once through `apply_retention` and `clean_logs`.
"""
from __future__ import annotations

import logging
import threading
import time
from functools import partial
from typing import Any

import trio

from protocol.topic_partition import TopicPartition
from pybroker.cluster.dynamic_broker_config import DynamicBrokerConfig
from pybroker.config import BrokerConfig
from pybroker.config.definitions import ConfigError
from pybroker.runtime.clock import Clock
from pybroker.runtime.periodic import MIN_INTERVAL_MS, run_every
from pybroker.storage.cleaner import LogCleaner
from pybroker.storage.log_manager import LogManager
from pybroker.storage.segment import LogSegment

__all__ = ["LogJobs", "DELETE_CHECK_INTERVAL_MS"]

log = logging.getLogger(__name__)
# How often `.deleted` segment files are looked at; file.delete.delay.ms is counted from the
# rename, so a file goes at most this much later than its delay says.
DELETE_CHECK_INTERVAL_MS = 1000


def _unlink(segments: list[LogSegment]) -> None:
    for segment in segments:
        segment.delete()


class LogJobs:
    """The periodic work on the logs. Intervals come from the broker's static config (`run`);
    the cleaner's thread count and backoff from the dynamic one, as it is at each pass."""

    def __init__(self, logs: LogManager, cleaner: LogCleaner, clock: Clock,
                 dynamic_config: DynamicBrokerConfig) -> None:
        """`clock`: what retention and the cleaner count time by (a test may advance it)."""
        self.logs = logs
        self.cleaner = cleaner
        self.clock = clock
        self.dynamic_config = dynamic_config
        # Wakes the cleaner's loop when its dynamic configs change (`_run_cleaner`).
        self._cleaner_reconfigured = trio.Event()

    async def run(self, config: BrokerConfig, *,
                  task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Every job on its interval until cancelled; a failed run is logged and retried at
        the next interval."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._every, config.log_retention_check_interval_ms,
                               self.retention)
            nursery.start_soon(self._every, config.log_flush_scheduler_interval_ms,
                               self._flush)
            nursery.start_soon(self._every, DELETE_CHECK_INTERVAL_MS, self._delete_files)
            nursery.start_soon(self._every, config.log_flush_offset_checkpoint_interval_ms,
                               self._checkpoint)
            nursery.start_soon(self._every,
                               config.log_flush_start_offset_checkpoint_interval_ms,
                               self._checkpoint_log_start)
            nursery.start_soon(self._every,
                               config.replica_high_watermark_checkpoint_interval_ms,
                               self._checkpoint_high_watermarks)
            if config.log_cleaner_enable:
                nursery.start_soon(self._run_cleaner)
            task_status.started()

    async def _every(self, interval_ms: int, job: Any) -> None:
        await run_every(interval_ms, job, f"background job {job.__name__}")

    def validate_cleaner(self, old: BrokerConfig, new: BrokerConfig) -> None:
        """Kafka's LogCleaner.validateReconfiguration, word for word."""
        threads, current = new.log_cleaner_threads, old.log_cleaner_threads
        if threads < 1:
            raise ConfigError("log.cleaner.threads", threads, "", message=(
                "Log cleaner threads should be at least 1"))
        if threads < current // 2:
            raise ConfigError("log.cleaner.threads", threads, "", message=(
                "Log cleaner threads cannot be reduced to less than half the current value "
                f"{current}"))
        if threads > current * 2:
            raise ConfigError("log.cleaner.threads", threads, "", message=(
                "Log cleaner threads cannot be increased to more than double the current "
                f"value {current}"))

    def reconfigure_cleaner(self, old: BrokerConfig, new: BrokerConfig) -> None:
        """The next cleaning pass runs with the new thread count, buffers and backoff
        (`clean_logs` and its loop read them from the current configuration)."""
        threads = new.log_cleaner_threads
        self.cleaner.max_map_entries = LogCleaner.max_map_entries_for(
            new.log_cleaner_dedupe_buffer_size, threads)
        self.cleaner.io_chunk = LogCleaner.io_chunk_for(new.log_cleaner_io_buffer_size, threads)
        self._cleaner_reconfigured.set()

    async def retention(self) -> None:
        deleted = self.apply_retention()
        if deleted:
            log.info("retention deleted %d segment(s)", deleted)

    def apply_retention(self) -> int:
        """Retention by the broker's clock (retention.ms counts from a segment's largest
        record timestamp to the clock's now); how many segments were deleted."""
        return self.logs.cleanup(self.clock.now_ms())

    async def _delete_files(self) -> None:
        """Remove segments retention or the cleaner renamed `.deleted`, once their
        file.delete.delay.ms is over (Kafka schedules one task per file): closed here, and
        unlinked in a worker thread, since unlinking a large file takes the file system tens
        of milliseconds."""
        due = self.logs.close_due_deletes(self.clock.now_ms())
        if due:
            await trio.to_thread.run_sync(_unlink, due)

    async def _flush(self) -> None:
        await trio.to_thread.run_sync(self.logs.flush_dirty, int(time.time() * 1000))

    async def _checkpoint(self) -> None:
        await trio.to_thread.run_sync(partial(self.logs.checkpoint, log_start_offsets=False,
                                              high_watermarks=False))

    async def _checkpoint_log_start(self) -> None:
        await trio.to_thread.run_sync(partial(self.logs.checkpoint, recovery_points=False,
                                              high_watermarks=False))

    async def _checkpoint_high_watermarks(self) -> None:
        await trio.to_thread.run_sync(partial(self.logs.checkpoint, recovery_points=False,
                                              log_start_offsets=False))

    async def _run_cleaner(self) -> None:
        """A cleaning pass every log.cleaner.backoff.ms, with the thread count and backoff
        of the configuration as it is then (both dynamic): a reconfigured cleaner starts
        again at once, as Kafka restarts its cleaner threads. log.cleaner.threads=0 cleans
        nothing, as Kafka runs no cleaner thread."""
        while True:
            backoff_ms = self.dynamic_config.current.log_cleaner_backoff_ms
            with trio.move_on_after(max(backoff_ms, MIN_INTERVAL_MS) / 1000):
                await self._cleaner_reconfigured.wait()
            self._cleaner_reconfigured = trio.Event()
            if self.dynamic_config.current.log_cleaner_threads > 0:
                try:
                    await self.clean_logs()
                except Exception:
                    log.exception("background job clean_logs failed")

    async def clean_logs(self) -> int:
        """One pass of the log cleaner: compact every log that needs it, filthiest first,
        up to log.cleaner.threads logs at a time (Kafka's cleaner threads).

        Planning and the final swap run here, on the event loop, between requests, so reads
        never see half a swap; reading, filtering, writing and fsyncing the cleaned segments
        run in worker threads, one log each, as does writing the checkpoint. A log is planned
        by one worker only (it joins `done` before the next await). A cancel (shutdown)
        abandons the threads and tells them to stop; each removes its own files. Returns how
        many logs were cleaned.
        """
        cleaned = 0
        done: set[TopicPartition] = set()

        async def worker() -> None:
            nonlocal cleaned
            while True:
                plan = self.cleaner.grab_filthiest_log(self.clock.now_ms(), exclude=done)
                if plan is None:
                    return
                done.add(plan.topic_partition)
                stop = threading.Event()
                try:
                    result = await trio.to_thread.run_sync(self.cleaner.clean, plan, stop,
                                                           abandon_on_cancel=True)
                except BaseException:
                    stop.set()
                    raise
                try:
                    committed = self.cleaner.commit(result, write_checkpoint=False)
                except OSError as exc:
                    committed, result.error = None, exc
                if isinstance(result.error, OSError):  # the log dir failed (KIP-112),
                    # unless the log was deleted meanwhile (fail_log ignores it then)
                    self.logs.fail_log(plan.log, result.error)
                elif committed is not None:
                    cleaned += 1

        async with trio.open_nursery() as nursery:
            for _ in range(max(1, self.dynamic_config.current.log_cleaner_threads)):
                nursery.start_soon(worker)
        files = self.cleaner.checkpoint_files()
        if files:
            await trio.to_thread.run_sync(self.cleaner.write_checkpoint_files, files)
        return cleaned
