"""Appending to and reading from the partitions this broker hosts (Kafka's ReplicaManager).

Handlers translate requests; this module holds the rules shared by Produce, Fetch, ListOffsets
and the internal topics: who may write where, what a batch must look like, what a reader may
see (up to the high watermark for consumers, the last stable offset under read_committed, the
log end for replicas). Records stay raw bytes: only the 61-byte batch headers are read.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from protocol.errors import ErrorCode
from protocol.messages.fetch import READ_COMMITTED
from protocol.messages.list_offsets import (
    EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, LATEST_TIERED_TIMESTAMP, LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
)
from protocol.primitives import FileRegion
from protocol.records.batch import (
    BatchHeader, Compression, CorruptRecordError, InvalidRecordError, validate_batches,
)
from protocol.records.record import iter_records_in, recompress_batch
from pybroker.config.definitions import INT64_MAX
from pybroker.storage.partition_log import OffsetOutOfRange, PartitionLog
from pybroker.storage.producer_state import InvalidProducerEpoch, OutOfOrderSequence

if TYPE_CHECKING:
    from pybroker.broker import Broker

log = logging.getLogger(__name__)



# Checks of a producer's records that need them decoded; each runs only when its topic asks
# for it, after the append path has made sure there is exactly one batch.

def _check_compacted_keys(records: bytes) -> str | None:
    """Compacted topics keep the newest record per key, so every record needs a key."""
    if any(record.key is None for record in iter_records_in(records)):
        return "Compacted topic cannot accept message without key"
    return None


def _check_timestamps(records: bytes, now: int, before_max_ms: int,
                      after_max_ms: int) -> list[tuple[int, str]]:
    """message.timestamp.before.max.ms / after.max.ms on a CreateTime topic: (index in the
    batch, message) for each record stamped outside [now - before, now + after], in Kafka's
    words. Records without a timestamp (-1) pass, as in Kafka."""
    low, high = now - before_max_ms, now + after_max_ms
    return [(index, f"Timestamp {record.timestamp} of message with offset {record.offset} is "
                    f"out of range. The timestamp should be within [{low}, {high}]")
            for index, record in enumerate(iter_records_in(records))
            if record.timestamp != -1 and not low <= record.timestamp <= high]


@dataclass
class AppendResult:
    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    record_errors: list[tuple[int, str]] = field(default_factory=list)  # (batch index, why)


@dataclass
class ReadResult:
    error: ErrorCode
    records: bytes | FileRegion = b""
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1


class ReplicaManager:
    def __init__(self, broker: "Broker") -> None:
        self.broker = broker

    def leader_log(self, topic: str, partition: int) -> tuple[ErrorCode, PartitionLog | None]:
        """This broker's log of a partition it leads, or why not (UNKNOWN_TOPIC_OR_PARTITION,
        NOT_LEADER_OR_FOLLOWER): the check every request addressed to a leader starts with."""
        image = self.broker.metadata.image
        state = image.partition(topic, partition)
        if state is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        if state.leader != self.broker.node_id:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        plog = self.broker.partition_log(topic, partition)
        if plog is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        return ErrorCode.NONE, plog

    def append(self, topic: str, partition: int, records: bytes | None, *,
               produce_version: int = 11, internal: bool = False,
               acks: int = 1) -> AppendResult:
        """Validate and append one partition's records as the leader."""
        code, plog = self.leader_log(topic, partition)
        if plog is None:
            return AppendResult(code)
        if acks == -1:
            isr = self.broker.metadata.image.partition(topic, partition).isr
            min_isr = self.broker.topic_config(topic).min_insync_replicas
            if len(isr) < min_isr:  # as Kafka: nothing is written
                return AppendResult(ErrorCode.NOT_ENOUGH_REPLICAS, message=(
                    f"The size of the current ISR Set({', '.join(map(str, isr))}) is "
                    f"insufficient to satisfy the min.isr requirement of {min_isr} for "
                    f"partition {topic}-{partition}"))
        if not internal and topic.startswith("__") and self.broker.is_internal_topic(topic):
            return AppendResult(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                message=f"Cannot append to internal topic {topic}")
        if not records:
            return AppendResult(ErrorCode.INVALID_RECORD, message="No records in the request")
        tconfig = self.broker.topic_config(topic)
        if len(records) > tconfig.max_message_bytes:
            return AppendResult(
                ErrorCode.MESSAGE_TOO_LARGE,
                message=f"The request included a message larger than the max message size the "
                        f"server will accept ({tconfig.max_message_bytes})")
        try:
            batches = validate_batches(records)
        except CorruptRecordError as exc:
            return AppendResult(ErrorCode.CORRUPT_MESSAGE, message=str(exc))
        except InvalidRecordError as exc:
            return AppendResult(ErrorCode.INVALID_RECORD, message=str(exc))
        if not internal:
            if len(batches) != 1:
                return AppendResult(ErrorCode.INVALID_RECORD, message=(
                    "Produce requests must carry exactly one record batch per partition"))
            header = batches[0][1]
            if header.compression == Compression.ZSTD and produce_version < 7:
                return AppendResult(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
            if header.is_control:
                return AppendResult(ErrorCode.INVALID_RECORD,
                                    message="Clients may not write control records")
            if header.is_transactional:
                return AppendResult(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                    message="Transactions are not supported by this broker yet")
        if tconfig.compact and not internal:
            error = _check_compacted_keys(records)
            if error is not None:
                return AppendResult(ErrorCode.INVALID_RECORD, message=error)
        codec = tconfig.stored_compression
        if not internal and codec is not None and batches[0][1].compression != codec:
            # compression.type names a codec the producer did not use: rebuild the batch with
            # it, records decoded and encoded again (Kafka's LogValidator does the same).
            try:
                records = recompress_batch(records, codec)
            except CorruptRecordError as exc:
                return AppendResult(ErrorCode.CORRUPT_MESSAGE, message=str(exc))
            except InvalidRecordError as exc:
                return AppendResult(ErrorCode.INVALID_RECORD, message=str(exc))
            batches = [(0, BatchHeader.unpack_from(records, 0))]  # built here: nothing to check
        if not internal and not tconfig.log_append_time and (
                tconfig.message_timestamp_before_max_ms < INT64_MAX
                or tconfig.message_timestamp_after_max_ms < INT64_MAX):
            # Only when limits are set: checking them means decoding every record.
            bad = _check_timestamps(
                records, int(time.time() * 1000), tconfig.message_timestamp_before_max_ms,
                tconfig.message_timestamp_after_max_ms)
            if bad:
                return AppendResult(
                    ErrorCode.INVALID_TIMESTAMP, record_errors=bad,
                    message="One or more records have been rejected due to invalid timestamp")
        append_time = int(time.time() * 1000) if tconfig.log_append_time else None
        try:
            info = plog.append(records, leader_epoch=self.broker.leader_epoch(topic, partition),
                               log_append_time=append_time, batches=batches)
        except OutOfOrderSequence as exc:
            return AppendResult(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, message=str(exc))
        except InvalidProducerEpoch as exc:
            return AppendResult(ErrorCode.INVALID_PRODUCER_EPOCH, message=str(exc))
        except CorruptRecordError as exc:
            return AppendResult(ErrorCode.CORRUPT_MESSAGE, message=str(exc))
        except InvalidRecordError as exc:
            return AppendResult(ErrorCode.INVALID_RECORD, message=str(exc))
        # One broker: a write is "replicated" once it is in the log (flushed as configured).
        plog.update_high_watermark(plog.log_end_offset)
        self.broker.purgatory.notify((topic, partition))
        return AppendResult(ErrorCode.NONE, info.first_offset,
                            append_time if append_time is not None else -1,
                            plog.log_start_offset)

    def read(self, topic: str, partition: int, offset: int, max_bytes: int, *,
             replica: bool = False, isolation_level: int = 0,
             min_one_message: bool = True, region_min_batch: int = 0) -> ReadResult:
        """`region_min_batch`: see `PartitionLog.read` (records as a FileRegion for sendfile
        when they start with a batch at least that large)."""
        code, plog = self.leader_log(topic, partition)
        if plog is None:
            return ReadResult(code)
        if replica:
            upper = plog.log_end_offset
        elif isolation_level == READ_COMMITTED:
            upper = plog.last_stable_offset
        else:
            upper = plog.high_watermark
        try:
            data = plog.read(offset, max_bytes, max_offset=upper,
                             min_one_message=min_one_message,
                             region_min_batch=region_min_batch)
        except OffsetOutOfRange:
            return ReadResult(ErrorCode.OFFSET_OUT_OF_RANGE, b"", plog.high_watermark,
                              plog.last_stable_offset, plog.log_start_offset)
        return ReadResult(ErrorCode.NONE, data.records, plog.high_watermark,
                          plog.last_stable_offset, plog.log_start_offset)

    def list_offset(self, topic: str, partition: int, timestamp: int,
                    isolation_level: int) -> tuple[ErrorCode, int, int, int]:
        """(error, offset, timestamp, leader epoch) as ListOffsets reports them."""
        code, plog = self.leader_log(topic, partition)
        if plog is None:
            return code, -1, -1, -1
        epoch = self.broker.leader_epoch(topic, partition)
        # No tiered storage: the local log start is the log start, and nothing is tiered.
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return ErrorCode.NONE, plog.log_start_offset, -1, epoch
        if timestamp == LATEST_TIERED_TIMESTAMP:
            return ErrorCode.NONE, -1, -1, -1
        if timestamp == LATEST_TIMESTAMP:
            upper = (plog.last_stable_offset if isolation_level == READ_COMMITTED
                     else plog.high_watermark)
            return ErrorCode.NONE, upper, -1, epoch
        if timestamp == MAX_TIMESTAMP:
            found = plog.offset_of_max_timestamp()
        elif timestamp < 0:
            return ErrorCode.INVALID_REQUEST, -1, -1, -1
        else:
            found = plog.offset_for_timestamp(timestamp)
        if found is None:
            return ErrorCode.NONE, -1, -1, -1
        offset, ts = found
        return ErrorCode.NONE, offset, ts, epoch
