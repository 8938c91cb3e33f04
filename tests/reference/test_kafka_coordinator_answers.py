"""What a fresh broker answers before its internal topics exist, on Apache Kafka 4.1.1 and on
pybroker side by side: the first FindCoordinator of each key type answers
COORDINATOR_NOT_AVAILABLE at once and has the topic created, a later ask names the broker;
a transactional Produce before `__transaction_state` exists is NOT_ENOUGH_REPLICAS (the
verification found no coordinator), and creates nothing.

The module's node is fresh (its own Kafka), so the first asks are the node's first."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from compat.apache_kafka import ApacheKafka
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.testing.broker import broker_in_thread
from tests.integration.raw import create_topic, known_topics, send_request
from tests.integration.txn_clients import _raw_txn_batch

# Kafka's ReplicaManager message for a verification the coordinator could not answer.
UNVERIFIED = ("Unable to verify the partition has been added to the transaction. "
              "Underlying error: COORDINATOR_NOT_AVAILABLE")


def _until(ask: Callable[[], Any], done: Callable[[Any], bool], what: str) -> Any:
    deadline = time.monotonic() + 60
    while not done(answer := ask()):
        assert time.monotonic() < deadline, what
        time.sleep(0.05)
    return answer


def _produce_answers(bootstrap: str) -> list[tuple[int, int, str | None]]:
    """(version, error, message) of a transactional batch per Produce v9 and v11, from an
    idempotent producer id, before any transaction coordinator exists."""
    create_topic(bootstrap, "verified", 1)
    init = _until(lambda: send_request(bootstrap, ApiKey.INIT_PRODUCER_ID, 3, {
        "transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1,
        "producer_epoch": -1}), lambda a: a.error_code == 0, "a producer id")
    answers = []
    for version in (9, 11):
        body = {"transactional_id": "no-state-yet", "acks": -1, "timeout_ms": 5000,
                "topic_data": [{"name": "verified", "partition_data": [{
                    "index": 0, "records": _raw_txn_batch(init.producer_id,
                                                          init.producer_epoch)}]}]}
        got = send_request(bootstrap, ApiKey.PRODUCE, version, body) \
            .responses[0].partition_responses[0]
        answers.append((version, got.error_code, got.error_message))
    assert "__transaction_state" not in known_topics(bootstrap)
    return answers


def _find_answers(bootstrap: str) -> list[tuple[int, int, int, bool]]:
    """(key type, version, first answer's error, whether a later ask named a broker) of the
    first FindCoordinator of a group (v3) and of a transactional id (v4)."""
    answers = []
    for key_type, version in ((0, 3), (1, 4)):
        def ask(key_type: int = key_type, version: int = version) -> Any:
            if version >= 4:
                return send_request(bootstrap, ApiKey.FIND_COORDINATOR, version, {
                    "key_type": key_type, "coordinator_keys": ["first"]}).coordinators[0]
            return send_request(bootstrap, ApiKey.FIND_COORDINATOR, version,
                                {"key": "first", "key_type": key_type})
        first = ask()
        later = _until(ask, lambda a: a.error_code != ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       "a coordinator named")
        answers.append((key_type, version, first.error_code,
                        later.error_code == 0 and later.node_id >= 0))
    return answers


def test_a_fresh_broker_before_its_internal_topics_exist(apache_kafka: ApacheKafka,
                                                          tmp_path: Path) -> None:
    """The Produce first: the FindCoordinator of a transactional id creates its topic."""
    kafka = _produce_answers(apache_kafka.bootstrap), _find_answers(apache_kafka.bootstrap)
    assert kafka == ([(9, ErrorCode.NOT_ENOUGH_REPLICAS, UNVERIFIED),
                      (11, ErrorCode.NOT_ENOUGH_REPLICAS, UNVERIFIED)],
                     [(0, 3, ErrorCode.COORDINATOR_NOT_AVAILABLE, True),
                      (1, 4, ErrorCode.COORDINATOR_NOT_AVAILABLE, True)])
    with broker_in_thread(tmp_path / "logs") as info:
        assert (_produce_answers(info.bootstrap), _find_answers(info.bootstrap)) == kafka
