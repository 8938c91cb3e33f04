"""Brokers that reach each other securely (issue #13): a 3-broker cluster whose only listener,
the inter-broker one, is SASL_SSL with PLAIN and ACLs on (the brokers' principal a super
user), and one whose inter-broker listener is SSL requiring client certificates. Followers
replicate over it (a topic's ISR fills), an acks=all produce through our tools commits, the
leader is stopped, and everything is consumed from the new leader."""
from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import pytest
import trustme

from pybroker.testing.cluster import Cluster
from pybroker.tools import console_consumer, console_producer

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
        'password="broker-secret" user_broker="broker-secret" user_admin="admin-secret";')


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    paths = {"ca": root / "ca.pem", "server": root / "server.pem"}
    paths["ca"].write_bytes(ca.cert_pem.bytes())
    paths["server"].write_bytes(server.private_key_and_cert_chain_pem.bytes())
    return {k: str(v) for k, v in paths.items()}


def _replicate_and_fail_over(cluster: Cluster, bootstrap: str, props: dict[str, str],
                             tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "client.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    cluster.create_topic("replicated", 1, 3, {"min.insync.replicas": "2"})  # waits for the ISR
    assert set(cluster.isr_of("replicated")) == {0, 1, 2}
    values = [f"m{i}" for i in range(20)]
    (tmp_path / "in.txt").write_text("\n".join(values) + "\n")
    stdin, sys.stdin = sys.stdin, open(tmp_path / "in.txt")
    try:
        assert console_producer.main(["--bootstrap-server", bootstrap, "--producer.config",
                                      str(config), "--topic", "replicated",
                                      "--request-required-acks", "all"]) == 0
    finally:
        sys.stdin.close()
        sys.stdin = stdin
    time.sleep(1.5)  # past replica.lag.time.max.ms: followers that do not fetch leave the ISR
    assert set(cluster.isr_of("replicated")) == {0, 1, 2}
    leader = cluster.leader_of("replicated")
    cluster.stop_broker(leader)
    cluster.wait_until(lambda: cluster.leader_of("replicated") not in (-1, leader),
                       "a new leader")
    capsys.readouterr()
    assert console_consumer.main(["--bootstrap-server", bootstrap, "--consumer.config",
                                  str(config), "--topic", "replicated", "--from-beginning",
                                  "--max-messages", str(len(values)),
                                  "--timeout-ms", "20000"]) == 0
    assert capsys.readouterr().out.split() == values


def test_sasl_ssl_inter_broker_listener_with_acls(pki: dict[str, str], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    with Cluster(3, **{"listeners": "SASL_SSL://127.0.0.1:0",
                       "inter.broker.listener.name": "SASL_SSL",
                       "sasl.mechanism.inter.broker.protocol": "PLAIN",
                       "sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": JAAS,
                       "ssl.keystore.location": pki["server"],
                       "ssl.truststore.location": pki["ca"],
                       "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                       "super.users": "User:broker;User:admin"}) as cluster:
        _replicate_and_fail_over(cluster, cluster.bootstrap_on("SASL_SSL"), {
            "security.protocol": "SASL_SSL", "ssl.truststore.location": pki["ca"],
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                'required username="admin" password="admin-secret";'},
            tmp_path, capsys)


def test_ssl_inter_broker_listener_with_required_client_certificates(
        pki: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Cluster(3, **{"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                       "security.inter.broker.protocol": "SSL",
                       "ssl.client.auth": "required",
                       "ssl.keystore.location": pki["server"],
                       "ssl.truststore.location": pki["ca"]}) as cluster:
        assert cluster.server(0).broker.config.inter_broker_listener_name == "SSL"
        _replicate_and_fail_over(cluster, cluster.bootstrap_on("SSL"), {
            "security.protocol": "SSL", "ssl.truststore.location": pki["ca"],
            "ssl.keystore.location": pki["server"]}, tmp_path, capsys)


def test_a_broker_with_the_wrong_inter_broker_password_does_not_replicate(
        pki: dict[str, str]) -> None:
    wrong = JAAS.replace('password="broker-secret"', 'password="wrong"')
    with Cluster(3, **{"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                       "inter.broker.listener.name": "SASL_PLAINTEXT",
                       "sasl.mechanism.inter.broker.protocol": "PLAIN",
                       "sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": wrong}) as cluster:
        cluster.create_topic("t", 1, 3)  # the ISR starts full, then loses who cannot fetch
        leader = cluster.leader_of("t")
        cluster.wait_until(lambda: cluster.isr_of("t") == (leader,), "the ISR to shrink")


def test_a_sasl_inter_broker_listener_needs_a_served_mechanism_and_credentials(
        pki: dict[str, str]) -> None:
    from pybroker.config import ConfigError, load_broker_config
    from pybroker.security.inter_broker import inter_broker_security
    base = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "log.dirs": "/tmp/unused",
            "inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
            "sasl.jaas.config": JAAS}
    with pytest.raises(ConfigError) as info:
        load_broker_config(None, base)  # sasl.mechanism.inter.broker.protocol: GSSAPI
    assert info.value.key == "sasl.mechanism.inter.broker.protocol" and "PLAIN" in str(info.value)
    config = load_broker_config(None, {**base, "sasl.mechanism.inter.broker.protocol": "PLAIN"})
    security = inter_broker_security(config)
    assert security.sasl is not None and security.sasl.username == "broker"
    no_user = JAAS.replace('username="broker" password="broker-secret" ', "")
    config = load_broker_config(None, {**base, "sasl.mechanism.inter.broker.protocol": "PLAIN",
                                       "sasl.jaas.config": no_user})
    with pytest.raises(ConfigError) as info:
        inter_broker_security(config)
    assert "username" in str(info.value) and "broker-secret" not in str(info.value)


def test_followers_reauthenticate_on_a_sasl_inter_broker_listener(
        caplog: pytest.LogCaptureFixture) -> None:
    """connections.max.reauth.ms=1500: the follower's fetcher re-authenticates its one
    connection to the leader (pybroker's client, KIP-368) instead of the leader closing it
    at each expiry. Four lifetimes of replication: the ISR stays full and no session expired
    on either broker (the leader logs each connection it closes)."""
    caplog.set_level(logging.WARNING, logger="pybroker.network.connection")
    with Cluster(2, **{"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                       "inter.broker.listener.name": "SASL_PLAINTEXT",
                       "sasl.mechanism.inter.broker.protocol": "PLAIN",
                       "sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": JAAS,
                       "connections.max.reauth.ms": "1500"}) as cluster:
        cluster.create_topic("reauth", 1, 2)  # waits for the ISR
        time.sleep(6)
        assert set(cluster.isr_of("reauth")) == {0, 1}
    expired = [r.getMessage() for r in caplog.records if "expired" in r.getMessage()]
    assert expired == []
