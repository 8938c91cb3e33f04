"""Our tools over TLS and SASL (issue #13): the --command-config / --producer.config /
--consumer.config properties Kafka's tools take (security.protocol, ssl.truststore.*,
ssl.keystore.*, sasl.mechanism, sasl.jaas.config) reach pybroker's client. One broker serves
every kind of listener: SSL requiring a client certificate, SSL without, SASL_SSL (SCRAM),
SASL_PLAINTEXT (PLAIN, OAUTHBEARER), with ACLs on. A wrong password or a missing certificate is
a one-line error and exit code 1, at once."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import trustme

from tests.helpers import serving_broker
from pybroker.tools import acls, configs, console_consumer, console_producer, topics

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
CLIENT_DN = "CN=alice,OU=eng,O=acme"


class Certs:
    def __init__(self, root: Path) -> None:
        ca = trustme.CA()
        self.ca = self._write(root, "ca.pem", ca.cert_pem.bytes())
        server = ca.issue_cert("localhost", "127.0.0.1")
        self.server = self._write(root, "server.pem",
                                  server.private_key_and_cert_chain_pem.bytes())
        leaf = ca.issue_cert("alice.example", common_name="alice",
                             organization_unit_name="eng", organization_name="acme")
        self.client = self._write(root, "client.pem", leaf.private_key_and_cert_chain_pem.bytes())
        self.client_cert = "".join(b.bytes().decode() for b in leaf.cert_chain_pems)
        self.client_key = leaf.private_key_pem.bytes().decode()
        self.ca_text = ca.cert_pem.bytes().decode()
        # For the OPEN listener: a certificate that does not name the host clients dial.
        elsewhere = ca.issue_cert("broker.elsewhere.example")
        self.elsewhere = self._write(root, "elsewhere.pem",
                                     elsewhere.private_key_and_cert_chain_pem.bytes())

    @staticmethod
    def _write(root: Path, name: str, data: bytes) -> str:
        (root / name).write_bytes(data)
        return str(root / name)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return Certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def broker(certs: Certs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,OPEN://127.0.0.1:0,"
                     "SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,OPEN:SSL,"
                                          "SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "ssl.keystore.location": certs.server, "ssl.truststore.location": certs.ca,
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.open.ssl.keystore.location": certs.elsewhere,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,OAUTHBEARER", "sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
        "super.users": f"User:admin;User:{CLIENT_DN}",
    }
    with serving_broker(tmp_path_factory.mktemp("logs"),
                          **{k.replace(".", "_"): v for k, v in overrides.items()}) as info:
        plain = f"127.0.0.1:{info.ports['PLAINTEXT']}"
        assert configs.main(["--bootstrap-server", plain, "--alter", "--entity-type", "users",
                             "--entity-name", "bob", "--add-config",
                             "SCRAM-SHA-512=[iterations=4096,password=bob-secret]"]) == 0
        yield info


def _props(path: Path, **props: str) -> str:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return str(path)


def _bootstrap(info: Any, listener: str) -> str:
    return f"localhost:{info.ports[listener]}"


def _settings(certs: Certs, kind: str) -> dict[str, str]:
    trust = {"ssl.truststore.location": certs.ca, "ssl.truststore.type": "PEM"}
    return {
        "ssl-cert": {"security.protocol": "SSL", **trust, "ssl.keystore.location": certs.client,
                     "ssl.keystore.type": "PEM"},
        "ssl-open": {"security.protocol": "SSL", **trust,
                     "ssl.endpoint.identification.algorithm": ""},
        "sasl-ssl-scram": {"security.protocol": "SASL_SSL", **trust,
                           "sasl.mechanism": "SCRAM-SHA-512",
                           "sasl.jaas.config": 'org.apache.kafka.common.security.scram.'
                           'ScramLoginModule required username="bob" password="bob-secret";'},
        "sasl-plain": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                       "sasl.jaas.config": 'org.apache.kafka.common.security.plain.'
                       'PlainLoginModule required username="alice" password="alice-secret";'},
    }[kind]


LISTENER = {"ssl-cert": "SSL", "ssl-open": "OPEN", "sasl-ssl-scram": "SASL_SSL",
            "sasl-plain": "SASL_PLAINTEXT"}


@pytest.mark.parametrize("kind", list(LISTENER))
def test_topics_producer_consumer_configs_and_acls(
        kind: str, broker: Any, certs: Certs, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    server = _bootstrap(broker, LISTENER[kind])
    config = _props(tmp_path / "client.properties", **_settings(certs, kind))
    topic = f"secure-{kind}"
    assert topics.main(["--bootstrap-server", server, "--command-config", config, "--create",
                        "--topic", topic, "--partitions", "2"]) == 0
    assert topics.main(["--bootstrap-server", server, "--command-config", config,
                        "--list"]) == 0
    assert topic in capsys.readouterr().out.split()

    input_file = tmp_path / "in.txt"
    input_file.write_text("one\ntwo\n")
    import sys
    stdin, sys.stdin = sys.stdin, open(input_file)
    try:
        assert console_producer.main(["--bootstrap-server", server, "--producer.config", config,
                                      "--topic", topic, "--request-required-acks", "all"]) == 0
    finally:
        sys.stdin.close()
        sys.stdin = stdin
    assert console_consumer.main(["--bootstrap-server", server, "--consumer.config", config,
                                  "--topic", topic, "--from-beginning", "--max-messages", "2",
                                  "--group", f"g-{kind}", "--timeout-ms", "15000"]) == 0
    assert sorted(capsys.readouterr().out.split()) == ["one", "two"]

    assert configs.main(["--bootstrap-server", server, "--command-config", config,
                         "--describe", "--entity-type", "topics", "--entity-name", topic]) == 0
    assert f"Dynamic configs for topic {topic}" in capsys.readouterr().out
    assert acls.main(["--bootstrap-server", server, "--command-config", config, "--add",
                      "--allow-principal", "User:carol", "--operation", "Read",
                      "--topic", topic]) == 0
    capsys.readouterr()
    assert acls.main(["--bootstrap-server", server, "--command-config", config, "--list",
                      "--topic", topic]) == 0
    assert "User:carol" in capsys.readouterr().out


def _fails_fast(tool_args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    started = time.monotonic()
    assert topics.main(tool_args) == 1
    assert time.monotonic() - started < 10
    return capsys.readouterr().err


def test_wrong_password_is_a_clear_error(broker: Any, certs: Certs, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    for kind, props in [("sasl-plain", {"sasl.jaas.config": 'org.apache.kafka.common.security.'
                         'plain.PlainLoginModule required username="alice" password="nope";'}),
                        ("sasl-ssl-scram", {"sasl.jaas.config": 'org.apache.kafka.common.'
                         'security.scram.ScramLoginModule required username="bob" '
                         'password="nope";'})]:
        config = _props(tmp_path / f"{kind}.properties", **{**_settings(certs, kind), **props})
        err = _fails_fast(["--bootstrap-server", _bootstrap(broker, LISTENER[kind]),
                           "--command-config", config, "--list"], capsys)
        assert "Authentication failed" in err, err
        assert "nope" not in err


def test_unenabled_mechanism_names_the_enabled_ones(broker: Any, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    config = _props(tmp_path / "c.properties", **{
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="bob" password="bob-secret";'})
    err = _fails_fast(["--bootstrap-server", _bootstrap(broker, "SASL_PLAINTEXT"),
                       "--command-config", config, "--list"], capsys)
    assert "SCRAM-SHA-256" in err and "PLAIN, SCRAM-SHA-512, OAUTHBEARER" in err, err


def test_required_certificate_missing_or_server_untrusted(
        broker: Any, certs: Certs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    no_cert = _props(tmp_path / "a.properties", **_settings(certs, "ssl-open"))
    err = _fails_fast(["--bootstrap-server", _bootstrap(broker, "SSL"),
                       "--command-config", no_cert, "--list"], capsys)
    assert "SSL handshake failed" in err and "client certificate" in err, err
    other_ca = Certs(tmp_path)  # a CA the broker's certificate does not come from
    untrusted = _props(tmp_path / "b.properties", **{"security.protocol": "SSL",
                                                      "ssl.truststore.location": other_ca.ca})
    err = _fails_fast(["--bootstrap-server", _bootstrap(broker, "OPEN"),
                       "--command-config", untrusted, "--list"], capsys)
    assert "SSL handshake failed" in err and "certificate verify failed" in err, err


def test_the_host_name_is_verified_unless_turned_off(
        broker: Any, certs: Certs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    verified = {**_settings(certs, "ssl-open")}
    del verified["ssl.endpoint.identification.algorithm"]  # Kafka's default: https
    config = _props(tmp_path / "verified.properties", **verified)
    err = _fails_fast(["--bootstrap-server", _bootstrap(broker, "OPEN"), "--command-config",
                       config, "--list"], capsys)
    assert "SSL handshake failed" in err and "Hostname mismatch" in err, err
    unverified = _props(tmp_path / "unverified.properties", **_settings(certs, "ssl-open"))
    assert topics.main(["--bootstrap-server", _bootstrap(broker, "OPEN"), "--command-config",
                        unverified, "--list"]) == 0


def test_inline_pem_and_oauthbearer(broker: Any, certs: Certs, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    one_line = {"security.protocol": "SSL",
                "ssl.truststore.certificates": certs.ca_text.replace("\n", " "),
                "ssl.keystore.certificate.chain": certs.client_cert.replace("\n", " "),
                "ssl.keystore.key": certs.client_key.replace("\n", " ")}
    config = _props(tmp_path / "inline.properties", **one_line)
    assert topics.main(["--bootstrap-server", _bootstrap(broker, "SSL"), "--command-config",
                        config, "--list"]) == 0
    oauth = _props(tmp_path / "oauth.properties", **{
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer."
                            "OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="
                            "\"alice\";"})
    assert topics.main(["--bootstrap-server", _bootstrap(broker, "SASL_PLAINTEXT"),
                        "--command-config", oauth, "--create", "--topic", "oauth-made"]) == 0
    assert topics.main(["--bootstrap-server", _bootstrap(broker, "SASL_PLAINTEXT"),
                        "--command-config", oauth, "--list"]) == 0
    assert "oauth-made" in capsys.readouterr().out.split()


def test_bad_security_properties_are_usage_errors(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    for props, text in [({"security.protocol": "TLS"}, "security.protocol"),
                        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI",
                          "sasl.jaas.config": "x required;"}, "GSSAPI"),
                        ({"security.protocol": "SSL", "ssl.keystore.location": "/nonexistent"},
                         "ssl.keystore.location")]:
        config = _props(tmp_path / "bad.properties", **props)
        assert topics.main(["--bootstrap-server", "127.0.0.1:1", "--command-config", config,
                            "--list"]) == 1
        assert text in capsys.readouterr().err
