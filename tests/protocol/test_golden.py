"""Request frames captured from stock clients decode, and re-encode to exactly their bytes.

The frames under `golden/<client>/` were recorded by `capture.py --write` from kafka-python,
confluent-kafka (librdkafka, with and without idempotence), aiokafka and kcat producing one
record. Re-encoding byte for byte shows our declarations carry every bit a real client sends
(field order, compact or classic encodings, tag sections, nulls). A live variant re-runs the
installed clients against the fake broker and applies the same check to whatever they send now.
"""
from __future__ import annotations

import re
import struct
from pathlib import Path

import crc32c
import pytest

from protocol.codec import Request, decode_request
from protocol.headers import encode_request_header
from protocol.messages import APIS
from protocol.schema import snake
from tests.protocol import capture

GOLDEN = Path(__file__).parent / "golden"
FILES = sorted(GOLDEN.glob("*/*.bin"))
NAME = re.compile(r"(?P<api>[a-z_]+)_v(?P<version>\d+)_(?P<n>\d+)\.bin")
IDEMPOTENT = {"kafka-python", "confluent-kafka-idempotent"}


def reencode(request: Request) -> bytes:
    api = APIS[request.api_key]
    flexible = request.api_version in api.flexible
    return (encode_request_header(request.header, flexible)
            + api.request.encode(request.body, request.api_version))


def test_golden_frames_exist() -> None:
    clients = {p.parent.name for p in FILES}
    assert {"kafka-python", "confluent-kafka", "aiokafka", "kcat"} <= clients


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_golden_frame_round_trips(path: Path) -> None:
    frame = path.read_bytes()
    request = decode_request(frame)
    match = NAME.fullmatch(path.name)
    assert match is not None
    assert snake(APIS[request.api_key].name) == match["api"]
    assert request.api_version == int(match["version"])
    assert reencode(request) == frame
    # The plain reference decodes the body to the same values.
    api = APIS[request.api_key]
    header = encode_request_header(request.header, request.api_version in api.flexible)
    assert frame.startswith(header)
    assert api.request.decode_plain(frame[len(header):], request.api_version) == request.body
    # Received in place (a bytearray frame, decoded through FrameReader): the same request,
    # re-encoding to the same bytes.
    in_place = decode_request(bytearray(frame))
    assert in_place == request and reencode(in_place) == frame


def test_records_of_a_frame_received_in_place_are_views_of_it() -> None:
    """A Produce frame's records are handed out as writable views of the frame, not copies
    (the broker patches offsets into them in place); from bytes, as writable copies."""
    path = next(p for p in FILES if p.name.startswith("produce_"))
    frame = bytearray(path.read_bytes())
    records = decode_request(frame).body.topic_data[0].partition_data[0].records
    assert type(records) is memoryview and not records.readonly
    assert records.obj is frame
    records[0:8] = struct.pack(">q", 42)  # a base offset, patched in place
    assert struct.pack(">q", 42) in frame
    copied = decode_request(path.read_bytes()).body.topic_data[0].partition_data[0].records
    assert type(copied) is bytearray and copied[8:] == records[8:]


def _batches(records: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(records):
        (length,) = struct.unpack_from(">i", records, pos + 8)
        out.append(records[pos:pos + 12 + length])
        pos += 12 + length
    return out


@pytest.mark.parametrize("path", [p for p in FILES if p.name.startswith("produce_")],
                         ids=lambda p: p.parent.name)
def test_golden_produce_carries_one_valid_batch(path: Path) -> None:
    """What a client's Produce means: topic "golden", partition 0, one magic-2 batch with a
    good CRC-32C, a producer id from InitProducerId when idempotent and -1 when not."""
    body = decode_request(path.read_bytes()).body
    assert body.transactional_id is None
    assert [t.name for t in body.topic_data] == [capture.TOPIC]
    [partition] = body.topic_data[0].partition_data
    assert partition.index == 0
    [batch] = _batches(partition.records)
    assert batch[16] == 2, "magic"
    (crc,) = struct.unpack_from(">I", batch, 17)
    assert crc32c.crc32c(batch[21:]) == crc
    producer_id, _, _, count = struct.unpack_from(">qhii", batch, 43)
    assert count == 1
    assert producer_id == (4242 if path.parent.name in IDEMPOTENT else -1)


@pytest.mark.parametrize("path", [p for p in FILES if p.name.startswith("metadata_")],
                         ids=lambda p: p.parent.name)
def test_golden_metadata_asks_for_the_topic_or_all(path: Path) -> None:
    topics = decode_request(path.read_bytes()).body.topics
    assert topics is None or [t.name for t in topics] in ([], [capture.TOPIC])


@pytest.mark.parametrize("path", [p for p in FILES if p.name.startswith("api_versions_v3")
                                  or p.name.startswith("api_versions_v4")],
                         ids=lambda p: p.parent.name)
def test_golden_api_versions_names_the_client(path: Path) -> None:
    body = decode_request(path.read_bytes()).body
    assert body.client_software_name and body.client_software_version


@pytest.mark.parametrize("client", sorted(capture.CLIENTS))
def test_live_capture(client: str) -> None:
    """Whatever the installed client sends today decodes and re-encodes byte for byte."""
    if not capture.client_available(client):
        pytest.skip(f"{client} is not installed")
    broker = capture.capture(client)
    assert not broker.errors
    kinds = {c.api_name for c in broker.frames}
    assert {"ApiVersions", "Metadata", "Produce"} <= kinds
    for c in broker.frames:
        assert reencode(decode_request(c.frame)) == c.frame, f"{c.api_name} v{c.api_version}"
