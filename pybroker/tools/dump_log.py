"""kafka-dump-log: print a log segment, offset index or time index, offline.

Kafka's DumpLogSegments over pybroker's files (which are laid out like Kafka's): for a `.log`,
"Dumping <file>", "Log starting offset: N", then a line per batch (`baseOffset: ... position:
... CreateTime: ... size: ... magic: 2 compresscodec: none crc: ... isvalid: true`), and with
`--deep-iteration` or `--print-data-log` a `| offset: ...` line per record (payloads with
`--print-data-log`, as UTF-8 text; a transaction's control record as `endTxnMarker: COMMIT
coordinatorEpoch: N`). `.index` prints `offset: N position: P`, `.timeindex` `timestamp: T
offset: N`, `.txnindex` one line per aborted transaction (`version: 0 producerId: P
firstOffset: F lastOffset: L lastStableOffset: S`, Kafka's 34-byte AbortedTxn entries).
Invalid trailing bytes and index entries that do not match the log are reported on stderr, as
Kafka does.

One difference in checking indexes: pybroker's offset index records each indexed batch by its
*base* offset (Kafka by its last offset), so an entry is checked against the batch's base
offset. Nothing is written; the broker may be running.
"""
from __future__ import annotations

import argparse
import os
import struct
import sys
from pathlib import Path
from typing import Iterator, Sequence

from protocol.records.batch import (
    HEADER_SIZE, LOG_OVERHEAD, MAGIC, MAGIC_V2, MIN_BATCH_LENGTH, BatchHeader, verify_crc,
)
from protocol.records.record import decode_batch, decode_control_record
from pybroker.tools.common import ArgumentParser, ToolError, UsageError, err, out, split_list, \
    tool_main

PROG = "kafka-dump-log"
_INDEX_ENTRY = struct.Struct(">II")
_TIME_ENTRY = struct.Struct(">qI")
# Kafka's AbortedTxn: version, producer id, first offset, last offset, last stable offset.
_ABORTED_TXN = struct.Struct(">hqqqq")
_ABORTED_TXN_VERSION = 0
_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_TS_TYPES = {0: "CreateTime", 1: "LogAppendTime"}
_LEGACY_MIN = 14  # crc, magic, attributes, key and value lengths


def build_parser() -> ArgumentParser:
    p = ArgumentParser(PROG, "This tool helps to parse a log file and dump its contents to the "
                       "console, useful for debugging a seemingly corrupt log segment.")
    p.add_argument("--files", action="append", help="REQUIRED: The comma separated list of "
                   "data and index log files to be dumped.")
    p.add_argument("--print-data-log", action="store_true", help="If set, printing the "
                   "messages content when dumping data logs. Automatically set if any decoder "
                   "option is specified.")
    p.add_argument("--deep-iteration", action="store_true", help="if set, uses deep instead "
                   "of shallow iteration. Automatically set if print-data-log is enabled.")
    p.add_argument("--skip-record-metadata", action="store_true", help="Whether to skip "
                   "printing metadata for each record.")
    p.add_argument("--index-sanity-check", action="store_true", help="if set, just checks the "
                   "index sanity without printing its content.")
    p.add_argument("--verify-index-only", action="store_true", help="if set, just verify the "
                   "index log without printing its content.")
    p.add_argument("--max-bytes", type=int, default=2**31 - 1, help="Limit the amount of total "
                   "batches read in bytes avoiding reading the whole .log file(s).")
    p.add_argument("--max-message-size", type=int, default=5 * 1024 * 1024,
                   help="Size of largest message.")
    for flag in ("key-decoder-class", "value-decoder-class"):
        p.add_argument(f"--{flag}", help=argparse.SUPPRESS)
    for flag in ("offsets-decoder", "transaction-log-decoder", "cluster-metadata-decoder"):
        p.add_argument(f"--{flag}", action="store_true", help=argparse.SUPPRESS)
    return p


def _base_offset(path: Path) -> int:
    try:
        return int(path.name.split(".")[0])
    except ValueError:
        raise ToolError(f"{path} is not named by a base offset (e.g. 00000000000000000000.log)",
                        plain=True) from None


def _text(data: bytes | None) -> str:
    return data.decode("utf-8", "replace") if data is not None else ""


def iter_file_batches(path: Path, limit: int) -> Iterator[tuple[int, bytes]]:
    """(position, bytes) of each whole batch in the first `limit` bytes of a segment.

    Stops at the first torn batch or impossible length; the caller reports what is left as
    invalid trailing bytes. Magic 0/1 entries share the offset-and-size prefix, so they are
    stepped over the same way.
    """
    with open(path, "rb") as f:
        size = min(os.fstat(f.fileno()).st_size, limit)
        pos = 0
        while pos + LOG_OVERHEAD < size:
            f.seek(pos)
            head = f.read(HEADER_SIZE)
            length = struct.unpack_from(">i", head, 8)[0]
            v2 = len(head) > MAGIC and head[MAGIC] == MAGIC_V2
            if length < (MIN_BATCH_LENGTH if v2 else _LEGACY_MIN) or pos + length + LOG_OVERHEAD \
                    > size:
                break
            f.seek(pos)
            yield pos, f.read(length + LOG_OVERHEAD)
            pos += length + LOG_OVERHEAD


def dump_log(path: Path, args: argparse.Namespace) -> None:
    out(f"Log starting offset: {_base_offset(path)}")
    deep = args.deep_iteration or args.print_data_log
    valid = 0
    last_offset = -1
    gaps: list[tuple[int, int]] = []
    total = os.path.getsize(path)
    for pos, data in iter_file_batches(path, args.max_bytes):
        if data[MAGIC] != MAGIC_V2:
            out(f"offset: {struct.unpack_from('>q', data)[0]} position: {pos} magic: "
                f"{data[MAGIC]} (message sets of magic 0/1 are not shown)")
            valid = pos + len(data)
            continue
        h = BatchHeader.unpack_from(data)
        ts_type = _TS_TYPES[h.timestamp_type]
        ok = verify_crc(data, 0, h)
        out(f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
            f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
            f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
            f"partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {str(h.is_transactional).lower()} "
            f"isControl: {str(h.is_control).lower()} deleteHorizonMs: "
            + (f"OptionalLong[{h.base_timestamp}]" if h.attributes & 0x40
               else "OptionalLong.empty")
            + f" position: {pos} {ts_type}: {h.max_timestamp} size: {len(data)} "
            f"magic: {h.magic} compresscodec: {_CODECS.get(h.attributes & 7, 'unknown')} "
            f"crc: {h.crc} isvalid: {str(ok).lower()}")
        valid = pos + len(data)
        if not deep:
            continue
        try:
            records = decode_batch(data)
        except ValueError as exc:
            err(f"Cannot decode the records of the batch at position {pos}: {exc}")
            continue
        for r in records:
            if r.offset != last_offset + 1:
                gaps.append((last_offset, r.offset))
            last_offset = r.offset
            line = ""
            if not args.skip_record_metadata:
                seq = h.base_sequence + (r.offset - h.base_offset) if h.base_sequence >= 0 else -1
                line = (f"| offset: {r.offset} {ts_type}: {r.timestamp} "
                        f"keySize: {-1 if r.key is None else len(r.key)} "
                        f"valueSize: {-1 if r.value is None else len(r.value)} sequence: {seq} "
                        f"headerKeys: [{','.join(k for k, _ in r.headers)}]")
                if h.is_control:
                    try:
                        marker = decode_control_record(r.key, r.value)
                        kind = {0: "ABORT", 1: "COMMIT"}.get(marker.type)
                        line += (f" endTxnMarker: {kind} coordinatorEpoch: "
                                 f"{marker.coordinator_epoch}" if kind else
                                 f" controlType: UNKNOWN({marker.type})")
                    except ValueError:
                        line += " controlType: UNKNOWN"
            if args.print_data_log and not h.is_control:
                prefix = "| " if args.skip_record_metadata else " "
                if r.key is not None:
                    line += f"{prefix}key: {_text(r.key)}"
                    prefix = " "
                if r.value is not None:
                    line += f"{prefix}payload: {_text(r.value)}"
            out(line)
    trailing = total - valid
    if trailing > 0 and args.max_bytes >= 2**31 - 1:
        out(f"Found {trailing} invalid bytes at the end of {path.name}")
    if gaps:
        err(f"Non-consecutive offsets in {path.resolve()}")
        for before, after in gaps:
            err(f"  {before} is followed by {after}")


def _batch_at(log: Path, position: int) -> BatchHeader | None:
    try:
        with open(log, "rb") as f:
            f.seek(position)
            head = f.read(HEADER_SIZE)
    except OSError:
        return None
    if len(head) < HEADER_SIZE or head[MAGIC] != MAGIC_V2:
        return None
    return BatchHeader.unpack_from(head)


def dump_index(path: Path, args: argparse.Namespace) -> None:
    base = _base_offset(path)
    data = path.read_bytes()
    usable = len(data) - len(data) % _INDEX_ENTRY.size
    entries = [_INDEX_ENTRY.unpack_from(data, i) for i in range(0, usable, _INDEX_ENTRY.size)]
    if not entries:
        out(f"{path} is empty.")
        return
    if args.index_sanity_check:
        if len(data) % _INDEX_ENTRY.size:
            raise ToolError(f"Index file {path.name} is corrupt, found {len(data)} bytes which "
                            f"is neither positive nor a multiple of {_INDEX_ENTRY.size}.",
                            plain=True)
        out(f"{path} passed sanity check.")
        return
    log = path.with_suffix(".log")
    mismatches: list[tuple[int, int]] = []
    for i, (relative, position) in enumerate(entries):
        offset = base + relative
        if i > 0 and relative == 0:
            break  # the zero-filled tail of a preallocated (Kafka) index
        batch = _batch_at(log, position)
        if batch is None or batch.base_offset != offset:
            mismatches.append((offset, batch.base_offset if batch is not None else -1))
        if not args.verify_index_only:
            out(f"offset: {offset} position: {position}")
    if mismatches:
        err(f"Mismatches in :{path.resolve()}")
        for index_offset, log_offset in mismatches:
            err(f"  Index offset: {index_offset}, log offset: {log_offset}")


def dump_time_index(path: Path, args: argparse.Namespace) -> None:
    base = _base_offset(path)
    data = path.read_bytes()
    usable = len(data) - len(data) % _TIME_ENTRY.size
    entries = [_TIME_ENTRY.unpack_from(data, i) for i in range(0, usable, _TIME_ENTRY.size)]
    if args.index_sanity_check:
        if len(data) % _TIME_ENTRY.size:
            raise ToolError(f"Time index file {path.name} is corrupt, found {len(data)} bytes "
                            f"which is neither positive nor a multiple of {_TIME_ENTRY.size}.",
                            plain=True)
        out(f"{path} passed sanity check.")
        return
    previous = -1
    out_of_order: list[tuple[int, int]] = []
    for i, (timestamp, relative) in enumerate(entries):
        if i > 0 and relative == 0 and timestamp == 0:
            break
        if timestamp <= previous:
            out_of_order.append((timestamp, previous))
        previous = timestamp
        if not args.verify_index_only:
            out(f"timestamp: {timestamp} offset: {base + relative}")
    if out_of_order:
        err(f"Found out of order timestamp in :{path.resolve()}")
        for timestamp, before in out_of_order:
            err(f"  Index timestamp: {timestamp}, Previously indexed timestamp: {before}")


def dump_txn_index(path: Path, args: argparse.Namespace) -> None:
    """Each aborted transaction; a torn last entry is left out, as Kafka's reader stops before
    an incomplete one, and an entry of a newer version stops the dump, as in Kafka."""
    data = path.read_bytes()
    for at in range(0, len(data) - _ABORTED_TXN.size + 1, _ABORTED_TXN.size):
        version, producer_id, first, last, lso = _ABORTED_TXN.unpack_from(data, at)
        if version > _ABORTED_TXN_VERSION:
            raise ToolError(f"Unexpected aborted transaction version {version} in transaction "
                            f"index {path.resolve()}, current version is "
                            f"{_ABORTED_TXN_VERSION}", plain=True)
        out(f"version: {version} producerId: {producer_id} firstOffset: {first} "
            f"lastOffset: {last} lastStableOffset: {lso}")


def check_args(args: argparse.Namespace) -> None:
    """`--files ,` names no file: as missing as no --files at all."""
    if not split_list(args.files):
        raise UsageError('Missing required argument "[files]"')


def _dump_files(args: argparse.Namespace) -> int:
    status = 0
    for name in split_list(args.files):
        path = Path(name)
        out(f"Dumping {path}")
        try:
            if not path.is_file():
                raise ToolError(f"{path} does not exist or is not a file", plain=True)
            suffix = path.suffix
            if suffix == ".log":
                dump_log(path, args)
            elif suffix == ".index":
                dump_index(path, args)
            elif suffix == ".timeindex":
                dump_time_index(path, args)
            elif suffix == ".txnindex":
                dump_txn_index(path, args)
            else:
                err(f"Ignoring unknown file {path}")
        except ToolError as exc:
            err(str(exc))
            status = 1
        except OSError as exc:
            err(f"Cannot read {path}: {exc.strerror or exc}")
            status = 1
        except BrokenPipeError:
            return 1
    sys.stdout.flush()
    return status


def main(argv: Sequence[str] | None = None) -> int:
    return tool_main(build_parser(), argv, _dump_files, check=check_args)


if __name__ == "__main__":
    sys.exit(main())
