"""Compaction with transactions: aborted data goes, markers stay while their data does, and
nothing at or above the last stable offset is cleaned."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from protocol.records.batch import DELETE_HORIZON, iter_batches
from pybroker.storage.cleaner import LogCleaner
from pybroker.storage.partition_log import PartitionLog
from tests.storage.compacted_logs import COMPACT, DAY, T0, as_map, open_logs, put

A, B = 1000, 2000
CONFIG = dataclasses.replace(COMPACT, delete_retention_ms=DAY)


def txn_put(plog: PartitionLog, pid: int, seq: int, key: bytes, value: bytes) -> int:
    return put(plog, key, value, producer_id=pid, producer_epoch=0, base_sequence=seq,
               transactional=True)


def end_txn(plog: PartitionLog, pid: int, commit: bool) -> int:
    info = plog.append_control_marker(pid, 0, 0, commit, leader_epoch=0, now_ms=T0)
    plog.update_high_watermark()
    return info.first_offset


def markers(plog: PartitionLog) -> dict[int, bool]:
    """Offset of every control batch in the log -> whether it carries a delete horizon."""
    out = {}
    for seg in plog.segments:
        if seg.is_empty:
            continue
        data = seg.read(seg.base_offset, 1 << 20, max_offset=1 << 40)
        assert data is not None
        for _, h in iter_batches(data.records):
            if h.is_control:
                out[h.base_offset] = bool(h.attributes & DELETE_HORIZON)
    return out


def seal(plog: PartitionLog) -> None:
    """A plain record after everything, then a roll: all of it becomes cleanable."""
    put(plog, b"zz", b"end")
    plog.roll()


def test_aborted_data_goes_committed_stays_and_markers_wait_for_their_data(
        tmp_path: Path) -> None:
    logs = open_logs(tmp_path, CONFIG)
    plog = logs.get_or_create("t", 0)
    put(plog, b"a", b"1")  # 0
    txn_put(plog, A, 0, b"a", b"aborted")  # 1: must not supersede a=1
    abort = end_txn(plog, A, commit=False)  # 2
    txn_put(plog, B, 0, b"b", b"committed")  # 3
    commit = end_txn(plog, B, commit=True)  # 4
    seal(plog)
    assert plog.aborted_transactions(0, plog.log_end_offset) == [(A, 1)]
    cleaner = LogCleaner(logs)

    first = cleaner.clean_log(plog, T0, force=True)
    assert first is not None and first.aborted_removed == 1 and first.markers_removed == 0
    assert as_map(plog) == {b"a": (0, b"1", T0), b"b": (3, b"committed", T0),
                            b"zz": (5, b"end", T0)}
    # Both markers stay: this pass saw batches of their transactions.
    assert markers(plog) == {abort: False, commit: False}
    assert plog.aborted_transactions(0, plog.log_end_offset) == [(A, 1)]
    assert plog.segments[0].txn_index.entries[0].last_offset == abort

    # Now A has no data left: its marker gets the delete horizon; B's data is still there.
    second = cleaner.clean_log(plog, T0 + 1, force=True)
    assert second is not None and second.markers_removed == 0
    assert markers(plog) == {abort: True, commit: False}
    assert plog.aborted_transactions(0, plog.log_end_offset) == [(A, 1)]
    assert cleaner.plan(plog, T0 + 1 + DAY - 1) is None  # the horizon is remembered
    third = cleaner.clean_all(T0 + 1 + DAY)
    assert [s.markers_removed for s in third] == [1]
    assert markers(plog) == {commit: False}
    assert plog.aborted_transactions(0, plog.log_end_offset) == []

    # B's committed record is superseded: its marker outlives it by one pass, then the horizon.
    put(plog, b"b", b"plain")
    seal(plog)
    cleaner.clean_log(plog, T0 + 2 * DAY, force=True)
    assert b"committed" not in {v for _, v, _ in as_map(plog).values()}
    assert markers(plog) == {commit: False}
    cleaner.clean_log(plog, T0 + 2 * DAY, force=True)
    assert markers(plog) == {commit: True}
    cleaner.clean_log(plog, T0 + 3 * DAY, force=True)
    assert markers(plog) == {}
    # Replaying what is left finds no transaction open.
    plog.close()
    logs2 = open_logs(tmp_path, CONFIG)
    again = logs2.get_or_create("t", 0)
    assert again.ongoing_transactions() == {} and again.first_unstable_offset is None


def test_nothing_at_or_above_the_lso_is_cleaned(tmp_path: Path) -> None:
    logs = open_logs(tmp_path, CONFIG)
    plog = logs.get_or_create("t", 0)
    for i in range(20):
        put(plog, b"k", b"%d" % i)
    plog.roll()
    open_at = txn_put(plog, A, 0, b"k", b"open")  # 20: open, so the LSO stays here
    plog.roll()
    for i in range(20):
        put(plog, b"k", b"late %d" % i)
    plog.roll()
    assert plog.last_stable_offset == open_at < plog.high_watermark
    cleaner = LogCleaner(logs)
    plan = cleaner.plan(plog, T0, force=True)
    assert plan is not None and plan.first_uncleanable == open_at
    plan.close()
    stats = cleaner.clean_log(plog, T0, force=True)
    assert stats is not None and stats.end_offset <= open_at
    survivors = [h.base_offset for seg in plog.segments if not seg.is_empty
                 for _, h in iter_batches(seg.read(seg.base_offset, 1 << 20,
                                                   max_offset=1 << 40).records)]
    # Below the LSO compacted to the newest value; at and above it untouched.
    assert survivors == [19] + list(range(20, 41))
    # Once the transaction commits and the HW passes it, the rest becomes cleanable.
    end_txn(plog, A, commit=True)
    seal(plog)
    cleaner.clean_log(plog, T0, force=True)
    assert as_map(plog)[b"k"] == (40, b"late 19", T0)
