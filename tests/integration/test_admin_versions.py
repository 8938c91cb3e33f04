"""ApiVersions, which must advertise exactly what is served, and version sweeps: every
advertised (api, version) is answered, and every served version of Produce, Fetch, ListOffsets
and Metadata works end to end.
"""
from __future__ import annotations

import uuid

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import APIS
from protocol.records.record import Record, build_batch
from pybroker.cluster.features import FeatureStore
from pybroker.handlers import REGISTRY
from tests.integration.admin_helpers import T, raw_produce, stored_cluster_id, topic_name
from tests.integration.raw import RawConnection, create_topic, leader_address, send_request


# -- ApiVersions -------------------------------------------------------------------------------

def _advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    resp = send_request(bootstrap, ApiKey.API_VERSIONS, 3,
                        {"client_software_name": "raw", "client_software_version": "1"})
    assert resp.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


def test_api_versions_matches_registry(broker) -> None:
    advertised = _advertised(broker.bootstrap)
    defaults = FeatureStore()  # the broker's levels: a gated API is listed only when on
    expected = {key: (h.advertised_min if h.advertised_min is not None else h.min_version,
                      h.max_version) for key, h in REGISTRY.items() if h.enabled(defaults)}
    assert advertised == expected
    for key, (low, high) in advertised.items():
        assert key in APIS and low in APIS[key].versions and high in APIS[key].versions
    resp = send_request(broker.bootstrap, ApiKey.API_VERSIONS, 0, {})
    assert {k.api_key for k in resp.api_keys} == set(expected)


def test_api_versions_unsupported_version_answered_with_v0(broker) -> None:
    """A client newer than us sends ApiVersions v99: the answer is a v0 body with
    UNSUPPORTED_VERSION and our ApiVersions range (KIP-511)."""
    import struct as st
    from protocol.codec import decode_response
    header = st.pack(">hhih", ApiKey.API_VERSIONS, 99, 7, 3) + b"raw"
    with RawConnection(broker.bootstrap) as conn:
        conn.send_frame(st.pack(">i", len(header) + 2) + header + b"\x00\x00")
        cid, body = decode_response(ApiKey.API_VERSIONS, 0, conn.read_frame())
    assert cid == 7 and body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == \
        [(ApiKey.API_VERSIONS, REGISTRY[ApiKey.API_VERSIONS].min_version,
          REGISTRY[ApiKey.API_VERSIONS].max_version)]


def _default_request(key: int, version: int) -> dict:
    body = APIS[key].request.default(version)
    if key == ApiKey.PRODUCE:
        body["acks"] = -1  # acks=0 would get no response
    return body


def test_every_advertised_version_is_answered(broker) -> None:
    """Each advertised (api, version) with an all-defaults request gets a response body that
    decodes, on one connection the broker never closes."""
    advertised = _advertised(broker.bootstrap)
    failures = []
    with RawConnection(broker.bootstrap, timeout=5) as conn:
        for key, (low, high) in sorted(advertised.items()):
            for version in range(low, high + 1):
                try:
                    conn.request(key, version, _default_request(key, version))
                except Exception as exc:  # noqa: BLE001 - report them all
                    failures.append((ApiKey(key).name, version, repr(exc)))
                    conn.close()
                    conn = RawConnection(broker.bootstrap, timeout=5)
    assert not failures, failures


# -- version sweeps: every served version of the data-path APIs works end to end ---------------

def _filled(key: int, version: int, **fields) -> dict:  # type: ignore[no-untyped-def]
    body = APIS[key].request.default(version)
    body.update(fields)
    return body


def test_produce_fetch_list_offsets_every_version(broker) -> None:
    name = topic_name("versions")
    create_topic(broker.bootstrap, name, 1)
    leader = leader_address(broker.bootstrap, name, 0)  # a node's worker leads it
    produce_low, produce_high = REGISTRY[ApiKey.PRODUCE].min_version, \
        REGISTRY[ApiKey.PRODUCE].max_version
    for i, version in enumerate(range(produce_low, produce_high + 1)):
        resp = raw_produce(broker.bootstrap, name, 0,
                           build_batch([Record(b"k", b"v%d" % version, (), T + i)]),
                           version=version)
        assert (resp.error_code, resp.base_offset) == (0, i), version
    count = produce_high - produce_low + 1

    fetch = REGISTRY[ApiKey.FETCH]
    for version in range(fetch.min_version, fetch.max_version + 1):
        for isolation in (0, 1):
            body = _filled(ApiKey.FETCH, version, max_wait_ms=0, min_bytes=1,
                           isolation_level=isolation, topics=[{"topic": name, "partitions": [
                               {"partition": 0, "fetch_offset": 1, "partition_max_bytes": 1 << 20,
                                "current_leader_epoch": -1, "log_start_offset": -1,
                                "last_fetched_epoch": -1}]}])
            resp = send_request(leader, ApiKey.FETCH, version, body)
            part = resp.responses[0].partitions[0]
            assert part.error_code == 0 and part.high_watermark == count, version
            assert part.last_stable_offset == count, version
            if version >= 5:
                assert part.log_start_offset == 0
            assert part.aborted_transactions == ([] if isolation else None), (version, isolation)
            from protocol.records.record import iter_records_in
            offsets = [r.offset for r in iter_records_in(part.records)]
            assert offsets and offsets[0] <= 1 and offsets[-1] == count - 1, (version, offsets)

    lo = REGISTRY[ApiKey.LIST_OFFSETS]
    for version in range(lo.min_version, lo.max_version + 1):
        for ts, expected in ((-2, 0), (-1, count), (T + 1, 1)):
            body = _filled(ApiKey.LIST_OFFSETS, version, replica_id=-1, isolation_level=0,
                           topics=[{"name": name, "partitions": [
                               {"partition_index": 0, "current_leader_epoch": -1,
                                "timestamp": ts}]}])
            resp = send_request(leader, ApiKey.LIST_OFFSETS, version, body)
            part = resp.topics[0].partitions[0]
            assert (part.error_code, part.offset) == (0, expected), (version, ts)
        if version >= 7:
            body["topics"][0]["partitions"][0]["timestamp"] = -3  # max timestamp
            part = send_request(leader, ApiKey.LIST_OFFSETS, version,
                                body).topics[0].partitions[0]
            assert (part.offset, part.timestamp) == (count - 1, T + count - 1)


def test_metadata_every_version(broker) -> None:
    name = topic_name("mdv")
    create_topic(broker.bootstrap, name, 2)
    ids = [broker_id for broker_id, _ in broker.brokers]
    (told,) = send_request(broker.bootstrap, ApiKey.METADATA, 12, _filled(
        ApiKey.METADATA, 12, topics=[{"name": name, "topic_id": uuid.UUID(int=0)}])).topics
    assert told.topic_id != uuid.UUID(int=0)
    md = REGISTRY[ApiKey.METADATA]
    for version in range(md.min_version, md.max_version + 1):
        topics = [{"name": name, "topic_id": uuid.UUID(int=0)}]
        body = _filled(ApiKey.METADATA, version, topics=topics)
        resp = send_request(broker.bootstrap, ApiKey.METADATA, version, body)
        assert sorted((b.node_id, b.port) for b in resp.brokers) == broker.brokers, version
        (topic,) = resp.topics
        assert (topic.error_code, topic.name) == (0, name), version
        assert sorted(p.partition_index for p in topic.partitions) == [0, 1]
        assert all(p.leader_id in ids and list(p.replica_nodes) == [p.leader_id]
                   for p in topic.partitions)
        if version >= 10:
            assert topic.topic_id == told.topic_id
        if version >= 2:
            assert resp.cluster_id == stored_cluster_id(broker)
        # all topics: [] in v0, null from v1
        everything = _filled(ApiKey.METADATA, version, topics=[] if version == 0 else None)
        resp = send_request(broker.bootstrap, ApiKey.METADATA, version, everything)
        assert name in {t.name for t in resp.topics}, version
    # by topic id (v10+ lets a request name a topic by id only)
    body = _filled(ApiKey.METADATA, 12, topics=[{"name": None, "topic_id": told.topic_id}])
    (topic,) = send_request(broker.bootstrap, ApiKey.METADATA, 12, body).topics
    assert (topic.error_code, topic.name) == (0, name)
