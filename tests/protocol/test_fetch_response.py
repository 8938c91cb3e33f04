"""The hand-written Fetch response encoder gives the schema's bytes, for every version the
broker serves, and never copies a record set: each is a part of its own, the same object."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import schema
from protocol.codec import encode_response_parts
from protocol.fetch_response import MAX_VERSION, MIN_VERSION, encode_fetch_parts
from protocol.messages import APIS
from protocol.primitives import FileRegion

FETCH = APIS[1]
VERSIONS = range(MIN_VERSION, MAX_VERSION + 1)

i16 = st.integers(-2**15, 2**15 - 1)
i32 = st.integers(-2**31, 2**31 - 1)
i64 = st.integers(-2**63, 2**63 - 1)
records = st.none() | st.binary(max_size=300) | st.binary(min_size=4096, max_size=5000) \
    | st.binary(max_size=64).map(memoryview) | st.binary(max_size=64).map(bytearray)
aborted = st.none() | st.lists(st.fixed_dictionaries({"producer_id": i64, "first_offset": i64}),
                               max_size=3)
# A tagged struct: absent, None, all defaults (not written) or not.
diverging = st.none() | st.just({"epoch": -1, "end_offset": -1}) | st.fixed_dictionaries(
    {"epoch": i32, "end_offset": i64})
leader = st.none() | st.fixed_dictionaries({"leader_id": i32, "leader_epoch": i32})
snapshot = st.none() | st.fixed_dictionaries({"end_offset": i64, "epoch": i32})
unknown_tags = st.dictionaries(st.integers(3, 200), st.binary(max_size=5), max_size=2)


@st.composite
def partitions(draw: st.DrawFn) -> dict:
    p = {"partition_index": draw(i32), "error_code": draw(i16),
         "high_watermark": draw(i64), "records": draw(records)}
    # Handler entries leave some fields out (an error's); they take the schema's defaults.
    for key, value in (("aborted_transactions", aborted), ("last_stable_offset", i64), ("log_start_offset", i64),
                       ("preferred_read_replica", i32), ("diverging_epoch", diverging),
                       ("current_leader", leader), ("snapshot_id", snapshot)):
        if draw(st.booleans()):
            p[key] = draw(value)
    if draw(st.integers(0, 9)) == 0:
        p["_unknown_tags"] = draw(unknown_tags)
    return p


bodies = st.fixed_dictionaries({
    "throttle_time_ms": i32, "error_code": i16, "session_id": i32,
    "responses": st.lists(st.fixed_dictionaries({
        "topic": st.text(max_size=10),
        "partitions": st.lists(partitions(), max_size=4)}), max_size=3)})


def _joined(parts: list) -> bytes:
    return b"".join(bytes(p) for p in parts)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=80, deadline=None)
@given(body=bodies)
def test_same_bytes_as_the_schema(version: int, body: dict) -> None:
    assert _joined(encode_fetch_parts(body, version)) == FETCH.response.encode(body, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_record_sets_are_parts_not_copies(version: int) -> None:
    """Every non-empty record set, small or large, bytes or a view, goes out as the very
    object the log gave (the schema's GatherIO copied sets under 4 KB into the header)."""
    sets = [b"x" * 10, memoryview(b"y" * 100)[1:], bytearray(b"z" * 5000)]
    body = {"responses": [{"topic": "t", "partitions": [
        {"partition_index": i, "error_code": 0, "high_watermark": 1, "records": r}
        for i, r in enumerate(sets + [b"", None])]}]}
    parts = encode_fetch_parts(body, version)
    for s in sets:
        assert any(p is s for p in parts)
    assert _joined(parts) == FETCH.response.encode(body, version)


def test_the_codec_uses_it_and_keeps_regions() -> None:
    class Source:
        def fileno(self) -> int:
            return 0

    region = FileRegion(Source(), 5, 70_000)
    body = {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 1, "records": region}]}]}
    parts = encode_response_parts(1, 11, 7, body)
    assert parts[2] is region and len(parts) == 3  # size and header, body head, records
    assert parts[0][:4] == (sum(len(p) for p in parts) - 4).to_bytes(4, "big")


def test_versions_outside_the_hand_encoder_are_refused() -> None:
    with pytest.raises(ValueError):
        encode_fetch_parts({"responses": []}, MAX_VERSION + 1)


def test_strict_mode_catches_a_field_the_hand_encoder_would_drop() -> None:
    """Under STRICT (every test process, tests/conftest.py) each answer is also built by the
    schema, which refuses a key it does not declare: an unknown field cannot vanish."""
    assert schema.STRICT
    body = {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 1, "records": b"",
         "no_such_field": 1}]}]}
    with pytest.raises(schema.UnknownField):
        encode_fetch_parts(body, 11)
