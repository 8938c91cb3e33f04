"""The hand-written Produce codec (protocol/produce_codec.py) agrees with the schema: the
same request bodies from the same frames, record sets of the same type (a writable view of
a bytearray frame, a bytearray copy of a bytes one), the same response bytes, for every
version the broker serves; and what it does not take (tagged fields, malformed frames) goes
to the schema, which raises as before."""
from __future__ import annotations

from io import BytesIO

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.api_keys import ApiKey
from protocol.codec import ProtocolError, TrailingBytes, decode_request, encode_request
from protocol.headers import decode_request_header
from protocol.messages import APIS
from protocol.primitives import FrameReader
from protocol.produce_codec import (
    FLEXIBLE_FROM, MAX_VERSION, MIN_VERSION, decode_produce, encode_produce,
)

PRODUCE = APIS[ApiKey.PRODUCE]
VERSIONS = range(MIN_VERSION, MAX_VERSION + 1)

i16 = st.integers(-2**15, 2**15 - 1)
i32 = st.integers(-2**31, 2**31 - 1)
i64 = st.integers(-2**63, 2**63 - 1)
text = st.text(max_size=12)
requests = st.fixed_dictionaries({
    "transactional_id": st.none() | text, "acks": i16, "timeout_ms": i32,
    "topic_data": st.lists(st.fixed_dictionaries({
        "name": text, "partition_data": st.lists(st.fixed_dictionaries({
            "index": i32, "records": st.none() | st.binary(max_size=200)}), max_size=3)}),
        max_size=3)})


def _schema_decode(frame: bytes | bytearray, version: int):  # type: ignore[no-untyped-def]
    io = BytesIO(frame) if isinstance(frame, bytes) else FrameReader(frame)
    header = decode_request_header(io, version in PRODUCE.flexible)
    return header, PRODUCE.request.decode(io, version, allow_trailing=True), io.tell()


def _records(body) -> list:  # type: ignore[no-untyped-def]
    return [(type(p["records"]), p["records"]) for t in body["topic_data"]
            for p in t["partition_data"]]


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60, deadline=None)
@given(body=requests, client_id=st.none() | text, in_place=st.booleans())
def test_requests_decode_as_the_schema_decodes_them(version: int, body: dict,
                                                    client_id: str | None,
                                                    in_place: bool) -> None:
    wire = encode_request(ApiKey.PRODUCE, version, 7, client_id, body)[4:]
    frame = bytearray(wire) if in_place else wire
    header, expected, end = _schema_decode(frame, version)
    start = len(wire) - len(PRODUCE.request.encode(body, version))
    assert decode_produce(frame, start, version) == (expected, end)  # the hand path took it
    request = decode_request(frame)
    assert request.header == header and request.body == expected
    assert _records(request.body) == _records(expected)
    if in_place:  # views of the frame itself, patched in place by the log
        for _, records in _records(request.body):
            if records is not None:
                assert records.obj is frame and not records.readonly


@pytest.mark.parametrize("version", VERSIONS)
def test_tagged_fields_and_bad_frames_go_to_the_schema(version: int) -> None:
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 5,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"abc"}]}]}
    if version >= FLEXIBLE_FROM:
        tagged = dict(body, _unknown_tags={5: b"xy"})
        frame = encode_request(ApiKey.PRODUCE, version, 1, "c", tagged)[4:]
        header = len(frame) - len(PRODUCE.request.encode(tagged, version))
        assert decode_produce(frame, header, version) is None  # the schema reads tags
        assert decode_request(frame).body["_unknown_tags"] == {5: b"xy"}
    frame = encode_request(ApiKey.PRODUCE, version, 1, "c", body)[4:]
    with pytest.raises(TrailingBytes):
        decode_request(frame + b"\x00")
    for cut in (len(frame) - 1, len(frame) - 4, 12):
        with pytest.raises(ProtocolError):
            decode_request(frame[:cut])


@pytest.mark.parametrize("version", VERSIONS)
def test_a_bad_client_id_or_string_is_the_schemas_error(version: int) -> None:
    body = {"transactional_id": "x", "acks": 1, "timeout_ms": 5, "topic_data": []}
    frame = bytearray(encode_request(ApiKey.PRODUCE, version, 1, "c", body)[4:])
    frame[10] = 0xFF  # the client id's one byte: not UTF-8
    with pytest.raises(ProtocolError):
        decode_request(bytes(frame))


responses = st.fixed_dictionaries({
    "throttle_time_ms": i32,
    "responses": st.lists(st.fixed_dictionaries({
        "name": text, "partition_responses": st.lists(st.fixed_dictionaries({
            "index": i32, "error_code": i16, "base_offset": i64,
            "log_append_time_ms": i64, "log_start_offset": i64,
            "record_errors": st.lists(st.fixed_dictionaries({
                "batch_index": i32, "batch_index_error_message": st.none() | text}),
                max_size=2),
            "error_message": st.none() | text}), max_size=3)}), max_size=3)})


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60, deadline=None)
@given(body=responses)
def test_responses_encode_as_the_schema_encodes_them(version: int, body: dict) -> None:
    assert b"".join(encode_produce(body, version)) == PRODUCE.response.encode(body, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_defaults_and_tagged_fields(version: int) -> None:
    """An error answer leaves fields out (the schema's defaults); a tagged field is written
    by the schema."""
    sparse = {"responses": [{"name": "t", "partition_responses": [
        {"index": 3, "error_code": 87}]}]}
    assert b"".join(encode_produce(sparse, version)) == PRODUCE.response.encode(sparse, version)
    if version >= 10:
        leader = {"responses": [{"name": "t", "partition_responses": [
            {"index": 3, "error_code": 6,
             "current_leader": {"leader_id": 2, "leader_epoch": 9}}]}],
            "node_endpoints": [{"node_id": 2, "host": "h", "port": 9092, "rack": None}]}
        assert b"".join(bytes(p) for p in encode_produce(leader, version)) == \
            PRODUCE.response.encode(leader, version)
