"""Driving the pure transaction state machine the way the façade does, without an event loop.

`TxnDriver` allocates producer ids when the machine asks for one, persists each outcome's
records by replaying them at once (keeping the log, so tests can load it into a fresh machine),
and collects the marker jobs until a test says their markers are written.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from pybroker.coordinator.txn_records import TxnLogValue
from pybroker.coordinator.txn_state import (
    MarkerJob, TxnConfig, TxnOutcome, TxnStateMachine,
)

LogEntry = tuple[str, TxnLogValue | None, int, int]  # id, value, partition, coordinator epoch


@dataclass
class TxnDriver:
    config: TxnConfig = field(default_factory=TxnConfig)
    now: int = 1_000
    partition: int = 3
    coordinator_epoch: int = 7
    next_pid: int = 1000

    def __post_init__(self) -> None:
        self.m = TxnStateMachine(self.config)
        self.log: list[LogEntry] = []
        self.jobs: list[MarkerJob] = []

    def run(self, outcome: TxnOutcome[Any]) -> Any:
        for tid, value in outcome.records:
            self.log.append((tid, value, self.partition, self.coordinator_epoch))
            self.m.replay(tid, value, self.partition, self.coordinator_epoch)
        self.jobs.extend(outcome.markers)
        return outcome.response

    # -- requests -------------------------------------------------------------------------------
    def init(self, tid: str = "t", timeout: int = 60_000, **kw: Any) -> tuple[ErrorCode, int, int]:
        new = None
        if self.m.needs_producer_id(tid):
            new, self.next_pid = self.next_pid, self.next_pid + 1
        result: tuple[ErrorCode, int, int] = self.run(self.m.init_producer_id(
            tid, timeout, self.partition, self.coordinator_epoch, self.now,
            new_producer_id=new, **kw))
        return result

    def producer(self, tid: str = "t", timeout: int = 60_000) -> tuple[int, int]:
        error, pid, epoch = self.init(tid, timeout)
        assert error == ErrorCode.NONE, error
        return pid, epoch

    def add(self, tid: str, pid: int, epoch: int, *tps: TopicPartition) -> ErrorCode:
        result: ErrorCode = self.run(self.m.add_partitions(tid, pid, epoch, tps, self.now))
        return result

    def end(self, tid: str, pid: int, epoch: int, commit: bool) -> ErrorCode:
        result: ErrorCode = self.run(self.m.end_transaction(tid, pid, epoch, commit, self.now))
        return result

    def write_markers(self) -> list[MarkerJob]:
        """Every collected job's markers are written; returns the jobs."""
        jobs, self.jobs = self.jobs, []
        for job in jobs:
            self.run(self.m.markers_written(job, self.now))
        return jobs

    def expire(self, now: int) -> None:
        self.now = now
        self.run(self.m.expire(now))

    # -- checks ---------------------------------------------------------------------------------
    def loaded(self, coordinator_epoch: int | None = None) -> TxnStateMachine:
        """A fresh machine that loaded this driver's log (at a new coordinator epoch)."""
        fresh = TxnStateMachine(self.config)
        for tid, value, partition, epoch in self.log:
            fresh.replay(tid, value, partition,
                         epoch if coordinator_epoch is None else coordinator_epoch)
        return fresh


def persisted_view(m: TxnStateMachine) -> dict[str, tuple[Any, ...]]:
    """What the log holds of every transaction (not the last producer id/epoch: the v0 record
    does not carry them)."""
    return {t.transactional_id: (t.producer_id, t.producer_epoch, t.timeout_ms, t.state,
                                 frozenset(t.partitions), t.start_ms, t.last_update_ms,
                                 t.log_partition, t.pending)
            for t in m.list(set(), set(), -1, 0)}
