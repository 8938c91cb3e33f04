"""The hand-written Metadata response encoder gives the schema's bytes, for every version."""
from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.codec import encode_response_parts
from protocol.messages import APIS
from protocol.metadata_response import (
    EncodedBody, encode_metadata_response, encode_partitions, encode_topic,
)

METADATA = APIS[3]
VERSIONS = range(0, 13)

ints = st.integers(-2**31, 2**31 - 1)
names = st.text(min_size=0, max_size=12)
partition_rows = st.lists(st.tuples(ints, ints, ints, st.lists(ints, max_size=4),
                                    st.lists(ints, max_size=4)), max_size=6)
topics = st.lists(st.tuples(st.integers(-2**15, 2**15 - 1), names, st.uuids(), st.booleans(),
                            partition_rows, ints), max_size=4)
brokers = st.lists(st.tuples(ints, names, ints, st.none() | names), max_size=3)


def _by_schema(version: int, brokers_, cluster_id, controller_id, topics_, throttle,
               cluster_ops) -> bytes:
    body = {
        "throttle_time_ms": throttle,
        "brokers": [{"node_id": n, "host": h, "port": p, "rack": r} for n, h, p, r in brokers_],
        "cluster_id": cluster_id, "controller_id": controller_id,
        "topics": [{"error_code": e, "name": name, "topic_id": tid, "is_internal": internal,
                    "partitions": [{"error_code": 0, "partition_index": i, "leader_id": ld,
                                    "leader_epoch": ep, "replica_nodes": rep,
                                    "isr_nodes": isr, "offline_replicas": []}
                                   for i, ld, ep, rep, isr in rows],
                    "topic_authorized_operations": ops}
                   for e, name, tid, internal, rows, ops in topics_],
        "cluster_authorized_operations": cluster_ops,
    }
    return METADATA.response.encode(body, version)


def _by_hand(version: int, brokers_, cluster_id, controller_id, topics_, throttle,
             cluster_ops) -> bytes:
    entries = [encode_topic(version, e, name, tid, internal,
                            encode_partitions(rows, version), ops)
               for e, name, tid, internal, rows, ops in topics_]
    return encode_metadata_response(version, brokers_, cluster_id, controller_id, entries,
                                    throttle, cluster_ops)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60, deadline=None)
@given(brokers=brokers, cluster_id=st.none() | names, controller_id=ints, topics_=topics,
       throttle=ints, cluster_ops=ints)
def test_same_bytes_as_the_schema(version: int, brokers, cluster_id, controller_id, topics_,
                                  throttle, cluster_ops) -> None:  # type: ignore[no-untyped-def]
    if version < 1:  # racks are absent before v1 and the schema cannot carry None there
        brokers = [(n, h, p, None) for n, h, p, _ in brokers]
    if version < 2:
        cluster_id = None
    args = (version, brokers, cluster_id, controller_id, topics_, throttle, cluster_ops)
    assert _by_hand(*args) == _by_schema(*args)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_wide_topic_and_an_error_entry(version: int) -> None:
    rows = [(i, 1, 5, [1, 2, 3], [1, 2]) for i in range(1000)]
    tid = uuid.uuid4()
    name = None if version >= 12 else ""
    hand = encode_metadata_response(
        version, [(1, "localhost", 9092, None)], "cid", 1,
        [encode_topic(version, 0, "wide", tid, False, encode_partitions(rows, version)),
         encode_topic(version, 100, name, None, False)])
    schema = METADATA.response.encode({
        "brokers": [{"node_id": 1, "host": "localhost", "port": 9092}],
        "cluster_id": "cid", "controller_id": 1,
        "topics": [{"error_code": 0, "name": "wide", "topic_id": tid, "partitions": [
            {"error_code": 0, "partition_index": i, "leader_id": 1, "leader_epoch": 5,
             "replica_nodes": [1, 2, 3], "isr_nodes": [1, 2], "offline_replicas": []}
            for i in range(1000)]},
            {"error_code": 100, "name": name, "partitions": []}]}, version)
    assert hand == schema
    # The codec sends an encoded body as it is.
    frame = b"".join(bytes(p) for p in encode_response_parts(3, version, 7, EncodedBody(hand)))
    assert frame.endswith(hand)
    assert frame == b"".join(bytes(p) for p in encode_response_parts(
        3, version, 7, METADATA.response.decode_plain(schema, version)))
