"""Leader epochs and acks=all over the wire (the partition layer, issue #10).

A request naming a leader epoch older than the partition's is fenced (FENCED_LEADER_EPOCH: the
client's metadata is stale), one from the future is UNKNOWN_LEADER_EPOCH, as Kafka answers
Fetch v9+, ListOffsets v4+ and OffsetForLeaderEpoch. On one broker the epoch only moves by an
election, so the tests move it in the metadata image (a test double for the controller); a
second replica in the ISR is a double too, made real by its Fetch requests (replica id 1).
"""
from __future__ import annotations

import threading
import time
from functools import partial

import pytest
import trio

from compat.wire import create_topic, request
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode as E
from protocol.records.record import Record, build_batch
from pybroker.replica.partition import FollowerState
from tests.integration.clients import CONFLUENT, Rec

EPOCH = 5


def _fetch(bootstrap: str, topic: str, epoch: int, *, offset: int = 0,
           replica_id: int = -1) -> object:
    body = {"replica_id": replica_id, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": epoch, "fetch_offset": offset,
                 "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": []}
    return request(bootstrap, ApiKey.FETCH, 12, body).responses[0].partitions[0]


def _list_offsets(bootstrap: str, topic: str, epoch: int) -> object:
    body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "current_leader_epoch": epoch, "timestamp": -1}]}]}
    return request(bootstrap, ApiKey.LIST_OFFSETS, 7, body).topics[0].partitions[0]


def _epoch_end(bootstrap: str, topic: str, epoch: int) -> object:
    body = {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
        {"partition": 0, "current_leader_epoch": epoch, "leader_epoch": EPOCH}]}]}
    return request(bootstrap, ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, body).topics[0].partitions[0]


@pytest.mark.in_process(
    "moves the partition's leader epoch through the metadata store on the broker's loop")
def test_stale_and_future_epochs_are_fenced(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker.bootstrap, "epochs")
    CONFLUENT.produce(broker.bootstrap, "epochs", [Rec(b"k", b"before")])
    trio.from_thread.run(partial(broker.broker.metadata.alter_partition, "epochs", 0,
                                 leader_epoch=EPOCH), trio_token=broker.token)  # an election
    for ask in (_fetch, _list_offsets, _epoch_end):
        assert ask(broker.bootstrap, "epochs", EPOCH - 1).error_code == E.FENCED_LEADER_EPOCH
        assert ask(broker.bootstrap, "epochs", EPOCH + 1).error_code == E.UNKNOWN_LEADER_EPOCH
        assert ask(broker.bootstrap, "epochs", EPOCH).error_code == E.NONE, ask
        assert ask(broker.bootstrap, "epochs", -1).error_code == E.NONE, ask
    assert _list_offsets(broker.bootstrap, "epochs", EPOCH).leader_epoch == EPOCH
    # A stock client learns the new epoch from Metadata, names it, and is served.
    CONFLUENT.produce(broker.bootstrap, "epochs", [Rec(b"k", b"after")])
    got = CONFLUENT.consume(broker.bootstrap, "epochs", [0], 2)
    assert [g.value for g in got] == [b"before", b"after"]
    assert _epoch_end(broker.bootstrap, "epochs", EPOCH).end_offset == 2


def _produce_all(bootstrap: str, topic: str, timeout_ms: int) -> object:
    body = {"transactional_id": None, "acks": -1, "timeout_ms": timeout_ms, "topic_data": [
        {"name": topic, "partition_data": [
            {"index": 0, "records": build_batch([Record(b"k", b"v")])}]}]}
    return request(bootstrap, ApiKey.PRODUCE, 9, body).responses[0].partition_responses[0]


@pytest.mark.in_process("adds a follower to the partition in this process")
def test_acks_all_waits_for_the_followers(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker.bootstrap, "acks-all")
    code, part = broker.broker.replicas.leader_partition("acks-all", 0)
    assert code == E.NONE
    part.replicas, part.followers = (0, 1), {1: FollowerState()}
    part.set_isr([0, 1])  # replica 1 is in sync, and has not fetched yet

    timed_out = _produce_all(broker.bootstrap, "acks-all", 300)
    assert timed_out.error_code == E.REQUEST_TIMED_OUT

    answer: dict[str, object] = {}
    waiting = threading.Thread(target=lambda: answer.update(
        r=_produce_all(broker.bootstrap, "acks-all", 20_000)))
    waiting.start()
    # The consumer sees nothing uncommitted meanwhile.
    assert _fetch(broker.bootstrap, "acks-all", -1).high_watermark == 0
    # The follower fetches up to the log end: both batches are committed, the produce answered.
    deadline = time.monotonic() + 10
    while part.log.log_end_offset < 2:  # the second batch is in the log, waiting
        assert time.monotonic() < deadline and waiting.is_alive(), answer
        time.sleep(0.01)
    _fetch(broker.bootstrap, "acks-all", -1, offset=2, replica_id=1)
    waiting.join(10)
    assert answer["r"].error_code == E.NONE and answer["r"].base_offset == 1
    assert _fetch(broker.bootstrap, "acks-all", -1).high_watermark == 2
