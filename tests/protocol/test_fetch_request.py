"""The hand-written Fetch request decoder (protocol/fetch_request.py) gives the schema's body
for every version the broker serves, every declared field there (those the version lacks at
their defaults); a tagged field or a malformed frame goes to the schema, which decides."""
from __future__ import annotations

from io import BytesIO

import pytest
from construct import Container
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.api_keys import ApiKey
from protocol.codec import ProtocolError, TrailingBytes, decode_request, encode_request
from protocol.fetch_request import FLEXIBLE_FROM, MAX_VERSION, MIN_VERSION, decode_fetch
from protocol.headers import decode_request_header
from protocol.messages import APIS

FETCH = APIS[ApiKey.FETCH]
VERSIONS = range(MIN_VERSION, MAX_VERSION + 1)

i8 = st.integers(-2**7, 2**7 - 1)
i32 = st.integers(-2**31, 2**31 - 1)
i64 = st.integers(-2**63, 2**63 - 1)
text = st.text(max_size=12)
bodies = st.fixed_dictionaries({
    "replica_id": i32, "max_wait_ms": i32, "min_bytes": i32, "max_bytes": i32,
    "isolation_level": i8, "session_id": i32, "session_epoch": i32, "rack_id": text,
    "topics": st.lists(st.fixed_dictionaries({
        "topic": text, "partitions": st.lists(st.fixed_dictionaries({
            "partition": i32, "current_leader_epoch": i32, "fetch_offset": i64,
            "last_fetched_epoch": i32, "log_start_offset": i64,
            "partition_max_bytes": i32}), max_size=3)}), max_size=3),
    "forgotten_topics_data": st.lists(st.fixed_dictionaries({
        "topic": text, "partitions": st.lists(i32, max_size=4)}), max_size=2)})


def _schema_decode(frame: bytes, version: int) -> tuple:
    io = BytesIO(frame)
    header = decode_request_header(io, version in FETCH.flexible)
    return header, FETCH.request.decode(io, version, allow_trailing=True), io.tell()


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60, deadline=None)
@given(body=bodies, client_id=st.none() | text)
def test_requests_decode_as_the_schema_decodes_them(version: int, body: dict,
                                                    client_id: str | None) -> None:
    frame = encode_request(ApiKey.FETCH, version, 7, client_id, body)[4:]
    header, expected, end = _schema_decode(frame, version)
    start = len(frame) - len(FETCH.request.encode(body, version))
    assert decode_fetch(frame, start, version) == (expected, end)  # the hand path took it
    request = decode_request(frame)
    assert request.header == header and request.body == expected
    assert dict(request.body) == dict(expected)  # the same keys, nested defaults included


def test_a_different_body_is_told_apart() -> None:
    """The comparisons above can fail: Container equality sees a nested field."""
    body = {"topics": [{"topic": "t", "partitions": [{"partition": 1, "fetch_offset": 2}]}]}
    frame = encode_request(ApiKey.FETCH, 11, 1, "c", body)[4:]
    decoded = decode_request(frame).body
    other = Container(decoded)
    other["topics"] = [Container(decoded["topics"][0], partitions=[
        Container(decoded["topics"][0]["partitions"][0], fetch_offset=3)])]
    assert decoded != other


@pytest.mark.parametrize("version", VERSIONS)
def test_tagged_fields_and_bad_frames_go_to_the_schema(version: int) -> None:
    body = {"max_wait_ms": 5, "topics": [{"topic": "t", "partitions": [{"partition": 0}]}]}
    if version >= FLEXIBLE_FROM:
        tagged = dict(body, cluster_id="kafka-cluster")
        frame = encode_request(ApiKey.FETCH, version, 1, "c", tagged)[4:]
        start = len(frame) - len(FETCH.request.encode(tagged, version))
        assert decode_fetch(frame, start, version) is None  # the schema reads tags
        assert decode_request(frame).body["cluster_id"] == "kafka-cluster"
    frame = encode_request(ApiKey.FETCH, version, 1, "c", body)[4:]
    with pytest.raises(TrailingBytes):
        decode_request(frame + b"\x00")
    for cut in (len(frame) - 1, len(frame) - 6, 12):
        with pytest.raises(ProtocolError):
            decode_request(frame[:cut])
