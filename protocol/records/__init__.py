"""Kafka record data: v2 batches on the hot path, records, codecs and legacy message sets.

`batch` is what the broker uses on Produce, Fetch and recovery (headers, CRC32C, in-place
patches; batches stay opaque bytes). `record`, `compression` and `legacy` serve the tools,
tests, compaction and the broker's own control and internal records; `record_filter` is
compaction's record-level rewrite of a batch.
"""
from protocol.records.batch import (
    HEADER, HEADER_SIZE, LOG_OVERHEAD, MAGIC_V2, MIN_BATCH_LENGTH, BatchHeader, Compression,
    CorruptRecordError, InvalidRecordError, RecordError, UnsupportedCompressionError,
    compute_crc, iter_batches, set_base_offset, set_log_append_time,
    set_partition_leader_epoch, validate_batches, verify_crc, walk_batches,
)
from protocol.records.compression import compress, decompress
from protocol.records.legacy import decode_message_set, upconvert
from protocol.records.record import (
    ControlRecord, ControlType, DecodedRecord, Record, build_batch, build_control_batch,
    decode_batch, decode_control_record, decode_records, encode_records, iter_records_in,
)

__all__ = [
    "HEADER", "HEADER_SIZE", "LOG_OVERHEAD", "MAGIC_V2", "MIN_BATCH_LENGTH",
    "BatchHeader", "Compression",
    "RecordError", "InvalidRecordError", "CorruptRecordError", "UnsupportedCompressionError",
    "iter_batches", "walk_batches", "validate_batches", "compute_crc", "verify_crc",
    "set_base_offset", "set_partition_leader_epoch", "set_log_append_time", "build_batch",
    "compress", "decompress",
    "Record", "DecodedRecord", "encode_records", "decode_records", "decode_batch",
    "iter_records_in", "ControlType", "ControlRecord", "build_control_batch",
    "decode_control_record",
    "decode_message_set", "upconvert",
]
