"""What a producer's records must be before they are appended (Kafka's LogValidator).

The checks run in the order Kafka's run, cheapest first, so the common case — one valid batch
in the producer's own codec on a topic without timestamp limits — costs a CRC check in C and a
few comparisons: records are decoded only when the topic asks for it (compacted topics need
keys, timestamp limits need every timestamp, a `compression.type` other than `producer`
rebuilds the batch in the topic's codec). A failure is a `Rejected` carrying the Kafka error
code, message and per-record errors the Produce response reports; nothing is written then.
`error_code` maps the storage and record exceptions to the same codes in one place.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from protocol.errors import ErrorCode
from protocol.records.batch import BatchHeader, Compression, validate_batches
from protocol.records.record import iter_records_in, recompress_batch
from protocol.records.types import CorruptRecordError, InvalidRecordError, RecordError
from pybroker.config import TopicConfig
from pybroker.config.definitions import INT64_MAX
from pybroker.storage.producer_state import (
    InvalidProducerEpoch, InvalidTxnState, OutOfOrderSequence, TransactionCoordinatorFenced,
)

__all__ = ["Rejected", "Validated", "validate_records", "error_code"]

_ERROR_CODES: dict[type[Exception], ErrorCode] = {
    CorruptRecordError: ErrorCode.CORRUPT_MESSAGE,
    InvalidRecordError: ErrorCode.INVALID_RECORD,
    OutOfOrderSequence: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    InvalidProducerEpoch: ErrorCode.INVALID_PRODUCER_EPOCH,
    InvalidTxnState: ErrorCode.INVALID_TXN_STATE,
    TransactionCoordinatorFenced: ErrorCode.TRANSACTION_COORDINATOR_FENCED,
}


def error_code(exc: Exception) -> ErrorCode:
    """The Kafka error for a record, batch or producer-state exception."""
    for kind, code in _ERROR_CODES.items():
        if isinstance(exc, kind):
            return code
    return ErrorCode.INVALID_RECORD if isinstance(exc, RecordError) else \
        ErrorCode.UNKNOWN_SERVER_ERROR


class Rejected(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None,
                 record_errors: list[tuple[int, str]] | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message
        self.record_errors = record_errors or []


@dataclass
class Validated:
    """The records to append (rebuilt when the topic's codec differs) and their batches'
    offsets and headers, so the log does not check the CRCs again."""

    records: bytes | bytearray
    batches: list[tuple[int, BatchHeader]] = field(default_factory=list)


def validate_records(records: bytes | bytearray | None, tconfig: TopicConfig, *,
                     produce_version: int, internal: bool, now_ms: int) -> Validated:
    """The checks of one partition's records from Produce (or, `internal`, from the broker's
    own coordinators, which may write several batches and control records). Raises Rejected."""
    if not records:
        raise Rejected(ErrorCode.INVALID_RECORD, "No records in the request")
    if len(records) > tconfig.max_message_bytes:
        raise Rejected(ErrorCode.MESSAGE_TOO_LARGE, (
            f"The request included a message larger than the max message size the server "
            f"will accept ({tconfig.max_message_bytes})"))
    try:
        batches = validate_batches(records)
    except RecordError as exc:
        raise Rejected(error_code(exc), str(exc)) from None
    if internal:
        return Validated(records, batches)
    if len(batches) != 1:
        raise Rejected(ErrorCode.INVALID_RECORD,
                       "Produce requests must carry exactly one record batch per partition")
    header = batches[0][1]
    if header.compression == Compression.ZSTD and produce_version < 7:
        raise Rejected(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
    if header.is_control:
        raise Rejected(ErrorCode.INVALID_RECORD, "Clients may not write control records")
    if header.has_producer_id and header.base_sequence < 0:
        # Only the broker's own batches go without a sequence (its producer-state checks
        # skip the sequence of those); a client's must number its batches (Kafka's rule).
        raise Rejected(ErrorCode.INVALID_RECORD,
                       f"Invalid sequence number {header.base_sequence} in a batch of "
                       f"producer {header.producer_id}")
    # Transactional batches are served; whether the partition is in the producer's
    # transaction is checked above storage, and the producer-state rules by the log.
    if tconfig.compact and any(r.key is None for r in iter_records_in(records)):
        # Compacted topics keep the newest record per key, so every record needs a key.
        raise Rejected(ErrorCode.INVALID_RECORD,
                       "Compacted topic cannot accept message without key")
    codec = tconfig.stored_compression
    if codec is not None and header.compression != codec:
        # compression.type names a codec the producer did not use: rebuild the batch with it,
        # records decoded and encoded again (Kafka's LogValidator does the same).
        try:
            records = recompress_batch(records, codec)
        except RecordError as exc:
            raise Rejected(error_code(exc), str(exc)) from None
        batches = [(0, BatchHeader.unpack_from(records, 0))]  # built here: nothing to check
    if not tconfig.log_append_time and _may_be_out_of_range(header, now_ms, tconfig):
        bad = _out_of_range_timestamps(records, now_ms,
                                       tconfig.message_timestamp_before_max_ms,
                                       tconfig.message_timestamp_after_max_ms)
        if bad:
            raise Rejected(ErrorCode.INVALID_TIMESTAMP,
                           "One or more records have been rejected due to invalid timestamp",
                           bad)
    return Validated(records, batches)


def _may_be_out_of_range(header: BatchHeader, now: int, tconfig: TopicConfig) -> bool:
    """Whether the records must be decoded to check their timestamps. after.max.ms has a
    finite default (1 h, as Kafka 4's KIP-937), so every batch meets it: the header's max
    timestamp settles the common case without decoding; before.max.ms (unbounded by
    default) needs each record's timestamp only when set."""
    if tconfig.message_timestamp_before_max_ms < INT64_MAX:
        return True
    return (tconfig.message_timestamp_after_max_ms < INT64_MAX
            and header.max_timestamp > now + tconfig.message_timestamp_after_max_ms)


def _out_of_range_timestamps(records: bytes | bytearray, now: int, before_max_ms: int,
                             after_max_ms: int) -> list[tuple[int, str]]:
    """message.timestamp.before.max.ms / after.max.ms on a CreateTime topic: (index in the
    batch, message) for each record stamped outside [now - before, now + after], in Kafka's
    words. Records without a timestamp (-1) pass, as in Kafka."""
    low, high = now - before_max_ms, now + after_max_ms
    return [(index, f"Timestamp {record.timestamp} of message with offset {record.offset} is "
                    f"out of range. The timestamp should be within [{low}, {high}]")
            for index, record in enumerate(iter_records_in(records))
            if record.timestamp != -1 and not low <= record.timestamp <= high]
