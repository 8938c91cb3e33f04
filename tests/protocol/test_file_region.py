"""A FileRegion in a response encodes, part for part, to the bytes of the in-memory encoding."""
from __future__ import annotations

import os
import tempfile

from protocol.codec import encode_response, encode_response_parts
from protocol.primitives import FileRegion


class _File:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd


def _fetch_body(records_per_partition: list) -> dict:
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "t", "partitions": [
            {"partition_index": i, "error_code": 0, "high_watermark": 10,
             "last_stable_offset": 10, "log_start_offset": 0, "aborted_transactions": None,
             "preferred_read_replica": -1, "records": records}
            for i, records in enumerate(records_per_partition)]}]}


def test_file_regions_encode_like_bytes() -> None:
    blobs = [os.urandom(n) for n in (10, 5000, 100, 70_000)]
    with tempfile.TemporaryFile() as f:
        positions = []
        f.write(b"junk")
        for blob in blobs:
            positions.append(f.tell())
            f.write(blob)
        f.flush()
        source = _File(f.fileno())
        regions = [FileRegion(source, pos, len(blob)) for pos, blob in zip(positions, blobs)]
        for version in (4, 11, 12):
            expected = encode_response(1, version, 7, _fetch_body(blobs))
            parts = encode_response_parts(1, version, 7, _fetch_body(regions))
            assert sum(type(p) is FileRegion for p in parts) == len(blobs)  # never copied
            got = b"".join(os.pread(p.source.fileno(), p.length, p.offset)
                           if type(p) is FileRegion else bytes(p) for p in parts)
            assert got == expected
