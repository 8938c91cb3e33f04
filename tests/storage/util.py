"""Batch builders and log helpers shared by the storage tests."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from protocol.primitives import FileRegion
from protocol.records.batch import iter_batches
from protocol.records.record import DecodedRecord, Record, build_batch, iter_records_in
from pybroker.storage.log_config import LogConfig
from pybroker.storage.partition_log import PartitionLog

# Small segments and a small index interval so tests roll and index often.
SMALL = LogConfig(segment_bytes=4096, index_interval_bytes=512, file_delete_delay_ms=0)


def batch(n: int = 1, *, value_size: int = 100, ts: int | list[int] = 1_000,
          key: bytes | None = b"k", **kw: Any) -> bytes:
    """A batch of `n` records; `ts` is one timestamp for all, or one per record."""
    stamps = ts if isinstance(ts, list) else [ts] * n
    return build_batch([Record(key, bytes([65 + i % 26]) * value_size, timestamp=t)
                        for i, t in zip(range(n), stamps)], **kw)


def fill(plog: PartitionLog, batches: int, *, per_batch: int = 3, value_size: int = 100,
         ts0: int = 1_000, epoch: int = 0) -> None:
    """Append `batches` batches whose records have timestamps ts0, ts0+1, ..."""
    ts = ts0
    for _ in range(batches):
        plog.append(batch(per_batch, value_size=value_size,
                          ts=list(range(ts, ts + per_batch))), leader_epoch=epoch)
        ts += per_batch
    plog.update_high_watermark()


def read_all(plog: PartitionLog, start: int | None = None) -> list[DecodedRecord]:
    """Every record from `start` (default: log start) to the log end, fetch by fetch."""
    offset = plog.log_start_offset if start is None else start
    out: list[DecodedRecord] = []
    while offset < plog.log_end_offset:
        data = plog.read(offset, 10_000, max_offset=plog.log_end_offset)
        assert data.records, f"no progress at {offset}"
        assert not isinstance(data.records, FileRegion)  # region_min_batch 0: never a region
        out.extend(r for r in iter_records_in(data.records) if r.offset >= offset)
        offset = data.next_offset
    return out


def batch_offsets(records: bytes) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset) for _, h in iter_batches(records)]


def files(path: Path, suffix: str) -> list[str]:
    return sorted(p.name for p in path.iterdir() if p.name.endswith(suffix))
