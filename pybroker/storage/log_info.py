"""What the partition log hands back, and the errors it raises (Kafka's LogAppendInfo,
FetchDataInfo and log exceptions), kept apart so handlers can import them without the log.

Each error maps to one Kafka error code, noted on the class; the handlers do the mapping.
"""
from __future__ import annotations

import sys
from typing import NamedTuple

from protocol.primitives import FileRegion
from protocol.records.batch import InvalidRecordError
from protocol.topic_partition import TopicPartition

__all__ = [
    "AppendInfo", "FetchData", "OffsetOutOfRange", "MessageTooLarge", "UnexpectedAppendOffset",
    "parse_topic_partition", "partition_dir_name", "SegmentRead",
]


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_topic_partition(name: str) -> TopicPartition:
    """Split `<topic>-<partition>` at the last dash (topic names may contain dashes).

    ValueError for anything else, including the `-delete` / `-future` / `-stray` names Kafka
    gives directories that are not live logs.
    """
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"not a partition directory name: {name!r}")
    return sys.intern(topic), int(partition)  # one copy of a topic's name, not one a partition


class OffsetOutOfRange(Exception):
    """A read or DeleteRecords offset outside the log (OFFSET_OUT_OF_RANGE)."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} is outside [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class MessageTooLarge(InvalidRecordError):
    """A batch larger than max.message.bytes (MESSAGE_TOO_LARGE)."""


class UnexpectedAppendOffset(Exception):
    """A replica append whose offsets do not continue the log: the follower must truncate."""


class AppendInfo(NamedTuple):
    """Where an append landed. `duplicate` means nothing was written: these are the offsets
    of the earlier identical idempotent batch. AppendInfo, FetchData and SegmentRead are
    NamedTuples, immutable: one or two are built for every Produce or Fetch, and a frozen
    dataclass's __init__ (an object.__setattr__ call a field) cost ~3x the tuple's."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    num_messages: int
    valid_bytes: int
    duplicate: bool = False


class FetchData(NamedTuple):
    """Whole batches from `first_offset` (-1 when empty) up to, not including, `next_offset`,
    with the log's offsets at the time of the read."""

    # A view or a region only when the reader asked for one (region_min_batch).
    records: bytes | memoryview | FileRegion
    first_offset: int
    next_offset: int
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int


class SegmentRead(NamedTuple):
    """Whole batches read from one segment: `records` starts at file `position`."""

    position: int
    records: bytes | memoryview | FileRegion
    first_offset: int
    next_offset: int
