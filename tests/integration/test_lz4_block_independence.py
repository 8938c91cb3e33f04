"""LZ4 batches the broker writes itself (a topic's compression.type=lz4 rebuilding a producer's
batch) must have independent blocks: Kafka's Java reader decodes every block alone (see
tests/lz4_frames.py), and cramjam's default frame links them."""
from __future__ import annotations

from protocol.api_keys import ApiKey
from protocol.messages import APIS
from protocol.records.batch import HEADER_SIZE, LOG_OVERHEAD, Compression, iter_batches
from protocol.records.compression import decompress
from protocol.records.record import Record, build_batch, decode_batch
from tests.integration.admin_helpers import raw_produce, topic_name
from tests.integration.raw import create_topic, leader_address, send_request
from tests.lz4_frames import FLG_BLOCK_INDEPENDENT, blocks_decoded_alone

# Repeats every ~1 KB over 300 KB: each 64 KB block could reuse the one before.
VALUES = [b"".join(b"row %d of a repetitive value; " % (j % 40) for j in range(40))
          for _ in range(300)]


def fetch_raw(bootstrap: str, topic: str) -> bytes:
    body = APIS[ApiKey.FETCH].request.default(12)
    body.update({"max_wait_ms": 0, "min_bytes": 0, "topics": [{"topic": topic, "partitions": [
        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 4 << 20,
         "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1}]}]})
    resp = send_request(leader_address(bootstrap, topic, 0), ApiKey.FETCH, 12, body)
    return bytes(resp.responses[0].partitions[0].records or b"")


def test_recompressed_lz4_batch_has_independent_blocks(broker) -> None:
    topic = topic_name("lz4-blocks")
    create_topic(broker.bootstrap, topic, 1, {"compression.type": "lz4"})
    sent = build_batch([Record(b"k%d" % i, v) for i, v in enumerate(VALUES)],
                       compression=Compression.GZIP)
    assert raw_produce(broker.bootstrap, topic, 0, sent).error_code == 0
    stored = fetch_raw(broker.bootstrap, topic)
    [(pos, header)] = list(iter_batches(stored))
    assert header.compression is Compression.LZ4
    frame = stored[pos + HEADER_SIZE:pos + LOG_OVERHEAD + header.batch_length]
    assert frame[4] & FLG_BLOCK_INDEPENDENT, f"FLG {frame[4]:#04x}: linked blocks"
    blocks = blocks_decoded_alone(frame)
    assert len(blocks) > 3
    assert b"".join(blocks) == decompress(Compression.LZ4, frame)
    assert [r.value for r in decode_batch(stored[pos:], check_crc=True)] == VALUES
