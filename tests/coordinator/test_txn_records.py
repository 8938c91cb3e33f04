"""__transaction_state records: Kafka's byte layouts (v0 written, v0 and v1 read), tombstones,
unknown keys, and round trips."""
from __future__ import annotations

import struct

import pytest
from construct import ConstructError
from hypothesis import given, settings, strategies as st

from pybroker.coordinator.txn_records import (
    TxnLogValue, UnknownTxnValueVersion, decode_txn_record, encode_txn_record,
)
from pybroker.coordinator.txn_state import TxnState


def _str(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def _uvarint(n: int) -> bytes:
    out = b""
    while n >= 0x80:
        out += bytes([n & 0x7F | 0x80])
        n >>= 7
    return out + bytes([n])


def _cstr(s: str) -> bytes:
    return _uvarint(len(s) + 1) + s.encode()


ONGOING = TxnLogValue(1234, 5, 60_000, TxnState.ONGOING, (("orders", (0, 3)), ("pay", (1,))),
                      1_700_000_002_000, 1_700_000_001_000)
ONGOING_V0 = (struct.pack(">hqhib", 0, 1234, 5, 60_000, 1)
              + struct.pack(">i", 2)
              + _str("orders") + struct.pack(">iii", 2, 0, 3)
              + _str("pay") + struct.pack(">ii", 1, 1)
              + struct.pack(">qq", 1_700_000_002_000, 1_700_000_001_000))


def test_key_is_version_0_and_the_id() -> None:
    record = encode_txn_record("my-txn", ONGOING, 99)
    assert record.key == struct.pack(">h", 0) + _str("my-txn")
    assert record.timestamp == 99


def test_value_v0_bytes() -> None:
    assert encode_txn_record("t", ONGOING, None).value == ONGOING_V0


def test_empty_writes_null_partitions() -> None:
    value = TxnLogValue(7, 0, 1000, TxnState.EMPTY, (), 55, -1)
    assert encode_txn_record("t", value, None).value == \
        struct.pack(">hqhibiqq", 0, 7, 0, 1000, 0, -1, 55, -1)
    with pytest.raises(ValueError):
        encode_txn_record("t", TxnLogValue(7, 0, 1000, TxnState.EMPTY, (("a", (0,)),), 55, -1),
                          None)


def test_complete_writes_an_empty_array() -> None:
    value = TxnLogValue(7, 2, 1000, TxnState.COMPLETE_COMMIT, (), 55, 40)
    assert encode_txn_record("t", value, None).value == \
        struct.pack(">hqhibiqq", 0, 7, 2, 1000, 4, 0, 55, 40)


def test_tombstone() -> None:
    record = encode_txn_record("gone", None, 5)
    assert record.value is None
    assert decode_txn_record(record.key, record.value) == ("gone", None)


def test_decode_v0() -> None:
    key = struct.pack(">h", 0) + _str("t")
    assert decode_txn_record(key, ONGOING_V0) == ("t", ONGOING)


def test_decode_sorts_and_groups_partitions() -> None:
    """Kafka groups a topic's partitions in no particular order (and may repeat a topic)."""
    value = (struct.pack(">hqhib", 0, 1, 0, 1000, 2) + struct.pack(">i", 3)
             + _str("b") + struct.pack(">ii", 1, 4)
             + _str("a") + struct.pack(">iii", 2, 9, 2)
             + _str("b") + struct.pack(">ii", 1, 0)
             + struct.pack(">qq", 10, 5))
    decoded = decode_txn_record(struct.pack(">h", 0) + _str("t"), value)
    assert decoded is not None and decoded[1] is not None
    assert decoded[1].partitions == (("a", (2, 9)), ("b", (0, 4)))


def test_decode_v1_flexible_ignores_tagged_fields() -> None:
    value = (struct.pack(">hqhib", 1, 1234, 5, 60_000, 1)
             + _uvarint(3)
             + _cstr("orders") + _uvarint(3) + struct.pack(">ii", 0, 3) + _uvarint(0)
             + _cstr("pay") + _uvarint(2) + struct.pack(">i", 1) + _uvarint(0)
             + struct.pack(">qq", 1_700_000_002_000, 1_700_000_001_000)
             + _uvarint(4)                                   # tagged fields
             + _uvarint(0) + _uvarint(8) + struct.pack(">q", 1233)  # PreviousProducerId
             + _uvarint(1) + _uvarint(8) + struct.pack(">q", 1300)  # NextProducerId
             + _uvarint(2) + _uvarint(2) + struct.pack(">h", 2)     # ClientTransactionVersion
             + _uvarint(9) + _uvarint(3) + b"new")                  # a tag from the future
    key = struct.pack(">h", 0) + _str("t")
    assert decode_txn_record(key, value) == ("t", ONGOING)
    newer = struct.pack(">h", 2) + value[2:]  # KIP-915: newer versions only add tags
    assert decode_txn_record(key, newer) == ("t", ONGOING)


def test_unknown_keys_are_skipped_and_bad_values_fail() -> None:
    assert decode_txn_record(None, ONGOING_V0) is None
    assert decode_txn_record(struct.pack(">h", 1) + _str("t"), ONGOING_V0) is None
    key = struct.pack(">h", 0) + _str("t")
    with pytest.raises(UnknownTxnValueVersion):
        decode_txn_record(key, struct.pack(">h", -1) + ONGOING_V0[2:])
    with pytest.raises(ValueError):
        decode_txn_record(key, b"\x00")
    for bad in (ONGOING_V0[:-3], ONGOING_V0 + b"x"):  # truncated, trailing bytes
        with pytest.raises(ConstructError):
            decode_txn_record(key, bad)


VALUES = st.builds(
    lambda pid, epoch, timeout, state, parts, update, start: TxnLogValue(
        pid, epoch, timeout, state,
        () if state is TxnState.EMPTY else tuple(
            (t, tuple(sorted(ps))) for t, ps in sorted(parts.items()) if ps),
        update, -1 if state is TxnState.EMPTY else start),
    st.integers(0, 2**63 - 1), st.integers(0, 32767), st.integers(1, 2**31 - 1),
    st.sampled_from(list(TxnState)),
    st.dictionaries(st.text(min_size=1, max_size=8), st.sets(st.integers(0, 2**31 - 1),
                                                           max_size=3), max_size=3),
    st.integers(0, 2**62), st.integers(0, 2**62))


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=20), VALUES)
def test_round_trip(transactional_id: str, value: TxnLogValue) -> None:
    record = encode_txn_record(transactional_id, value, 0)
    assert decode_txn_record(record.key, record.value) == (transactional_id, value)
