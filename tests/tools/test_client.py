"""pybroker.client: the pieces the tools stand on, against a real broker and fake peers."""
from __future__ import annotations

import struct

import pytest
import trio

from protocol.api_keys import ApiKey
from protocol.codec import decode_request, encode_response
from protocol.errors import ErrorCode, KafkaError
from protocol.framing import NEED_DATA, FrameBuffer
from protocol.records.batch import Compression
from pybroker.client.admin import Admin, ConfigResource, NewTopic, OffsetSpec, ResourceType
from pybroker.client.client import open_client, parse_bootstrap
from pybroker.client.cluster import TopicPartition, format_topic_id
from pybroker.client.connection import BrokerConnection
from pybroker.client.consumer import Consumer
from pybroker.client.consumer_protocol import (
    decode_assignment, decode_subscription, encode_assignment, encode_subscription,
)
from pybroker.client.errors import KafkaConnectionError
from pybroker.client.group import range_assign
from pybroker.client.producer import Producer, default_partition, murmur2

# -- pure pieces -------------------------------------------------------------------------------


def test_murmur2_matches_kafkas_utils_test() -> None:
    cases = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
             b"a-little-bit-longer-string": -1486304829,
             b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971, b"abc": 479470107}
    assert {k: murmur2(k) for k in cases} == cases
    assert default_partition(b"foobar", 3) == (-790332482 & 0x7FFFFFFF) % 3


def test_range_assignor_matches_kafkas() -> None:
    subs = {"c1": ["t1", "t2"], "c0": ["t1", "t2"]}
    assert range_assign(subs, {"t1": 3, "t2": 3}) == {
        "c0": {"t1": [0, 1], "t2": [0, 1]}, "c1": {"t1": [2], "t2": [2]}}
    assert range_assign({"a": ["t"], "b": ["t"], "c": ["t"]}, {"t": 2}) == {
        "a": {"t": [0]}, "b": {"t": [1]}, "c": {}}
    assert range_assign({"a": ["missing"]}, {}) == {"a": {}}


def test_consumer_protocol_round_trip_and_newer_versions() -> None:
    sub = decode_subscription(encode_subscription(["b", "a"], b"ud"))
    assert (sub.version, sub.topics, sub.user_data) == (0, ("a", "b"), b"ud")
    a = decode_assignment(encode_assignment({"t": [2, 0]}))
    assert a.partitions == (TopicPartition("t", 2), TopicPartition("t", 0))
    assert a.by_topic() == {"t": [0, 2]}
    # a v3 subscription (owned partitions, generation, rack) plus bytes from a future version
    v3 = (struct.pack(">hi", 3, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", -1)
          + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">ii", 1, 4)
          + struct.pack(">i", 7) + struct.pack(">h", 2) + b"r1" + b"future")
    sub = decode_subscription(v3)
    assert (sub.topics, sub.owned_partitions, sub.generation_id, sub.rack_id) == (
        ("t",), (TopicPartition("t", 4),), 7, "r1")
    assert decode_assignment(b"").partitions == ()
    with pytest.raises(ValueError):
        decode_subscription(b"\x00\x00\x00\x00\x00\x09ab")


def test_bootstrap_parsing() -> None:
    assert parse_bootstrap("a:1, b:2,[::1]:9092") == [("a", 1), ("b", 2), ("::1", 9092)]
    for bad in ("localhost", "host:port", "h:0", ""):
        with pytest.raises(ValueError):
            parse_bootstrap(bad)


def test_version_negotiation_picks_the_lower_maximum() -> None:
    conn = BrokerConnection(None, "h", 1)  # type: ignore[arg-type]
    conn.api_versions = {int(ApiKey.FETCH): (0, 17), int(ApiKey.PRODUCE): (3, 7),
                         int(ApiKey.METADATA): (0, 2)}
    assert conn.pick_version(ApiKey.FETCH) == 12  # ours stops at 12
    assert conn.pick_version(ApiKey.PRODUCE) == 7  # theirs stops at 7
    assert conn.pick_version(ApiKey.METADATA, max_version=1) == 1
    with pytest.raises(KafkaError) as info:
        conn.pick_version(ApiKey.METADATA, min_version=5)
    assert info.value.code == ErrorCode.UNSUPPORTED_VERSION
    with pytest.raises(KafkaError, match="does not support JoinGroup"):
        conn.pick_version(ApiKey.JOIN_GROUP)
    assert not conn.supports(ApiKey.JOIN_GROUP)


def test_topic_ids_print_like_kafka() -> None:
    import uuid
    assert format_topic_id(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert len(format_topic_id(uuid.uuid4())) == 22


# -- fake peers --------------------------------------------------------------------------------

async def _serve_once(handler, task_status=trio.TASK_STATUS_IGNORED):  # type: ignore
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])
    async with listeners[0]:
        stream = await listeners[0].accept()
        async with stream:
            await handler(stream)


async def test_api_versions_falls_back_when_the_broker_is_older() -> None:
    """KIP-511: a broker answers an ApiVersions version it lacks with v0 and its maximum."""
    seen: list[int] = []

    async def old_broker(stream: trio.SocketStream) -> None:
        frames = FrameBuffer()
        while True:
            frames.receive_data(await stream.receive_some(65536))
            frame = frames.next_frame()
            while frame is not NEED_DATA:
                request = decode_request(frame)  # type: ignore[arg-type]
                seen.append(request.api_version)
                if request.api_version > 2:
                    body = {"error_code": 35, "api_keys": [
                        {"api_key": 18, "min_version": 0, "max_version": 2}]}
                    await stream.send_all(encode_response(18, 0, request.header.correlation_id,
                                                          body))
                else:
                    body = {"error_code": 0, "throttle_time_ms": 0, "api_keys": [
                        {"api_key": 18, "min_version": 0, "max_version": 2},
                        {"api_key": 3, "min_version": 0, "max_version": 8}]}
                    await stream.send_all(encode_response(18, request.api_version,
                                                          request.header.correlation_id, body))
                    return
                frame = frames.next_frame()

    async with trio.open_nursery() as nursery:
        port = await nursery.start(_serve_once, old_broker)
        conn = await BrokerConnection.open("127.0.0.1", port, nursery=nursery)
        assert seen == [4, 2]
        assert conn.api_versions == {18: (0, 2), 3: (0, 8)}
        assert conn.pick_version(ApiKey.METADATA) == 8
        await conn.aclose()


async def test_a_peer_that_is_not_kafka() -> None:
    async def closes(stream: trio.SocketStream) -> None:
        await stream.receive_some(100)

    async def silent(stream: trio.SocketStream) -> None:
        await trio.sleep(5)

    async with trio.open_nursery() as nursery:
        port = await nursery.start(_serve_once, closes)
        with pytest.raises(KafkaConnectionError, match="lost connection to 127.0.0.1"):
            await BrokerConnection.open("127.0.0.1", port, nursery=nursery)
        port = await nursery.start(_serve_once, silent)
        with pytest.raises(KafkaConnectionError, match="did not answer ApiVersions"):
            await BrokerConnection.open("127.0.0.1", port, nursery=nursery, connect_timeout=0.3)
        nursery.cancel_scope.cancel()


async def test_unreachable_bootstrap_names_what_failed() -> None:
    with pytest.raises(KafkaConnectionError) as info:
        async with open_client("127.0.0.1:1,127.0.0.1:2"):
            pass
    assert str(info.value) == ("could not connect to any bootstrap server: could not connect "
                               "to 127.0.0.1:1 (Connection refused); could not connect to "
                               "127.0.0.1:2 (Connection refused)")


# -- against the broker ------------------------------------------------------------------------

async def test_produce_and_fetch_round_trip(bootstrap, name) -> None:
    t = name("client")
    async with open_client(bootstrap) as client:
        admin = Admin(client)
        created = await admin.create_topics([NewTopic(t, 3, 1, {"retention.ms": "3600000"})])
        assert not isinstance(created[t], Exception)
        again = await admin.create_topics([NewTopic(t, 3, 1)])
        assert isinstance(again[t], KafkaError) and again[t].code == ErrorCode.TOPIC_ALREADY_EXISTS
        async with Producer(client, compression=Compression.LZ4, linger_ms=1) as producer:
            futures = [await producer.send(t, b"v%d" % i, key=b"k%d" % i,
                                           headers=[("n", b"%d" % i)]) for i in range(30)]
        metas = [await f.wait() for f in futures]
        for i, meta in enumerate(metas):
            assert meta.partition == default_partition(b"k%d" % i, 3)
        ends = await admin.list_offsets({TopicPartition(t, p): OffsetSpec.LATEST
                                         for p in range(3)})
        assert sum(r.offset for r in ends.values()) == 30

        async with Consumer(client, auto_offset_reset="earliest") as consumer:
            consumer.assign([TopicPartition(t, p) for p in range(3)])
            got = []
            while len(got) < 30:
                batch = await consumer.poll(2)
                assert batch, "no records"
                got += batch
        assert sorted(r.value for r in got) == sorted(b"v%d" % i for i in range(30))
        assert all(r.headers == (("n", r.value[1:]),) for r in got)  # type: ignore[index]

        configs = await admin.describe_configs([ConfigResource(ResourceType.TOPIC, t)])
        entries = {e.name: e for e in configs[ConfigResource(ResourceType.TOPIC, t)]}
        assert entries["retention.ms"].value == "3600000"
        assert not entries["retention.ms"].is_default and entries["segment.bytes"].is_default

        async with Producer(client) as p2:
            with pytest.raises(KafkaError) as info:
                await p2.send(t, b"x", partition=9)
        assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_acks_zero_and_too_large_records(bootstrap, name) -> None:
    t = name("client")
    async with open_client(bootstrap) as client:
        await Admin(client).create_topics([NewTopic(t, 1, 1)])
        async with Producer(client, acks=0, max_request_size=1000) as producer:
            fut = await producer.send(t, b"quiet")
            with pytest.raises(KafkaError) as info:
                await producer.send(t, b"x" * 2000)
            assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE
        assert (await fut.wait()).offset == -1


async def test_two_group_members_split_the_partitions(bootstrap, name) -> None:
    t, g = name("client"), name("client-group")
    async with open_client(bootstrap) as client:
        await Admin(client).create_topics([NewTopic(t, 4, 1)])
        options = dict(group_id=g, heartbeat_interval_ms=100, auto_offset_reset="earliest",
                       session_timeout_ms=6000)
        async with Consumer(client, **options) as first, Consumer(client, **options) as second:
            await first.subscribe([t])
            assert len(first.assignment()) == 4

            async def keep_polling() -> None:
                while len(first.assignment()) != 2:
                    await first.poll(0.1)

            with trio.fail_after(20):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(keep_polling)
                    await second.subscribe([t])
            assert first.assignment() | second.assignment() == {
                TopicPartition(t, p) for p in range(4)}
            assert not first.assignment() & second.assignment()
            await first.commit({TopicPartition(t, p): 0 for p in range(4)
                                if TopicPartition(t, p) in first.assignment()})
        # Both left (LeaveGroup is best effort: on a loaded machine a lost one leaves the
        # member to its session timeout), so the group ends Empty.
        with trio.move_on_after(15):
            while (described := (await Admin(client).describe_groups([g]))[g]).state != "Empty":
                await trio.sleep(0.1)
        assert described.state == "Empty", described


async def test_admin_routes_per_partition_errors(bootstrap, name) -> None:
    t = name("client")
    async with open_client(bootstrap) as client:
        admin = Admin(client)
        await admin.create_topics([NewTopic(t, 1, 1)])
        results = await admin.list_offsets({TopicPartition(t, 0): OffsetSpec.EARLIEST,
                                            TopicPartition("ghost", 0): OffsetSpec.EARLIEST})
        assert results[TopicPartition(t, 0)].offset == 0
        assert isinstance(results[TopicPartition("ghost", 0)], KafkaError)
        deleted = await admin.delete_topics([t, "ghost"])
        assert deleted[t] is None
        assert deleted["ghost"].code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_raw_produce_and_fetch_for_replication(kafka, bootstrap, name) -> None:
    from protocol.records import Record, build_batch, iter_records_in
    from pybroker.client import FetchPosition, fetch, produce_batch

    t = name("client")
    tp = TopicPartition(t, 0)
    async with open_client(bootstrap) as client:
        await Admin(client).create_topics([NewTopic(t, 1, 1)])
        batch = build_batch([Record(b"k", b"one"), Record(None, b"two")])
        result = await produce_batch(client, tp, batch, acks=-1)
        assert result is not None and result.base_offset == 0
        assert await produce_batch(client, tp, build_batch([Record(None, b"three")]),
                                   acks=0) is None
        leader = await client.leader(t, 0)
        deadline = trio.current_time() + 5
        while True:  # the acks=0 batch is appended soon after it is written
            got = await fetch(client, leader, {tp: FetchPosition(0)}, replica_id=-1,
                              max_wait_ms=100)
            if got[tp].high_watermark == 3 or trio.current_time() > deadline:
                break
        part = got[tp]
        assert (part.error, part.high_watermark, part.log_start_offset) == (ErrorCode.NONE, 3, 0)
        assert [r.value for r in iter_records_in(part.records)] == [b"one", b"two", b"three"]
        got = await fetch(client, leader, {tp: 10})
        assert got[tp].error == ErrorCode.OFFSET_OUT_OF_RANGE
        with pytest.raises(KafkaError) as info:
            await produce_batch(client, TopicPartition(t, 5), batch)
        assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_a_static_member_closes_without_leaving(bootstrap, name) -> None:
    """KIP-345: a member with a group.instance.id keeps its place when it closes, and gets its
    partitions back under a new member id without a rebalance when it comes back."""
    t, g = name("client"), name("client-static")
    async with open_client(bootstrap) as client:
        admin = Admin(client)
        await admin.create_topics([NewTopic(t, 2, 1)])
        options = dict(group_id=g, heartbeat_interval_ms=100, auto_offset_reset="earliest",
                       session_timeout_ms=6000, group_instance_id="static-1")
        async with Consumer(client, **options) as consumer:
            await consumer.subscribe([t])
            before = (await admin.describe_groups([g]))[g]
        after = (await admin.describe_groups([g]))[g]
        assert after.state == "Stable", after
        assert [(m.member_id, m.group_instance_id) for m in after.members] == \
            [(m.member_id, m.group_instance_id) for m in before.members] != []
        async with Consumer(client, **options) as again:
            await again.subscribe([t])
            assert again.assignment() == {TopicPartition(t, 0), TopicPartition(t, 1)}
            now = (await admin.describe_groups([g]))[g]
            assert now.state == "Stable" and len(now.members) == 1
            assert now.members[0].member_id != before.members[0].member_id
            assert now.members[0].group_instance_id == "static-1"


async def _batch_headers(client, tp: TopicPartition) -> list:  # type: ignore[no-untyped-def]
    from protocol.records.batch import iter_batches
    from pybroker.client import fetch
    leader = await client.leader(tp.topic, tp.partition)
    got = await fetch(client, leader, {tp: 0}, max_wait_ms=0)
    return [h for _, h in iter_batches(memoryview(got[tp].records or b""))]


async def test_the_idempotent_producer_stamps_ids_and_sequences(bootstrap, name) -> None:
    """KIP-98: one producer id and epoch, per-partition sequences from 0 with no gap, batch
    after batch; another producer gets another id."""
    t = name("idem")
    async with open_client(bootstrap) as client:
        await Admin(client).create_topics([NewTopic(t, 2, 1)])
        async with Producer(client, enable_idempotence=True, batch_size=60, linger_ms=0) as p:
            for round_ in range(3):
                for i in range(4):
                    await p.send(t, b"v%d-%d" % (round_, i), partition=i % 2)
                await p.flush()
            first_id = p.producer_id
        async with Producer(client, enable_idempotence=True) as other:
            await other.send(t, b"other", partition=0)
        assert other.producer_id != first_id >= 0
        for partition in (0, 1):
            headers = await _batch_headers(client, TopicPartition(t, partition))
            mine = [h for h in headers if h.producer_id == first_id]
            assert len(mine) >= 3 and {h.producer_epoch for h in mine} == {p.producer_epoch}
            sequence = 0
            for h in mine:
                assert h.base_sequence == sequence, [(x.base_sequence, x.records_count)
                                                     for x in mine]
                sequence += h.records_count
            assert sequence == 6
        with pytest.raises(ValueError, match="acks to all"):
            Producer(client, enable_idempotence=True, acks=1)


async def test_the_idempotent_producer_recovers_from_a_refused_batch(bootstrap, name) -> None:
    """A batch the leader refuses leaves a hole in the sequence; the producer takes a new id
    rather than have every later batch refused as OUT_OF_ORDER_SEQUENCE_NUMBER."""
    t = name("idem")
    async with open_client(bootstrap) as client:
        await Admin(client).create_topics([NewTopic(t, 1, 1, {"max.message.bytes": "1000"})])
        async with Producer(client, enable_idempotence=True, linger_ms=0) as p:
            await (await p.send(t, b"first", partition=0)).wait()
            first_id = p.producer_id
            with pytest.raises(KafkaError) as info:
                await (await p.send(t, b"x" * 2000, partition=0)).wait()
            assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE
            after = await (await p.send(t, b"after", partition=0)).wait()
        assert after.offset == 1
        headers = await _batch_headers(client, TopicPartition(t, 0))
        assert [(h.producer_id == first_id, h.base_sequence) for h in headers] == \
            [(True, 0), (False, 0)]


async def test_cooperative_members_keep_their_partitions_when_a_third_joins(bootstrap,
                                                                            name) -> None:
    """KIP-429 end to end: the group runs cooperative-sticky; when a third member joins, the
    first two give up one partition each and keep the others (never paused: their positions
    stay), and the third gets the two in a second round."""
    t, g = name("client"), name("client-coop")
    async with open_client(bootstrap) as client:
        admin = Admin(client)
        await admin.create_topics([NewTopic(t, 6, 1)])
        options = dict(group_id=g, heartbeat_interval_ms=100, auto_offset_reset="earliest",
                       session_timeout_ms=6000,
                       partition_assignment_strategy=("cooperative-sticky",))
        async with Consumer(client, **options) as a, Consumer(client, **options) as b, \
                Consumer(client, **options) as c:

            def settled(consumers: list[Consumer], size: int) -> bool:
                return all(len(x.assignment()) == size and x.membership is not None
                           and not x.membership.rejoin_needed for x in consumers)

            async def join(newcomer: Consumer, others: list[Consumer], size: int) -> None:
                """The newcomer subscribes while the others poll, each in its own task as
                each would in its own process, and all poll on until each holds `size`
                partitions. Nobody stops polling in between: a poll that has begun a rejoin
                waits in JoinGroup until every member has rejoined, so others left unpolled
                there would be rejoined by none and leave the group at their session
                timeout (6 s), their partitions with them (2 runs in 50 under load)."""
                everyone = [*others, newcomer]

                async def polling(consumer: Consumer) -> None:
                    while not settled(everyone, size):
                        await consumer.poll(0.02)

                async def subscribe() -> None:
                    await newcomer.subscribe([t])
                    await polling(newcomer)

                with trio.fail_after(30):
                    async with trio.open_nursery() as nursery:
                        for consumer in others:
                            nursery.start_soon(polling, consumer)
                        nursery.start_soon(subscribe)

            await a.subscribe([t])
            await join(b, [a], 3)
            before = {"a": a.assignment(), "b": b.assignment()}
            await join(c, [a, b], 2)
            assert a.assignment() < before["a"] and b.assignment() < before["b"]
            assert a.assignment() | b.assignment() | c.assignment() == \
                {TopicPartition(t, p) for p in range(6)}
            described = (await admin.describe_groups([g]))[g]
            assert described.protocol == "cooperative-sticky", described
