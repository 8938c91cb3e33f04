"""Compacted logs for the log cleaner's tests (tests/storage/test_cleaner.py and
test_cleaner_transactions.py): the compacting config, a record appended at a timestamp, and a
log read back as {key: (offset, value, timestamp)}, where a cleaned log's trailing gap is
allowed."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from protocol.primitives import FileRegion
from protocol.records.record import DecodedRecord, Record, build_batch, iter_records_in
from pybroker.storage.log_config import LogConfig
from pybroker.storage.log_manager import LogManager
from pybroker.storage.partition_log import PartitionLog
from tests.storage.util import SMALL

COMPACT = dataclasses.replace(SMALL, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
DAY = 86_400_000
T0 = 1_700_000_000_000  # record timestamps (ms)


def open_logs(tmp_path: Path, config: LogConfig = COMPACT) -> LogManager:
    return LogManager([str(tmp_path / "logs")], default_config=config)


def put(plog: PartitionLog, key: bytes | None, value: bytes | None, ts: int = T0,
        **kw: object) -> int:
    batch = build_batch([Record(key, value, timestamp=ts)], **kw)  # type: ignore[arg-type]
    info = plog.append(batch, leader_epoch=0)
    plog.update_high_watermark()
    return info.first_offset


def read_all(plog: PartitionLog) -> list[DecodedRecord]:
    """Every record, fetch by fetch. Unlike util.py's read_all this accepts a trailing gap:
    cleaning may remove the last records below the log end, as Kafka's does (a consumer then
    reads nothing until new records arrive)."""
    offset = plog.log_start_offset
    out: list[DecodedRecord] = []
    while offset < plog.log_end_offset:
        data = plog.read(offset, 10_000, max_offset=plog.log_end_offset)
        if not data.records:
            assert data.next_offset == offset
            break
        assert not isinstance(data.records, FileRegion)  # region_min_batch 0: never a region
        out.extend(r for r in iter_records_in(data.records) if r.offset >= offset)
        offset = data.next_offset
    return out


def as_map(plog: PartitionLog) -> dict[bytes | None, tuple[int, bytes | None, int]]:
    out: dict[bytes | None, tuple[int, bytes | None, int]] = {}
    for r in read_all(plog):
        assert r.key not in out, f"key {r.key!r} twice, at {out[r.key][0]} and {r.offset}"
        out[r.key] = (r.offset, r.value, r.timestamp)
    return out
