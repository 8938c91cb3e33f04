"""KIP-368 re-authentication on pybroker: the broker's rules on the wire (the scenarios that
tests/reference/test_sasl_reauth.py runs against Apache Kafka 4.1.1 too), and pybroker's own
client keeping its connections through several session lifetimes."""
from __future__ import annotations

import time
from typing import Any, Callable, Iterator

import pytest
import trio

from protocol.api_keys import ApiKey
from pybroker.client import open_client
from pybroker.client.security import client_security
from tests.helpers import broker_in_thread
from pybroker.tools import configs
from tests.integration.reauth_scenarios import (
    LIFETIME_MS, LISTENER, PAST_LIFETIME_S, SCENARIOS, SCRAM_PASSWORD, SCRAM_USER, SETTINGS,
)

pytestmark = pytest.mark.in_process("counts the re-authenticating handshakes (request hooks)")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    settings = {key.replace(".", "_"): value for key, value in SETTINGS.items()}
    with broker_in_thread(tmp_path_factory.mktemp("reauth"), hooks=True,
                          listeners=f"PLAINTEXT://127.0.0.1:0,{LISTENER}://127.0.0.1:0",
                          listener_security_protocol_map=f"PLAINTEXT:PLAINTEXT,"
                                                         f"{LISTENER}:SASL_PLAINTEXT",
                          **settings) as info:
        assert configs.main([
            "--bootstrap-server", f"127.0.0.1:{info.ports['PLAINTEXT']}", "--alter",
            "--entity-type", "users", "--entity-name", SCRAM_USER, "--add-config",
            f"SCRAM-SHA-256=[iterations=4096,password={SCRAM_PASSWORD}]"]) == 0
        yield info


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_the_broker_as_kafka(broker: Any, scenario: Callable[[tuple[str, int]], None]) -> None:
    scenario(("127.0.0.1", broker.ports[LISTENER]))


_BROKERS_ONLY = {"topics": [], "allow_auto_topic_creation": False,
                 "include_cluster_authorized_operations": False,
                 "include_topic_authorized_operations": False}


def _reauthenticating_handshakes(broker: Any, user: str) -> int:
    """SaslHandshakes sent on a connection already authenticated as `user` (a new
    connection's handshake is ANONYMOUS's)."""
    return sum(1 for r in broker.hooks.requests
               if r.api_key == ApiKey.SASL_HANDSHAKE and r.principal == f"User:{user}")


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_pybroker_client_keeps_its_connection_past_several_lifetimes(
        broker: Any, mechanism: str) -> None:
    """Requests every 0.3 s for four PLAIN lifetimes, then one after an idle stretch past the
    lifetime, all on the same connection: the client re-authenticates before writing once
    85-95 % of the lifetime has passed (after the idle stretch the session has expired, and
    the broker still accepts the re-authentication). Without it the broker closes the
    connection at the first request past the lifetime. SCRAM sessions do not expire here:
    the client never re-authenticates them."""
    user, password = ("alice", "alice-secret") if mechanism == "PLAIN" else \
        (SCRAM_USER, SCRAM_PASSWORD)
    module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
    security = client_security({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
        "sasl.jaas.config": f'org.apache.kafka.common.security.{module} required '
                            f'username="{user}" password="{password}";'})
    before = _reauthenticating_handshakes(broker, user)

    async def main() -> tuple[int, int]:
        async with open_client(f"127.0.0.1:{broker.ports[LISTENER]}",
                               security=security) as client:
            conn = await client.any_connection()
            deadline = trio.current_time() + 4 * LIFETIME_MS / 1000
            while trio.current_time() < deadline:
                await trio.sleep(0.3)
                assert (await conn.request(ApiKey.METADATA, _BROKERS_ONLY)).brokers
            await trio.sleep(PAST_LIFETIME_S)
            assert (await conn.request(ApiKey.METADATA, _BROKERS_ONLY)).brokers
            assert not conn.closed and await client.any_connection() is conn
            return conn.session_lifetime_ms, conn.reauthentications

    lifetime, reauthentications = trio.run(main)
    seen = _reauthenticating_handshakes(broker, user) - before
    if mechanism == "PLAIN":
        assert lifetime == LIFETIME_MS
        # About one per lifetime in the busy stretch, and one after the idle stretch.
        assert reauthentications >= 3 and seen == reauthentications
    else:
        assert (lifetime, reauthentications, seen) == (0, 0, 0)


def test_kafka_python_reauthenticates(broker: Any) -> None:
    """kafka-python 3 re-authenticates too (its SaslReauthenticator, at 85-95 % of the
    lifetime): a producer sending every 0.2 s through four lifetimes gets every record
    acknowledged, and the broker saw re-authenticating handshakes from alice."""
    from kafka import KafkaProducer
    before = _reauthenticating_handshakes(broker, "alice")
    producer = KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{broker.ports[LISTENER]}",
        security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
        sasl_plain_username="alice", sasl_plain_password="alice-secret")
    try:
        futures = []
        deadline = time.monotonic() + 4 * LIFETIME_MS / 1000
        while time.monotonic() < deadline:
            futures.append(producer.send("reauth-kafka-python", b"%d" % len(futures)))
            time.sleep(0.2)
        assert all(f.get(timeout=30).offset == i for i, f in enumerate(futures))
    finally:
        producer.close(timeout=10)
    assert _reauthenticating_handshakes(broker, "alice") - before >= 2
