"""Compaction's record-level half: which records of a batch survive, and the rewritten batch.

Theory of operation. The log cleaner (`pybroker.storage.cleaner`) decides *what* to keep from
an offset map (key -> newest offset) built over the dirty part of a log; this module applies
that decision to one v2 batch at a time, as Kafka's `MemoryRecords.filterTo` applies the
cleaner's `RecordFilter`. It is a pure bytes-in, bytes-out transform: no files, no clock (the
caller passes `now`), so it is tested on its own and cannot block anything.

Records are located, not decoded (`_parse_records`): a record is a run of bytes with its key,
offset delta and timestamp delta read from its varint prefix, and a kept record is copied as
it is whenever its timestamp delta does not change. A record is kept when it has a key and no
newer offset for that key is in the map. Records without a key are dropped (Kafka does the
same; a compacted topic refuses them at produce). A batch left with no record is dropped
(Kafka keeps an empty batch for the last batch of an idempotent producer; producer state here
is restored from snapshots, so nothing needs them). Control batches (transaction markers) go
through `filter_control_batch`; which transactional batches are aborted, and so dropped whole,
is the cleaner's knowledge, not this module's.

What a rewritten batch preserves: offsets (never reassigned, so cleaning leaves gaps),
timestamps, headers, the producer id, epoch and base sequence, the partition leader epoch,
the timestamp type and the codec (a batch that changes is re-compressed with its own codec).
Its header is built by `batch.pack_batch`, like every batch this package builds.

Tombstones (records with a null value) follow Kafka's delete horizon (KIP-534): the first pass
that keeps a tombstone stamps its batch with the DELETE_HORIZON attribute and baseTimestamp =
the horizon the caller passes (now + delete.retention.ms); record timestamp deltas are
re-based so every record keeps its timestamp. A later pass at or after that time drops the
tombstone; a batch that no longer keeps one gets its first record's timestamp back as its
baseTimestamp. So a consumer that reads from the start to the end within
delete.retention.ms sees every delete. The horizon a batch keeps is returned, so the cleaner
can clean the log again when it is reached.

Transaction markers follow the same horizon (Kafka piggy-backs them on the tombstone logic):
while any batch of its transaction is still in the log a marker is kept as it is (replaying
the log without it would leave the transaction open); the first pass that finds none stamps
it with the horizon, and a pass at or after that time drops it.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from protocol.records.batch import CONTROL, DELETE_HORIZON, LOG_APPEND_TIME, BatchHeader, \
    pack_batch
from protocol.records.compression import compress
from protocol.records.record import get_varint, put_varint, records_data
from protocol.records.types import Compression, InvalidRecordError

__all__ = ["FilterCounts", "keyed_offsets", "filter_batch", "filter_control_batch"]


class FilterCounts(Protocol):
    """What `filter_batch` counts as it goes (the cleaner's stats satisfy it): kept as
    attributes the caller owns, so that a pass over many batches adds up without a result
    object per batch."""

    records_read: int
    records_kept: int
    superseded: int
    tombstones_removed: int
    keyless_removed: int


# (record start, attributes position, end of timestamp delta, record end, timestamp delta,
#  offset delta, key, value is null)
_Rec = tuple[int, int, int, int, int, int, "bytes | None", bool]


def _parse_records(data: bytes, count: int) -> list[_Rec]:
    """Locate each record of an uncompressed records section without building objects.

    InvalidRecordError when a length runs past its record or the batch, or the records do not
    fill the section exactly: compaction must not act on misread data.
    """
    out: list[_Rec] = []
    pos, end = 0, len(data)
    try:
        for _ in range(count):
            start = pos
            length, pos = get_varint(data, pos)
            body = pos
            limit = pos + length
            if length <= 0 or limit > end:
                raise InvalidRecordError(f"record length {length} runs past the batch")
            ts_delta, ts_end = get_varint(data, pos + 1)
            offset_delta, pos = get_varint(data, ts_end)
            key_len, pos = get_varint(data, pos)
            key = None
            if key_len >= 0:
                key = data[pos:pos + key_len]
                pos += key_len
            value_len, pos = get_varint(data, pos)
            if pos > limit or (value_len >= 0 and pos + value_len > limit):
                raise InvalidRecordError("record fields run past the record")
            out.append((start, body, ts_end, limit, ts_delta, offset_delta, key, value_len < 0))
            pos = limit
    except IndexError:
        raise InvalidRecordError("records end in the middle of a record") from None
    if pos != end:
        raise InvalidRecordError(f"{end - pos} bytes after the last of {count} records")
    return out


def keyed_offsets(header: BatchHeader, batch: memoryview) -> Iterator[tuple[bytes, int]]:
    """(key, absolute offset) of every record of `batch` that has a key, in offset order:
    what the cleaner's offset map is built from (a later offset of a key replaces an earlier
    one)."""
    base = header.base_offset
    for rec in _parse_records(records_data(header, batch), header.records_count):
        if rec[6] is not None:
            yield rec[6], base + rec[5]


def filter_batch(header: BatchHeader, batch: memoryview, offset_map: dict[bytes, int],
                 now: int, new_horizon: int, counts: FilterCounts,
                 ) -> tuple[bytes | memoryview, int, int, int | None] | None:
    """The batch with only the records to keep: (bytes, last offset, max timestamp, delete
    horizon if it keeps tombstones), `batch` itself if nothing changes, None if empty.

    `new_horizon` is the delete horizon to stamp on a batch that keeps a tombstone for the
    first time; a batch stamped before keeps its own.
    """
    if header.attributes & CONTROL:
        return batch, header.last_offset, header.max_timestamp, None
    data = records_data(header, batch)
    records = _parse_records(data, header.records_count)
    counts.records_read += len(records)
    base = header.base_offset
    had_horizon = bool(header.attributes & DELETE_HORIZON)
    horizon = header.base_timestamp if had_horizon else None
    kept: list[_Rec] = []
    keeps_tombstone = False
    for rec in records:
        key = rec[6]
        if key is None:
            counts.keyless_removed += 1
            continue
        if base + rec[5] < offset_map.get(key, -1):
            counts.superseded += 1
            continue
        if rec[7]:
            if horizon is not None and now >= horizon:
                counts.tombstones_removed += 1
                continue
            keeps_tombstone = True
        kept.append(rec)
    counts.records_kept += len(kept)
    if not kept:
        return None
    if len(kept) == len(records) and keeps_tombstone == had_horizon:
        return batch, header.last_offset, header.max_timestamp, horizon
    old_base_ts = header.base_timestamp
    attributes = header.attributes & ~DELETE_HORIZON
    if keeps_tombstone:
        new_base_ts = horizon if horizon is not None else new_horizon
        attributes |= DELETE_HORIZON
    elif had_horizon:
        new_base_ts = old_base_ts + kept[0][4]  # back to the first record's own timestamp
    else:
        new_base_ts = old_base_ts
    out, last, max_ts = _rebuild(header, data, kept, attributes, new_base_ts)
    return out, last, max_ts, new_base_ts if keeps_tombstone else None


def filter_control_batch(header: BatchHeader, batch: memoryview, removable: bool, now: int,
                         new_horizon: int,
                         ) -> tuple[bytes | memoryview, int, int, int | None] | None:
    """A control batch as `filter_batch` returns a batch: kept as it is unless `removable`
    (no batch of its transaction is left in the log); then stamped with `new_horizon` if it
    has no horizon yet, dropped once `now` has reached the horizon it has (module docstring).
    """
    had_horizon = bool(header.attributes & DELETE_HORIZON)
    horizon = header.base_timestamp if had_horizon else None
    if not removable or had_horizon:
        if horizon is not None and removable and now >= horizon:
            return None
        return batch, header.last_offset, header.max_timestamp, horizon
    data = records_data(header, batch)
    records = _parse_records(data, header.records_count)
    if not records:
        return None
    out, last, max_ts = _rebuild(header, data, records, header.attributes | DELETE_HORIZON,
                                 new_horizon)
    return out, last, max_ts, new_horizon


def _rebuild(header: BatchHeader, data: bytes, kept: list[_Rec], attributes: int,
             new_base_ts: int) -> tuple[bytes, int, int]:
    """The batch holding only `kept` of its records, with `attributes` and baseTimestamp
    `new_base_ts` (every record keeps its own timestamp): (bytes, last offset, max ts)."""
    old_base_ts = header.base_timestamp
    base = header.base_offset
    body = bytearray()
    max_ts = -1
    for start, attrs_pos, ts_end, end, ts_delta, _, _, _ in kept:
        ts = old_base_ts + ts_delta
        if ts > max_ts:
            max_ts = ts
        if new_base_ts == old_base_ts:
            body += data[start:end]
        else:
            rec = bytearray(data[attrs_pos:attrs_pos + 1])
            put_varint(rec, ts - new_base_ts)
            rec += data[ts_end:end]
            put_varint(body, len(rec))
            body += rec
    if header.timestamp_type == LOG_APPEND_TIME:
        max_ts = header.max_timestamp
    codec = header.compression
    payload = body if codec is Compression.NONE else compress(codec, body)
    last_delta = kept[-1][5]
    out = pack_batch(payload, base_offset=base,
                     partition_leader_epoch=header.partition_leader_epoch,
                     attributes=attributes, last_offset_delta=last_delta,
                     base_timestamp=new_base_ts, max_timestamp=max_ts,
                     producer_id=header.producer_id, producer_epoch=header.producer_epoch,
                     base_sequence=header.base_sequence, records_count=len(kept))
    return out, base + last_delta, max_ts
