"""The records of `__transaction_state`, in Kafka's own format, so the topic reads like Kafka's.

Every record is keyed by the transactional id; the value is the transaction's whole state after
a transition (the topic is compacted, so the latest record is the state):

    key v0      TransactionLogKey:   transactional_id string
    value v0    TransactionLogValue: producer_id int64 | producer_epoch int16 |
                timeout_ms int32 | status int8 | partitions [topic string, [int32]] (null when
                Empty) | last_update_timestamp int64 | start_timestamp int64
    value v1    the same, flexible, with tagged fields 0 PreviousProducerId,
                1 NextProducerId, 2 ClientTransactionVersion (KIP-890's transaction.version)
    null value  a tombstone: the transactional id expired

We write value v0, as Kafka does until the `transaction.version` feature is finalised, and we
never advertise it. Reading accepts v0 and v1 (the tagged fields are read and dropped: only
transactions V2 uses them) and newer versions as v1, since KIP-915 these records grow only by
tagged fields. A key version other than 0 decodes to None, so that loading skips it, as Kafka's
`readTxnRecordKey` does.

Declared with the project's message DSL, like the wire messages and `group_records`; the facts
are Kafka's (TransactionLogKey.json, TransactionLogValue.json, TransactionLog.scala), the
declarations ours.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from io import BytesIO
from typing import Iterable

from protocol.records.record import Record
from protocol.schema import Message, Versions, f

__all__ = ["TxnLogValue", "encode_txn_record", "decode_txn_record", "encode_txn_key",
           "encode_txn_value", "decode_txn_value", "group_partitions", "UnknownTxnValueVersion", "KEY_VERSION", "VALUE_VERSION"]

KEY_VERSION = 0
VALUE_VERSION = 0
EMPTY_STATE = 0  # TxnState.EMPTY: its partitions are written as null

_I16 = struct.Struct(">h")

_KEY = Message("TransactionLogKey", -1, Versions.parse("0"), Versions.parse("none"), (
    f("transactional_id", "string"),
))
_VALUE = Message("TransactionLogValue", -1, Versions.parse("0-1"), Versions.parse("1+"), (
    f("producer_id", "int64"),
    f("previous_producer_id", "int64", "1+", tag=0, default=-1),
    f("next_producer_id", "int64", "1+", tag=1, default=-1),
    f("producer_epoch", "int16"),
    f("transaction_timeout_ms", "int32"),
    f("transaction_status", "int8"),
    f("transaction_partitions", [
        f("topic", "string"),
        f("partition_ids", "[]int32"),
    ], nullable="0+"),
    f("transaction_last_update_timestamp_ms", "int64"),
    f("transaction_start_timestamp_ms", "int64"),
    f("client_transaction_version", "int16", "1+", tag=2, default=0),
))


class UnknownTxnValueVersion(ValueError):
    """A negative value version: not a record this broker (or Kafka) ever wrote."""


@dataclass(frozen=True)
class TxnLogValue:
    """One transaction as persisted. `state` is a `txn_state.TxnState` (an int on the wire);
    `partitions` is sorted by topic, each topic's partitions sorted, so equal states compare
    equal and encode to equal bytes."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int
    partitions: tuple[tuple[str, tuple[int, ...]], ...]
    last_update_ms: int
    start_ms: int


def group_partitions(tps: Iterable[tuple[str, int]]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """(topic, partition) pairs as the record's sorted per-topic layout."""
    by_topic: dict[str, set[int]] = {}
    for topic, partition in tps:
        by_topic.setdefault(topic, set()).add(partition)
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(by_topic.items()))


def encode_txn_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _KEY.encode({"transactional_id": transactional_id},
                                                KEY_VERSION)


def encode_txn_value(value: TxnLogValue) -> bytes:
    """Value v0. Empty's partitions are null, as Kafka writes them (an Empty transaction with
    partitions is a bug: ValueError)."""
    if value.state == EMPTY_STATE:
        if value.partitions:
            raise ValueError(f"an Empty transaction has no partitions: {value}")
        partitions = None
    else:
        partitions = [{"topic": t, "partition_ids": list(ps)} for t, ps in value.partitions]
    return _I16.pack(VALUE_VERSION) + _VALUE.encode({
        "producer_id": value.producer_id, "producer_epoch": value.producer_epoch,
        "transaction_timeout_ms": value.timeout_ms, "transaction_status": int(value.state),
        "transaction_partitions": partitions,
        "transaction_last_update_timestamp_ms": value.last_update_ms,
        "transaction_start_timestamp_ms": value.start_ms,
    }, VALUE_VERSION)


def encode_txn_record(transactional_id: str, value: TxnLogValue | None,
                      timestamp: int | None) -> Record:
    """The record to append to __transaction_state; a None value is the id's tombstone."""
    return Record(encode_txn_key(transactional_id),
                  None if value is None else encode_txn_value(value), timestamp=timestamp)


def _split(data: bytes) -> tuple[int, BytesIO]:
    if len(data) < 2:
        raise ValueError("record shorter than its version")
    return _I16.unpack_from(data)[0], BytesIO(data[2:])


def decode_txn_value(data: bytes) -> TxnLogValue:
    version, io = _split(data)
    if version < 0:
        raise UnknownTxnValueVersion(f"TransactionLogValue version {version}")
    assert _VALUE.valid.high is not None
    body = _VALUE.decode(io, min(version, _VALUE.valid.high))
    partitions: tuple[tuple[str, tuple[int, ...]], ...] = ()
    if body.transaction_status != EMPTY_STATE and body.transaction_partitions is not None:
        partitions = group_partitions(
            (p.topic, i) for p in body.transaction_partitions for i in p.partition_ids)
    return TxnLogValue(body.producer_id, body.producer_epoch, body.transaction_timeout_ms,
                       body.transaction_status, partitions,
                       body.transaction_last_update_timestamp_ms,
                       body.transaction_start_timestamp_ms)


def decode_txn_record(key: bytes | None,
                      value: bytes | None) -> tuple[str, TxnLogValue | None] | None:
    """(transactional id, value or None for a tombstone); None for a key this broker does not
    know (skipped when loading). ValueError (or a construct error) for bytes that are not a
    valid record."""
    if key is None:
        return None
    version, io = _split(key)
    if version != KEY_VERSION:
        return None
    transactional_id: str = _KEY.decode(io, version).transactional_id
    return transactional_id, None if value is None else decode_txn_value(value)
