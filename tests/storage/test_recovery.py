"""Loading after crashes: torn and corrupt tails, missing and broken indexes."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from protocol.records.batch import iter_batches
from pybroker.storage.partition_log import PartitionLog
from tests.storage.util import SMALL, batch, files, fill, read_all


def make_log(tmp_path: Path, batches: int = 40) -> tuple[Path, list]:
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    fill(plog, batches)
    records = read_all(plog)
    plog.close()
    return tmp_path / "t-0", records


@pytest.mark.parametrize("clean", [True, False])
def test_garbage_after_newest_log_is_truncated(tmp_path: Path, clean: bool,
                                               caplog: pytest.LogCaptureFixture) -> None:
    directory, records = make_log(tmp_path)
    newest = directory / files(directory, ".log")[-1]
    good_size = newest.stat().st_size
    with open(newest, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x99garbage-garbage-garbage" * 7)
    with caplog.at_level(logging.WARNING):
        plog = PartitionLog(directory, SMALL, had_clean_shutdown=clean)
    assert newest.stat().st_size == good_size
    assert "truncated" in caplog.text
    assert read_all(plog) == records
    assert plog.append(batch(2), leader_epoch=0).first_offset == len(records)
    plog.close()
    assert read_all(PartitionLog(directory, SMALL))[-1].offset == len(records) + 1


def test_torn_last_batch_is_truncated(tmp_path: Path) -> None:
    directory, records = make_log(tmp_path)
    newest = directory / files(directory, ".log")[-1]
    data = newest.read_bytes()
    last_pos = list(iter_batches(data))[-1][0]
    newest.write_bytes(data[:-10])  # half-written last batch
    plog = PartitionLog(directory, SMALL, had_clean_shutdown=False)
    assert newest.stat().st_size == last_pos
    assert read_all(plog) == records[:-3]


def test_flipped_byte_in_middle_of_tail_segment_truncates_at_that_batch(tmp_path: Path) -> None:
    directory, records = make_log(tmp_path)
    newest = directory / files(directory, ".log")[-1]
    data = bytearray(newest.read_bytes())
    batches = list(iter_batches(data))
    assert len(batches) >= 4
    pos, header = batches[len(batches) // 2]
    data[pos + 100] ^= 0x40  # a record byte: only the CRC notices
    newest.write_bytes(data)
    plog = PartitionLog(directory, SMALL, had_clean_shutdown=False)
    assert newest.stat().st_size == pos
    assert plog.log_end_offset == header.base_offset
    assert read_all(plog) == records[:header.base_offset]
    assert plog.append(batch(1), leader_epoch=0).first_offset == header.base_offset


def test_corruption_in_older_segment_drops_later_segments(tmp_path: Path) -> None:
    directory, records = make_log(tmp_path)
    logs = files(directory, ".log")
    assert len(logs) >= 3
    second = directory / logs[1]
    data = bytearray(second.read_bytes())
    pos, header = list(iter_batches(data))[1]
    data[pos + 70] ^= 0x01
    second.write_bytes(data)
    plog = PartitionLog(directory, SMALL, had_clean_shutdown=False, recovery_point=0)
    assert files(directory, ".log") == logs[:2]
    assert plog.log_end_offset == header.base_offset
    assert read_all(plog) == records[:header.base_offset]


def test_segments_below_recovery_point_are_not_revalidated(tmp_path: Path) -> None:
    directory, records = make_log(tmp_path)
    logs = files(directory, ".log")
    first = directory / logs[0]
    data = bytearray(first.read_bytes())
    data[200] ^= 0x01  # corrupt, but below the recovery point: trusted, like Kafka
    first.write_bytes(data)
    plog = PartitionLog(directory, SMALL, had_clean_shutdown=False,
                        recovery_point=len(records))
    assert plog.log_end_offset == len(records)
    assert files(directory, ".log") == logs


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_deleted_index_files_are_rebuilt(tmp_path: Path, suffix: str) -> None:
    directory, records = make_log(tmp_path)
    before = {name: (directory / name).read_bytes() for name in files(directory, suffix)}
    for name in before:
        (directory / name).unlink()
    plog = PartitionLog(directory, SMALL)
    assert read_all(plog) == records
    assert plog.offset_for_timestamp(1_050) == (50, 1_050)
    after = {name: (directory / name).read_bytes() for name in files(directory, suffix)}
    assert after.keys() == before.keys()
    if suffix == ".index":
        assert after == before  # rebuilt byte for byte


@pytest.mark.parametrize("clean", [True, False])
def test_deleted_index_files_of_a_segment_without_entries_come_back(tmp_path: Path,
                                                                    clean: bool) -> None:
    """An operator deleted every index file; a segment larger than index.interval.bytes
    gets both back on load even when its rebuild finds no entry (one big batch), as
    Kafka's recovery of a segment leaves them. The durability test found the newest segment
    without its `.index` whenever the client's batching left one batch there. (A segment no
    larger than the interval is a new one's equal: its files come with its first entry.)"""
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    segments = len(plog.segments)
    while len(plog.segments) == segments or segments == 1:  # until a roll, past the first
        segments = len(plog.segments)
        fill(plog, 1, value_size=200)
    records = read_all(plog)
    plog.close()
    directory = tmp_path / "t-0"
    logs = files(directory, ".log")
    assert (directory / logs[-1]).stat().st_size > SMALL.index_interval_bytes
    for suffix in (".index", ".timeindex"):
        for name in files(directory, suffix):
            (directory / name).unlink()
    plog = PartitionLog(directory, SMALL, had_clean_shutdown=clean)
    for suffix in (".index", ".timeindex"):
        assert files(directory, suffix) == [name.replace(".log", suffix) for name in logs]
    assert read_all(plog) == records
    plog.close()


def test_implausible_index_is_rebuilt_on_first_use(tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    directory, records = make_log(tmp_path)
    index = directory / files(directory, ".index")[0]
    index.write_bytes(index.read_bytes()[:-3])  # torn entry
    plog = PartitionLog(directory, SMALL)
    with caplog.at_level(logging.WARNING):
        assert read_all(plog) == records
    assert "rebuilding" in caplog.text
    assert index.stat().st_size % 8 == 0


def test_leftovers_are_removed(tmp_path: Path) -> None:
    directory, records = make_log(tmp_path)
    (directory / "00000000000000000007.log.deleted").write_bytes(b"x")
    (directory / "00000000000000099999.index").write_bytes(b"")
    (directory / "leader-epoch-checkpoint.tmp").write_bytes(b"half")
    plog = PartitionLog(directory, SMALL)
    assert not list(directory.glob("*.deleted")) and not list(directory.glob("*.tmp"))
    assert not (directory / "00000000000000099999.index").exists()
    assert read_all(plog) == records
