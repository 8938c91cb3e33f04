"""The sendfile read path: records as a FileRegion of the segment file, byte for byte the same
as the in-memory read."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from protocol.primitives import FileRegion
from pybroker.storage.log_config import LogConfig
from pybroker.storage.partition_log import PartitionLog
from tests.storage.util import fill

CONFIG = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=4096, file_delete_delay_ms=0)


def _bytes(records: bytes | memoryview | FileRegion) -> bytes:
    if isinstance(records, FileRegion):
        return os.pread(records.source.fileno(), records.length, records.offset)
    return bytes(records)


def test_region_read_matches_memory_read(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", CONFIG)
    # Batches of ~1.2 KB to ~5 KB over several segments.
    for n in range(1, 40):
        fill(plog, 1, per_batch=1 + n % 4, value_size=1000, ts0=n * 10)
    hw = plog.high_watermark
    regions = 0
    for offset in range(0, plog.log_end_offset + 1, 3):
        for max_bytes in (1, 2000, 7000, 30_000, 10**6):
            for max_offset in (hw, hw - 5, offset + 4):
                for min_one in (True, False):
                    kw = dict(max_offset=max_offset, min_one_message=min_one)
                    plain = plog.read(offset, max_bytes, **kw)
                    region = plog.read(offset, max_bytes, region_min_batch=1, **kw)
                    if isinstance(region.records, FileRegion):
                        regions += 1
                    assert _bytes(region.records) == plain.records, (offset, max_bytes, kw)
                    assert (region.first_offset, region.next_offset) == \
                        (plain.first_offset, plain.next_offset)
    assert regions > 100


def test_small_batches_stay_in_memory(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", CONFIG)
    fill(plog, 10, per_batch=2, value_size=100)
    data = plog.read(0, 10**6, region_min_batch=4096)
    assert isinstance(data.records, bytes) and data.records


def test_region_source_refuses_once_closed(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", CONFIG)
    fill(plog, 3, per_batch=2, value_size=1000)
    data = plog.read(0, 10**6, region_min_batch=1)
    assert isinstance(data.records, FileRegion)
    plog.close()
    with pytest.raises(ValueError):
        data.records.source.fileno()


def test_read_end_hints_survive_truncation_and_appends(tmp_path: Path) -> None:
    """A read remembers where the next batch starts; after a truncation and new appends the
    next read from that offset still answers exactly as a fresh log (no hints) does."""
    config = LogConfig(segment_bytes=10**6, index_interval_bytes=256, file_delete_delay_ms=0)
    plog = PartitionLog(tmp_path / "t-0", config)
    fill(plog, 30, per_batch=2, value_size=50)
    ends = []
    offset = 0
    while offset < plog.log_end_offset:  # read in small steps: every batch end is remembered
        data = plog.read(offset, 150 if len(ends) % 2 else 400)
        ends.append(data.next_offset)
        offset = data.next_offset
    assert plog.active_segment._read_ends  # the reads left hints
    plog.truncate_to(21)  # drops the batch holding 21 too: the log ends at 20
    fill(plog, 5, per_batch=3, value_size=70, ts0=5_000)
    for offset in [0, *ends]:
        if offset > plog.log_end_offset:
            continue
        hinted = plog.read(offset, 10_000)
        fresh = PartitionLog(tmp_path / "t-0", config).read(offset, 10_000)
        assert (hinted.records, hinted.next_offset) == (fresh.records, fresh.next_offset), offset


def test_region_stops_before_small_batches(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", CONFIG)
    fill(plog, 1, per_batch=8, value_size=1000)  # ~8 KB
    fill(plog, 3, per_batch=1, value_size=10)  # tiny ones after it
    fill(plog, 1, per_batch=8, value_size=1000, ts0=50)
    plain = plog.read(0, 10**6)
    region = plog.read(0, 10**6, region_min_batch=4096)
    assert isinstance(region.records, FileRegion)
    assert region.next_offset == 8
    assert plain.records.startswith(_bytes(region.records))
    # Below the high watermark the small batches are not the segment's whole tail: they come
    # from memory, a view of the whole batches read, not a copy.
    hw = plog.high_watermark
    rest = plog.read(region.next_offset, 10**6, region_min_batch=4096, max_offset=hw - 1)
    assert isinstance(rest.records, memoryview) and rest.next_offset == 11
    read = _bytes(region.records) + _bytes(rest.records)
    assert read == plain.records[:len(read)]
    # Up to the log end they are the rest of the segment, one range of its file: a region,
    # located without reading a header.
    tail = plog.read(region.next_offset, 10**6, region_min_batch=4096)
    assert isinstance(tail.records, FileRegion) and tail.next_offset == plog.log_end_offset
    assert _bytes(region.records) + _bytes(tail.records) == plain.records


def test_tail_region_only_when_it_fits_and_is_readable(tmp_path: Path) -> None:
    """The rest of the segment goes as a region only when all of it fits `max_bytes` and is
    below `max_offset`; a smaller limit or a high watermark inside it reads from memory."""
    plog = PartitionLog(tmp_path / "t-0", CONFIG)
    fill(plog, 20, per_batch=2, value_size=200)  # 20 batches of ~0.5 KB: ~10 KB, one segment
    whole = plog.read(0, 10**6)
    size = len(whole.records)
    tail = plog.read(0, 10**6, region_min_batch=4096)
    assert isinstance(tail.records, FileRegion) and _bytes(tail.records) == whole.records
    for kw in ({"max_bytes": size - 1}, {"max_bytes": 10**6, "max_offset": 39}):
        max_bytes = kw.pop("max_bytes")
        plain = plog.read(0, max_bytes, **kw)
        got = plog.read(0, max_bytes, region_min_batch=4096, **kw)
        assert not isinstance(got.records, FileRegion)
        assert _bytes(got.records) == plain.records
        assert got.next_offset == plain.next_offset
    small = plog.read(30, 10**6, region_min_batch=4096)  # the last ~2.5 KB: below the minimum
    assert isinstance(small.records, bytes)
