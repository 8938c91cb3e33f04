"""Request hooks (pybroker.network.request_hooks) as tests use them: real clients against a
broker whose hooks fail, drop or delay requests, and the record of what the clients sent.

The clients are the compatibility suite's adapters (tests/integration/clients.py), so each
client's produce and consume is the one the matrix runs.
"""
from __future__ import annotations

import socket
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.testing import DELAY, DROP, HookRequest, RequestHooks
from tests.helpers import broker_in_thread
from tests.integration.clients import AIOKAFKA, CONFLUENT, KAFKA_PYTHON, Rec, check_same
from tests.integration.raw import RawConnection, create_topic, send_request

pytestmark = pytest.mark.in_process("tests the request hooks, which live in the broker's process")

PRODUCERS = {"confluent-kafka": (CONFLUENT, {}),
             # retries set: the test is about the retry, whatever the client's default
             "kafka-python": (KAFKA_PYTHON, {"retries": 5})}
CONSUMERS = {"confluent-kafka": CONFLUENT, "kafka-python": KAFKA_PYTHON, "aiokafka": AIOKAFKA}


@pytest.fixture
def hooked(tmp_path: Path) -> Iterator[Any]:
    with broker_in_thread(tmp_path / "logs", hooks=True) as info:
        yield info


def _hooks(info: Any) -> RequestHooks:
    hooks = info.hooks
    assert isinstance(hooks, RequestHooks)
    return hooks


def _topic() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def _of(hooks: RequestHooks, api: ApiKey) -> list[HookRequest]:
    return [r for r in hooks.requests if r.api_key == api]


# -- with real clients ---------------------------------------------------------------------------

@pytest.mark.parametrize("client", PRODUCERS)
def test_not_leader_on_the_first_produce_is_retried_once(hooked: Any, client: str) -> None:
    adapter, settings = PRODUCERS[client]
    hooks, topic = _hooks(hooked), _topic()
    create_topic(hooked.bootstrap, topic)
    hooks.clear_requests()
    hook = hooks.control("Produce", lambda r: ErrorCode.NOT_LEADER_OR_FOLLOWER)

    sent = [Rec(b"k", b"only-once", partition=0)]
    adapter.produce(hooked.bootstrap, topic, sent, config=settings)

    assert hooks.hooks == [] and hook.remaining == 0
    produces = _of(hooks, ApiKey.PRODUCE)
    assert len(produces) == 2, produces
    for r in produces:  # the same record, sent twice: refused, then appended
        assert r.api_name == "Produce" and r.client_id
        assert [(t.name, [p.index for p in t.partition_data]) for t in r.body.topic_data] == \
            [(topic, [0])]
    check_same(sent, CONFLUENT.consume(hooked.bootstrap, topic, [0], 1))  # offset 0, once


@pytest.mark.parametrize("client", CONSUMERS)
def test_a_connection_dropped_at_the_first_fetch_is_survived(hooked: Any, client: str) -> None:
    hooks, topic = _hooks(hooked), _topic()
    create_topic(hooked.bootstrap, topic)
    sent = [Rec(f"k{i}".encode(), f"v{i}".encode(), partition=0) for i in range(5)]
    CONFLUENT.produce(hooked.bootstrap, topic, sent)
    hook = hooks.control(ApiKey.FETCH, lambda r: DROP)

    got = CONSUMERS[client].consume(hooked.bootstrap, topic, [0], len(sent))

    check_same(sent, got)
    assert hook.remaining == 0
    assert len(_of(hooks, ApiKey.FETCH)) >= 2  # the dropped one, then the ones answered


def test_a_slow_coordinator_still_forms_a_group(hooked: Any) -> None:
    hooks, topic = _hooks(hooked), _topic()
    create_topic(hooked.bootstrap, topic)
    sent = [Rec(None, f"v{i}".encode(), partition=0) for i in range(3)]
    CONFLUENT.produce(hooked.bootstrap, topic, sent)
    hooks.clear_requests()
    # Every lookup, on every connection: librdkafka asks on several at once, so delaying
    # one alone would not make the coordinator slow.
    hook = hooks.control("find_coordinator", lambda r: DELAY(0.5), times=None)

    started = time.monotonic()
    try:
        got = CONFLUENT.consume_group(hooked.bootstrap, topic, "slow-coordinator", len(sent))
    finally:
        hooks.remove(hook)

    check_same(sent, got)
    assert time.monotonic() - started >= 0.5
    assert _of(hooks, ApiKey.FIND_COORDINATOR)
    assert _of(hooks, ApiKey.JOIN_GROUP) and _of(hooks, ApiKey.SYNC_GROUP)


def test_a_whole_response_body_reaches_the_client(hooked: Any) -> None:
    from confluent_kafka.admin import AdminClient

    hooks = _hooks(hooked)
    node = hooked.broker.node_id

    def made_up(request: HookRequest) -> dict:
        # Only the fields that matter: the rest take their defaults.
        return {"brokers": [{"node_id": node, "host": hooked.host, "port": hooked.port}],
                "controller_id": node,
                "topics": [{"name": "made-up", "partitions": [
                    {"partition_index": p, "leader_id": node, "replica_nodes": [node],
                     "isr_nodes": [node]} for p in range(3)]}]}

    hook = hooks.control("METADATA", made_up, times=None)
    try:
        listed = AdminClient({"bootstrap.servers": hooked.bootstrap}).list_topics(timeout=10)
    finally:
        hooks.remove(hook)
    assert set(listed.topics) == {"made-up"}
    assert sorted(listed.topics["made-up"].partitions) == [0, 1, 2]
    assert hook.remaining is None and hooks.hooks == []


# -- the rules, on the wire ----------------------------------------------------------------------

def _versions(bootstrap: str) -> Any:
    return send_request(bootstrap, ApiKey.API_VERSIONS, 3,
                        {"client_software_name": "t", "client_software_version": "1"})


def test_until_removed_in_order_and_none_falls_through(hooked: Any) -> None:
    hooks, calls = _hooks(hooked), []

    def watch(r: HookRequest) -> None:
        calls.append(("watch", r.api_name, r.version, r.client_id))

    watcher = hooks.control(ApiKey.API_VERSIONS, watch, times=2)
    first = hooks.control(int(ApiKey.API_VERSIONS), lambda r: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                          times=None)
    second = hooks.control("ApiVersions", lambda r: ErrorCode.INVALID_REQUEST)
    for _ in range(3):
        assert _versions(hooked.bootstrap).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    # The watcher answered nothing, so it is not used up; the second never got its turn.
    assert calls == [("watch", "ApiVersions", 3, "raw-test")] * 3
    assert (watcher.remaining, first.remaining, second.remaining) == (2, None, 1)
    assert hooks.hooks == [watcher, first, second]

    hooks.remove(first)
    assert _versions(hooked.bootstrap).error_code == ErrorCode.INVALID_REQUEST
    assert _versions(hooked.bootstrap).error_code == ErrorCode.NONE  # the real handler again
    assert hooks.hooks == [watcher]
    hooks.remove(first)  # gone already: nothing happens
    assert len(_of(hooks, ApiKey.API_VERSIONS)) == 5


def test_error_code_everywhere_the_request_asks(hooked: Any) -> None:
    hooks, topic = _hooks(hooked), _topic()
    create_topic(hooked.bootstrap, topic, partitions=2)
    hooks.control("ListOffsets", lambda r: ErrorCode.NOT_LEADER_OR_FOLLOWER)
    body = {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": p, "timestamp": -1}
                                       for p in range(2)]}]}
    failed = send_request(hooked.bootstrap, ApiKey.LIST_OFFSETS, 5, body)
    assert [(p.partition_index, p.error_code) for p in failed.topics[0].partitions] == \
        [(0, ErrorCode.NOT_LEADER_OR_FOLLOWER), (1, ErrorCode.NOT_LEADER_OR_FOLLOWER)]
    answered = send_request(hooked.bootstrap, ApiKey.LIST_OFFSETS, 5, body)
    assert {p.error_code for p in answered.topics[0].partitions} == {ErrorCode.NONE}


def test_drop_closes_only_that_connection_and_delay_waits(hooked: Any) -> None:
    hooks = _hooks(hooked)
    hooks.control("ApiVersions", lambda r: DROP)
    with RawConnection(hooked.bootstrap) as conn:
        conn.send_frame(_versions_frame())
        with pytest.raises((ConnectionError, EOFError, socket.timeout, OSError)):
            conn.read_frame()
    assert _versions(hooked.bootstrap).error_code == ErrorCode.NONE

    hooks.control("ApiVersions", lambda r: DELAY(0.3))
    started = time.monotonic()
    assert _versions(hooked.bootstrap).error_code == ErrorCode.NONE
    assert time.monotonic() - started >= 0.3


def _versions_frame() -> bytes:
    from protocol.codec import encode_request
    return encode_request(ApiKey.API_VERSIONS, 3, 1, "raw-test",
                          {"client_software_name": "t", "client_software_version": "1"})


# -- the object itself (no broker) ---------------------------------------------------------------

def _request(api: ApiKey = ApiKey.PRODUCE) -> HookRequest:
    from construct import Container
    from protocol.messages import APIS
    return HookRequest(int(api), APIS[api].name, 0, "c", Container())


@pytest.mark.parametrize("name", ["Produce", "PRODUCE", "produce", 0, ApiKey.PRODUCE])
def test_api_by_name_or_key(name: Any) -> None:
    hooks = RequestHooks()
    assert hooks.control(name, lambda r: DROP).api_key == ApiKey.PRODUCE
    assert RequestHooks().control("FindCoordinator", print).api_key == ApiKey.FIND_COORDINATOR
    assert RequestHooks().control("find_coordinator", print).api_key == ApiKey.FIND_COORDINATOR


@pytest.mark.parametrize("bad", ["Produec", "", 999, -1, 3.0, True])
def test_unknown_api_raises_a_clear_value_error(bad: Any) -> None:
    with pytest.raises(ValueError, match="API"):
        RequestHooks().control(bad, lambda r: DROP)


@pytest.mark.parametrize("times", [0, -1, 1.5, True])
def test_bad_times_raise(times: Any) -> None:
    with pytest.raises(ValueError, match="times"):
        RequestHooks().control("Produce", lambda r: DROP, times=times)


def test_bad_outcome_and_bad_delay_raise() -> None:
    hooks = RequestHooks()
    hooks.control("Produce", lambda r: "oops")  # type: ignore[arg-type, return-value]
    with pytest.raises(TypeError, match="Produce"):
        hooks.consult(_request())
    with pytest.raises(ValueError):
        DELAY(-1)


def test_recording_is_bounded_and_optional() -> None:
    hooks = RequestHooks(max_recorded=3)
    for _ in range(5):
        hooks.consult(_request())
    assert len(hooks.requests) == 3
    hooks.clear_requests()
    assert hooks.requests == []
    quiet = RequestHooks(record=False)
    quiet.consult(_request())
    assert quiet.requests == []


def test_a_hook_for_every_api_and_one_removed_while_it_runs() -> None:
    hooks = RequestHooks()
    every = hooks.control(None, lambda r: DELAY(0), times=2)
    assert hooks.consult(_request(ApiKey.FETCH)) == DELAY(0)
    assert hooks.consult(_request(ApiKey.METADATA)) == DELAY(0)
    assert hooks.consult(_request(ApiKey.METADATA)) is None and every.remaining == 0

    def remove_self(r: HookRequest) -> Any:
        hooks.remove(selfish)
        return DROP

    selfish = hooks.control("Produce", remove_self)
    assert hooks.consult(_request()) is None  # it removed itself: its answer does not count
