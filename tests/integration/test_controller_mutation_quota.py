"""controller_mutation_rate (KIP-599) on a real broker: partitions created or deleted per
second by a client, from a token bucket of controller.quota.window.num x
controller.quota.window.size.seconds x rate partitions. CreateTopics v6+, CreatePartitions v3+
and DeleteTopics v5+ refuse a topic with THROTTLING_QUOTA_EXCEEDED once the bucket is below
zero; older versions are served and throttled. Each step opens a new connection, since a
throttled one is muted for the throttle time.

The rate is 0.2 partitions a second over 2 windows of 1 s: the bucket starts at 0.4, so the
first mutation takes it well below zero and it needs seconds to refill — far longer than
the steps take, so no step depends on timing."""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from tests.helpers import serving_broker
from tests.integration.raw import RawConnection, create_topic, known_topics, send_request

THROTTLED = None  # Kafka 4.1 answers THROTTLING_QUOTA_EXCEEDED without a message


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Any]:
    with serving_broker(tmp_path, controller_quota_window_num="2") as info:
        yield info


def _bootstrap(info: Any) -> str:
    return f"127.0.0.1:{info.port}"


def _limit(bootstrap: str, client_id: str, rate: float) -> None:
    body = {"entries": [{"entity": [{"entity_type": "client-id", "entity_name": client_id}],
                         "ops": [{"key": "controller_mutation_rate", "value": rate,
                                  "remove": False}]}], "validate_only": False}
    assert send_request(bootstrap, ApiKey.ALTER_CLIENT_QUOTAS, 1, body).entries[0].error_code \
        == 0


def _ask(bootstrap: str, client_id: str, api: int, version: int, body: dict) -> Any:
    with RawConnection(bootstrap, client_id=client_id) as conn:
        return conn.request(api, version, body)


def _create_body(*topics: tuple[str, int]) -> dict:
    return {"topics": [{"name": name, "num_partitions": n, "replication_factor": 1,
                        "assignments": [], "configs": []} for name, n in topics],
            "timeout_ms": 10000, "validate_only": False}


def test_stock_clients_are_refused_or_throttled_past_their_rate(broker: Any) -> None:
    """kafka-python speaks CreateTopics v7 (strict): its second topic is refused, and it
    pauses for the throttle; librdkafka speaks v4 (permissive): both topics are created and
    its throttle callback hears how long to hold back. A client without a quota is free."""
    import time

    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka.admin import KafkaAdminClient
    bootstrap = _bootstrap(broker)
    _limit(bootstrap, "strict", 0.2)
    _limit(bootstrap, "permissive", 0.2)
    first, second, third, fourth = (f"cmq-{uuid.uuid4().hex[:8]}" for _ in range(4))
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="strict")
    try:
        answer = admin.create_topics({first: {"num_partitions": 2, "replication_factor": 1},
                                      second: {"num_partitions": 1, "replication_factor": 1}},
                                     raise_errors=False)
    finally:
        admin.close()
    assert [(t["name"], t["error_code"], t["error_message"]) for t in answer["topics"]] == \
        [(first, 0, None), (second, ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)]
    throttles: list[float] = []
    legacy = AdminClient({"bootstrap.servers": bootstrap, "client.id": "permissive",
                          "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    for name, future in legacy.create_topics([NewTopic(second, 2, 1),
                                              NewTopic(third, 1, 1)]).items():
        future.result(10)
    deadline = time.monotonic() + 10
    while not throttles and time.monotonic() < deadline:
        legacy.poll(0.1)
    assert throttles and throttles[0] > 5  # seconds: -2.6 credits at 0.2 a second
    free = AdminClient({"bootstrap.servers": bootstrap, "client.id": "someone-else"})
    free.create_topics([NewTopic(fourth, 30, 1)])[fourth].result(10)
    assert {first, second, third, fourth} <= set(known_topics(broker.bootstrap))


def test_strict_versions_refuse_and_older_ones_are_throttled(broker: Any) -> None:
    bootstrap = _bootstrap(broker)
    names = [f"cmq-{uuid.uuid4().hex[:8]}" for _ in range(4)]
    for name in names:
        create_topic(bootstrap, name, 2)  # by a client without a quota
    _limit(bootstrap, "mutator", 0.2)
    # Validate-only requests are not counted.
    check = {**_create_body(("never", 50)), "validate_only": True}
    answer = _ask(bootstrap, "mutator", ApiKey.CREATE_TOPICS, 7, check)
    assert answer.topics[0].error_code == 0 and answer.throttle_time_ms == 0
    # DeleteTopics v5+ (strict): the first deletion empties the bucket, the second is refused.
    answer = _ask(bootstrap, "mutator", ApiKey.DELETE_TOPICS, 5,
                  {"topic_names": names[:2], "timeout_ms": 10000})
    assert [(r.error_code, r.error_message) for r in answer.responses] == \
        [(0, None), (ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)]
    assert 7000 <= answer.throttle_time_ms <= 8000  # -1.6 credits at 0.2 a second
    # CreatePartitions v3 (strict) and CreateTopics v6+ (strict): refused.
    answer = _ask(bootstrap, "mutator", ApiKey.CREATE_PARTITIONS, 3, {
        "topics": [{"name": names[1], "count": 3, "assignments": None}],
        "timeout_ms": 10000, "validate_only": False})
    assert (answer.results[0].error_code, answer.results[0].error_message) == \
        (ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
    assert answer.throttle_time_ms > 0
    answer = _ask(bootstrap, "mutator", ApiKey.CREATE_TOPICS, 6, _create_body(("late", 1)))
    assert (answer.topics[0].error_code, answer.topics[0].error_message) == \
        (ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
    # Older versions know no such error: served, with the throttle the client must honour.
    answer = _ask(bootstrap, "mutator", ApiKey.DELETE_TOPICS, 4,
                  {"topic_names": [names[2]], "timeout_ms": 10000})
    assert answer.responses[0].error_code == 0 and answer.throttle_time_ms > 8000
    answer = _ask(bootstrap, "mutator", ApiKey.CREATE_PARTITIONS, 2, {
        "topics": [{"name": names[3], "count": 3, "assignments": None}],
        "timeout_ms": 10000, "validate_only": False})
    assert answer.results[0].error_code == 0 and answer.throttle_time_ms > 10000
    topics = known_topics(bootstrap)
    assert names[0] not in topics and names[2] not in topics
    assert names[1] in topics and topics[names[3]] == 3
    assert "late" not in topics
