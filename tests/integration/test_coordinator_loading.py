"""A coordinator that is named but not loaded yet answers COORDINATOR_LOAD_IN_PROGRESS.

Issue #35 §2: on a brand-new broker the first FindCoordinator has `__consumer_offsets` (or
`__transaction_state`) created (answering COORDINATOR_NOT_AVAILABLE meanwhile); the image
names this broker leader of its partitions before the delta's load has replayed them, so a
second client that asks meanwhile is told this broker, and its next group or transaction
request used to get NOT_COORDINATOR — which librdkafka hands to the application from
OffsetFetch. Kafka answers COORDINATOR_LOAD_IN_PROGRESS while it loads, and clients retry
that where they are. The load is held here (the worker-thread read of the partition's
records waits on an event), so the window is as wide as the test needs instead of ~10 ms.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode as E
from tests.helpers import broker_in_thread, serving_broker
from tests.integration.coordinator_load import HeldLoad
from tests.integration.group_harness import wait_until
from tests.integration.raw import send_request

pytestmark = pytest.mark.in_process(
    "holds the coordinators' loads of their partitions (patched in this process) and records "
    "requests (request hooks)")


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Any]:
    with serving_broker(tmp_path / "logs") as info:
        yield info


def _first_ask(bootstrap: str, key_type: int, key: str) -> None:
    """The first FindCoordinator: it answers at once that no coordinator is available yet
    (as Kafka 4.1.1's) and has the internal topic created, whose load is held."""
    answer = send_request(bootstrap, ApiKey.FIND_COORDINATOR, 3,
                          {"key": key, "key_type": key_type})
    assert answer.error_code == E.COORDINATOR_NOT_AVAILABLE


def _named(bootstrap: str, key_type: int, key: str) -> int:
    return send_request(bootstrap, ApiKey.FIND_COORDINATOR, 3,
                        {"key": key, "key_type": key_type}).error_code


def test_group_requests_while_the_offsets_topic_loads(fresh: Any) -> None:
    bootstrap = f"127.0.0.1:{fresh.port}"
    held = HeldLoad(fresh.broker.groups)
    _first_ask(bootstrap, 0, "first")
    try:
        assert held.started.wait(30), "__consumer_offsets was never loaded"
        # As Kafka: FindCoordinator names the leader of the group's partition...
        found = send_request(bootstrap, ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
        assert (found.error_code, found.node_id) == (0, fresh.broker.config.node_id)
        # ... and the leader, still loading it, says so to every group request.
        fetched = send_request(bootstrap, ApiKey.OFFSET_FETCH, 7,
                               {"group_id": "g", "topics": None, "require_stable": False})
        assert fetched.error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        batched = send_request(bootstrap, ApiKey.OFFSET_FETCH, 8, {"groups": [
            {"group_id": "g", "topics": None}], "require_stable": False})
        assert batched.groups[0].error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        joined = send_request(bootstrap, ApiKey.JOIN_GROUP, 5, {
            "group_id": "g", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000,
            "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}]})
        assert joined.error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        synced = send_request(bootstrap, ApiKey.SYNC_GROUP, 3, {
            "group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None,
            "assignments": []})
        assert synced.error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        beat = send_request(bootstrap, ApiKey.HEARTBEAT, 3, {
            "group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None})
        assert beat.error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        committed = send_request(bootstrap, ApiKey.OFFSET_COMMIT, 7, {
            "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": "__consumer_offsets", "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]})
        assert committed.topics[0].partitions[0].error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        described = send_request(bootstrap, ApiKey.DESCRIBE_GROUPS, 3, {
            "groups": ["g"], "include_authorized_operations": False})
        assert described.groups[0].error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    finally:
        held.release()
    assert _named(bootstrap, 0, "first") == 0

    def fetched() -> int:
        return send_request(bootstrap, ApiKey.OFFSET_FETCH, 7, {
            "group_id": "g", "topics": None, "require_stable": False}).error_code
    wait_until(lambda: fetched() != E.COORDINATOR_LOAD_IN_PROGRESS, what="the load's end")
    assert fetched() == 0


def test_transaction_requests_while_the_state_topic_loads(fresh: Any) -> None:
    bootstrap = f"127.0.0.1:{fresh.port}"
    held = HeldLoad(fresh.broker.transactions)
    _first_ask(bootstrap, 1, "first")
    try:
        assert held.started.wait(30), "__transaction_state was never loaded"
        found = send_request(bootstrap, ApiKey.FIND_COORDINATOR, 3,
                             {"key": "tx", "key_type": 1})
        assert (found.error_code, found.node_id) == (0, fresh.broker.config.node_id)
        init = send_request(bootstrap, ApiKey.INIT_PRODUCER_ID, 3, {
            "transactional_id": "tx", "transaction_timeout_ms": 10_000,
            "producer_id": -1, "producer_epoch": -1})
        assert init.error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        added = send_request(bootstrap, ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
            "v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 1,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": "__transaction_state", "partitions": [0]}]})
        code = added.results_by_topic_v3_and_below[0].results_by_partition[0]
        assert code.partition_error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        ended = send_request(bootstrap, ApiKey.END_TXN, 3, {
            "transactional_id": "tx", "producer_id": 1, "producer_epoch": 0,
            "committed": True})
        assert ended.error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    finally:
        held.release()
    assert _named(bootstrap, 1, "first") == 0

    def init() -> int:
        return send_request(bootstrap, ApiKey.INIT_PRODUCER_ID, 3, {
            "transactional_id": "tx", "transaction_timeout_ms": 10_000,
            "producer_id": -1, "producer_epoch": -1}).error_code
    wait_until(lambda: (code := init()) != E.COORDINATOR_LOAD_IN_PROGRESS and code == 0,
               what="the load's end")


def _recorded(fresh: Any, api: int) -> bool:
    return any(r.api_key == api for r in fresh.hooks.requests)


def test_confluent_consumer_meets_a_loading_coordinator(tmp_path: Path) -> None:
    """A librdkafka consumer with a group, reaching the coordinator while it loads, gets
    no error: it retries COORDINATOR_LOAD_IN_PROGRESS where NOT_COORDINATOR reached the
    application."""
    import confluent_kafka
    with broker_in_thread(tmp_path / "logs", hooks=True) as fresh:
        bootstrap = f"127.0.0.1:{fresh.port}"
        held = HeldLoad(fresh.broker.groups)
        _first_ask(bootstrap, 0, "first")
        errors: list[Any] = []
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False,
            "error_cb": errors.append})
        try:
            assert held.started.wait(30)
            consumer.assign([confluent_kafka.TopicPartition("__consumer_offsets", 0)])
            try:
                wait_until(lambda: _recorded(fresh, ApiKey.OFFSET_FETCH) or bool(errors),
                           what="the consumer's OffsetFetch")
                for _ in range(3):  # what the consumer delivers meanwhile
                    msg = consumer.poll(0.2)
                    if msg is not None and msg.error():
                        errors.append(msg.error())
            finally:
                held.release()
            for _ in range(5):
                msg = consumer.poll(0.2)
                if msg is not None and msg.error():
                    errors.append(msg.error())
            committed = consumer.committed(
                [confluent_kafka.TopicPartition("__consumer_offsets", 0)], timeout=10)
            assert committed[0].error is None
        finally:
            consumer.close()
        assert errors == []


def test_confluent_transactional_producer_meets_a_loading_coordinator(tmp_path: Path) -> None:
    """The transactional equivalent: the first transactional producer reaches its
    coordinator while __transaction_state loads, and its transaction still commits."""
    import confluent_kafka
    with broker_in_thread(tmp_path / "logs", hooks=True) as fresh:
        bootstrap = f"127.0.0.1:{fresh.port}"
        held = HeldLoad(fresh.broker.transactions)
        _first_ask(bootstrap, 1, "first")
        errors: list[Any] = []
        producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "transactional.id": "tx",
            "error_cb": errors.append})
        assert held.started.wait(30)
        done = threading.Event()

        def init() -> None:
            producer.init_transactions(30)
            done.set()
        initialising = threading.Thread(target=init, daemon=True)
        initialising.start()
        try:
            wait_until(lambda: _recorded(fresh, ApiKey.INIT_PRODUCER_ID) or done.is_set(),
                       what="the producer's InitProducerId")
            assert not done.is_set()
        finally:
            held.release()
        initialising.join(30)
        assert done.is_set()
        producer.begin_transaction()
        producer.produce("first-txn", b"v")  # auto-created
        producer.commit_transaction(30)
        assert errors == []
