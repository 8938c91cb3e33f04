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
from protocol.records.batch import (
    LOG_APPEND_TIME, NO_TIMESTAMP, BatchHeader, Compression, validate_batches,
)
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
                     produce_version: int, internal: bool, now_ms: int,
                     topic_partition: tuple[str, int] = ("", -1)) -> Validated:
    """The checks of one partition's records from Produce (or, `internal`, from the broker's
    own coordinators, which may write several batches and control records). Raises Rejected.
    `topic_partition` is named in per-record messages, as in Kafka's (a tuple, so the hot
    path formats nothing)."""
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
    check_times = not tconfig.log_append_time and _may_be_out_of_range(header, now_ms, tconfig)
    # A producer may not stamp its batch LogAppendTime: refused record by record where a
    # record's timestamp is not range-checked instead (a LogAppendTime topic, or a record
    # without a timestamp), as Kafka's validateTimestamp. The header says it: no decoding.
    stamped = header.timestamp_type == LOG_APPEND_TIME and (
        tconfig.log_append_time or header.max_timestamp == NO_TIMESTAMP)
    if tconfig.compact or check_times or stamped:
        _raise_record_errors(_record_errors(records, tconfig, now_ms, check_times,
                                            header.timestamp_type == LOG_APPEND_TIME,
                                            topic_partition))
    codec = tconfig.stored_compression
    if codec is not None and header.compression != codec:
        # compression.type names a codec the producer did not use: rebuild the batch with it,
        # records decoded and encoded again (Kafka's LogValidator does the same).
        try:
            records = recompress_batch(records, codec)
        except RecordError as exc:
            raise Rejected(error_code(exc), str(exc)) from None
        batches = [(0, BatchHeader.unpack_from(records, 0))]  # built here: nothing to check
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


@dataclass(frozen=True)
class _RecordErrors:
    """What one walk over the batch's records found: (index in the batch, message) of each
    bad record, and whether any of them is a timestamp's (which decides the batch's code)."""

    errors: list[tuple[int, str]]
    any_timestamp: bool


def _record_errors(records: bytes | bytearray, tconfig: TopicConfig, now: int,
                   check_times: bool, stamped_append_time: bool,
                   topic_partition: tuple[str, int]) -> _RecordErrors:
    """Kafka's per-record checks (KIP-467), one decode of the batch: on a compacted topic a
    record without a key (compaction keeps the newest record per key, so every record needs
    one); with `check_times`, message.timestamp.before.max.ms / after.max.ms on a CreateTime
    topic — a record stamped outside [now - before, now + after] (records without a timestamp,
    -1, pass); in a batch its producer stamped LogAppendTime (`stamped_append_time`, whose
    records read the batch's max timestamp), each record not range-checked. A keyless record
    is reported for its key alone, as in Kafka."""
    compact = tconfig.compact
    low = now - tconfig.message_timestamp_before_max_ms
    high = now + tconfig.message_timestamp_after_max_ms
    errors: list[tuple[int, str]] = []
    any_timestamp = False
    for index, record in enumerate(iter_records_in(records)):
        if compact and record.key is None:
            errors.append((index, "Compacted topic cannot accept message without key in "
                                  f"topic partition {topic_partition[0]}-{topic_partition[1]}"))
        elif not tconfig.log_append_time and record.timestamp != NO_TIMESTAMP:
            if check_times and not low <= record.timestamp <= high:
                any_timestamp = True
                errors.append((index, f"Timestamp {record.timestamp} of message with offset "
                                      f"{record.offset} is out of range. The timestamp should "
                                      f"be within [{low}, {high}]"))
        elif stamped_append_time:
            any_timestamp = True
            errors.append((index, (
                f"Invalid timestamp type in message DefaultRecord(offset={record.offset}, "
                f"timestamp={record.timestamp}, key={len(record.key or b'')} bytes, "
                f"value={len(record.value or b'')} bytes). Producer should not set timestamp "
                f"type to LogAppendTime.")))
    return _RecordErrors(errors, any_timestamp)


def _raise_record_errors(found: _RecordErrors) -> None:
    """The whole batch is refused when any record is bad (nothing is appended), naming each
    bad record: INVALID_TIMESTAMP if a timestamp is among them, INVALID_RECORD otherwise, with
    Kafka's messages (its RecordValidationException)."""
    errors = found.errors
    if not errors:
        return
    if found.any_timestamp:
        raise Rejected(ErrorCode.INVALID_TIMESTAMP,
                       "One or more records have been rejected due to invalid timestamp",
                       errors)
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{why}')" for i, why in errors[:3])
    raise Rejected(ErrorCode.INVALID_RECORD,
                   f"One or more records have been rejected due to {len(errors)} record errors "
                   f"in total, and only showing the first three errors at most: [{shown}]",
                   errors)
