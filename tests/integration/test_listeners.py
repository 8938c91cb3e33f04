"""Every listener of `listeners` is served, and each answers with its own advertised endpoints
(issue #10): a client that came in on a listener is told to reconnect to that listener, as
Kafka answers Metadata, DescribeCluster and FindCoordinator."""
from __future__ import annotations

from pathlib import Path

from compat.wire import create_topic, request
from protocol.api_keys import ApiKey
from tests.helpers import serving_broker
from tests.integration.clients import CONFLUENT, Rec

# PLAINTEXT advertises a port nobody listens on: a client sent there instead of to the
# listener it used could not connect, so the stock client's success shows each listener's
# answers name its own endpoint.
UNREACHABLE = 1


def _metadata_brokers(bootstrap: str) -> list[tuple[int, str, int]]:
    body = request(bootstrap, ApiKey.METADATA, 9, {"topics": [], "allow_auto_topic_creation":
                                                   False})
    return [(b.node_id, b.host, b.port) for b in body.brokers]


def test_each_listener_answers_with_its_own_endpoints(tmp_path: Path) -> None:
    # The brokers of a node reach each other over INTERNAL: PLAINTEXT advertises no door.
    with serving_broker(
            tmp_path / "logs",
            listeners="PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            listener_security_protocol_map="PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
            inter_broker_listener_name="INTERNAL",
            advertised_listeners=f"PLAINTEXT://127.0.0.1:{UNREACHABLE},"
                                 "INTERNAL://127.0.0.1:0") as info:
        internal = f"127.0.0.1:{info.ports['INTERNAL']}"
        assert info.ports["PLAINTEXT"] == info.port != info.ports["INTERNAL"]
        # A node's worker K advertises each port + K (a configured one too), or its own.
        ids = [broker_id for broker_id, _ in info.brokers]
        doors = {broker_id: info.ports["INTERNAL"] + k for k, broker_id in enumerate(ids)}
        assert sorted(_metadata_brokers(info.bootstrap)) == \
            [(broker_id, "127.0.0.1", UNREACHABLE + k) for k, broker_id in enumerate(ids)]
        assert sorted(_metadata_brokers(internal)) == \
            [(broker_id, "127.0.0.1", doors[broker_id]) for broker_id in ids]
        cluster = request(internal, ApiKey.DESCRIBE_CLUSTER, 0,
                          {"include_cluster_authorized_operations": False})
        assert sorted((b.broker_id, b.port) for b in cluster.brokers) == sorted(doors.items())

        create_topic(internal, "two-doors", 1)
        CONFLUENT.produce(internal, "two-doors", [Rec(b"k", b"in by the side door")])
        got = CONFLUENT.consume_group(internal, "two-doors", "side-door-group", 1)
        assert [g.value for g in got] == [b"in by the side door"]
        coordinator = request(internal, ApiKey.FIND_COORDINATOR, 3,
                              {"key": "side-door-group", "key_type": 0})
        assert (coordinator.error_code, coordinator.port) == (0, doors[coordinator.node_id])
