"""One segment: appending, finding, reading, truncating, recovering."""
from __future__ import annotations

from pathlib import Path

from protocol.records.batch import iter_batches
from pybroker.storage.log_config import LogConfig
from pybroker.storage.segment import LogSegment
from tests.storage.util import batch

CONFIG = LogConfig(index_interval_bytes=300)


def _fill(segment: LogSegment, count: int, base: int = 0) -> list[tuple[int, int]]:
    """Append `count` 2-record batches at offsets base, base+2, ...; returns (offset, pos)."""
    placed = []
    offset = base
    for i in range(count):
        data = bytearray(batch(2, ts=[100 + i, 100 + i]))
        data[0:8] = offset.to_bytes(8, "big")
        placed.append((offset, segment.size))
        segment.append(data, [(0, len(data), offset, offset + 1, 100 + i)])
        offset += 2
    return placed


def test_files_named_by_base_offset(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 42, CONFIG, create=True)
    _fill(segment, 1, base=42)
    segment.close()
    # Index files are created by their first entry: a new partition creates one file.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00000000000000000042.log"]
    segment = LogSegment(tmp_path, 42, CONFIG)
    _fill(segment, 20, base=44)
    segment.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000042.index", "00000000000000000042.log",
        "00000000000000000042.timeindex"]


def test_translate_and_read(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, create=True)
    placed = _fill(segment, 20)
    assert segment.read_next_offset() == 40
    for offset, pos in placed:
        for target in (offset, offset + 1):
            found = segment.translate_offset(target)
            assert found is not None and found[0] == pos and found[1].base_offset == offset
    assert segment.translate_offset(40) is None
    read = segment.read(11, 10_000, max_offset=40)
    assert read is not None and read.first_offset == 10 and read.next_offset == 40
    assert [h.base_offset for _, h in iter_batches(read.records)] == list(range(10, 40, 2))


def test_sparse_index(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, create=True)
    _fill(segment, 50)
    batch_size = segment.size // 50
    index = segment.offset_index
    positions = [index._values[i] for i in range(index.entries)]
    assert len(positions) >= 50 * batch_size // (300 + 2 * batch_size)
    gaps = [b - a for a, b in zip([0] + positions, positions)]
    # An entry once more than index_interval_bytes went by: never closer, at most a batch more.
    assert all(300 < gap <= 300 + 2 * batch_size for gap in gaps), gaps
    assert segment.time_index.entries == len(positions)  # timestamps grow with each batch


def test_truncate_to_removes_batch_and_after(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, create=True)
    placed = _fill(segment, 20)
    removed = segment.truncate_to(21)  # inside the batch 20..21
    assert segment.size == placed[10][1] and removed > 0
    assert segment.read_next_offset() == 20
    assert segment.offset_index.last_entry()[0] < 20
    assert segment.time_index.last_entry()[1] < 20
    _fill(segment, 1, base=20)
    assert segment.read_next_offset() == 22


def test_recover_truncates_garbage_and_rebuilds_indexes(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, create=True)
    _fill(segment, 20)
    good = segment.size
    entries = segment.offset_index.entries
    segment.close()
    with open(tmp_path / "00000000000000000000.log", "ab") as f:
        f.write(b"\x00\x01garbage" * 10)
    (tmp_path / "00000000000000000000.index").unlink()
    reopened = LogSegment(tmp_path, 0, CONFIG)
    assert reopened.recover() == 90
    assert reopened.size == good
    assert reopened.offset_index.entries == entries
    assert reopened.read_next_offset() == 40


def test_max_timestamp_survives_reopen(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, create=True)
    _fill(segment, 30)
    segment.on_become_inactive()
    segment.close()
    reopened = LogSegment(tmp_path, 0, CONFIG)
    assert reopened.max_timestamp_so_far == 129
    assert reopened.offset_of_max_timestamp == 58
    assert reopened.max_timestamp_record() == (58, 129)
