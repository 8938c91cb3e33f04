"""KIP-368 re-authentication: Apache Kafka 4.1.1 on the wire, and Kafka's Java client on
pybroker.

The scenarios of tests/integration/reauth_scenarios.py, which pybroker passes
(tests/integration/test_sasl_reauth.py), run here against Kafka 4.1.1 with the same
settings: the rules pybroker follows are Kafka's observed ones, not a reading of its source.
Then Kafka's console producer (the Java client, which re-authenticates) writes to pybroker
for four session lifetimes on one connection.
"""
from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from compat import kafka_tools
from compat.apache_kafka import ApacheKafka, ApacheKafkaUnavailable, free_port
from compat.wire import create_topic, list_offset
from protocol.api_keys import ApiKey
from pybroker.testing import broker_in_thread
from pybroker.tools import configs
from tests.integration.reauth_scenarios import (
    LIFETIME_MS, LISTENER, SCENARIOS, SCRAM_PASSWORD, SCRAM_USER, SETTINGS,
)


class _SaslKafka(ApacheKafka):
    """A Kafka node with the SASL_PLAINTEXT listener AUTH beside its PLAINTEXT one."""

    auth_port = 0

    def pick_ports(self) -> None:
        super().pick_ports()
        self.auth_port = free_port()

    def properties(self) -> dict[str, str]:
        props = super().properties()
        auth = f"{LISTENER}://127.0.0.1:{self.auth_port}"
        props["listeners"] += f",{auth}"
        props["advertised.listeners"] += f",{auth}"
        props["listener.security.protocol.map"] += f",{LISTENER}:SASL_PLAINTEXT"
        props.update(SETTINGS)
        return props


def _add_scram_user(bootstrap: str) -> None:
    assert configs.main(["--bootstrap-server", bootstrap, "--alter", "--entity-type", "users",
                         "--entity-name", SCRAM_USER, "--add-config",
                         f"SCRAM-SHA-256=[iterations=4096,password={SCRAM_PASSWORD}]"]) == 0


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_SaslKafka]:
    node = _SaslKafka(tmp_path_factory.mktemp("kafka-reauth"))
    try:
        node.start()
    except ApacheKafkaUnavailable as exc:
        pytest.fail(f"Apache Kafka (the reference broker) is unavailable: {exc}", pytrace=False)
    try:
        _add_scram_user(node.bootstrap)
        time.sleep(1)  # the credential reaches the SASL listener through the metadata log
        yield node
    finally:
        node.stop()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_kafka_does_the_same(kafka: _SaslKafka,
                             scenario: Callable[[tuple[str, int]], None]) -> None:
    scenario(("127.0.0.1", kafka.auth_port))


def test_the_java_client_reauthenticates_on_pybroker(tmp_path: Path) -> None:
    """kafka-console-producer, fed a line every 0.2 s for four lifetimes: every record lands,
    and the broker saw SaslHandshakes from a session already authenticated as alice (a new
    connection's is ANONYMOUS's) — the Java client re-authenticated, on pybroker."""
    try:
        kafka_tools.classpath()
    except ApacheKafkaUnavailable as exc:
        pytest.fail(f"Kafka's tools are unavailable: {exc}", pytrace=False)
    settings = {key.replace(".", "_"): value for key, value in SETTINGS.items()}
    with broker_in_thread(tmp_path / "data", hooks=True,
                          listeners=f"PLAINTEXT://127.0.0.1:0,{LISTENER}://127.0.0.1:0",
                          listener_security_protocol_map=f"PLAINTEXT:PLAINTEXT,"
                                                         f"{LISTENER}:SASL_PLAINTEXT",
                          **settings) as info:
        plain = f"127.0.0.1:{info.ports['PLAINTEXT']}"
        create_topic(plain, "reauth-java")
        client = tmp_path / "client.properties"
        client.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
            'required username="alice" password="alice-secret";\n')
        producer = subprocess.Popen(kafka_tools.command("kafka-console-producer", [
            "--bootstrap-server", f"127.0.0.1:{info.ports[LISTENER]}", "--topic", "reauth-java",
            "--producer.config", str(client)]), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert producer.stdin is not None
        sent = 0
        deadline = time.monotonic() + 4 * LIFETIME_MS / 1000 + 5  # + the JVM's start
        while time.monotonic() < deadline:
            producer.stdin.write(f"line {sent}\n")
            producer.stdin.flush()
            sent += 1
            time.sleep(0.2)
        out, err = producer.communicate(timeout=60)
        assert producer.returncode == 0, err[-3000:]
        assert list_offset(plain, "reauth-java", 0) == sent, err[-3000:]
        hooks: Any = info.hooks
        again = [r for r in hooks.requests
                 if r.api_key == ApiKey.SASL_HANDSHAKE and r.principal == "User:alice"]
        assert len(again) >= 2, err[-3000:]
