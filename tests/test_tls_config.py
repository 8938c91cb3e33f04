"""TLS configuration without a broker: Kafka's principal mapping rules and DN form, the ssl.*
keys' start errors, per-listener overrides, and sensitive values kept out of sight."""
from __future__ import annotations

from pathlib import Path

import pytest

from pybroker.config import ConfigError, describe_broker_config, load_broker_config
from pybroker.security.tls_context import tls_listener
from pybroker.security.tls_principal import NoMatchingRule, PrincipalMapper, rfc2253

import trustme


def test_subject_in_javas_rfc2253_form() -> None:
    subject = ((("countryName", "US"),), (("organizationName", "Acme, Inc."),),
               (("organizationalUnitName", "eng"), ("commonName", "alice")),
               (("emailAddress", "a@b.c"),))
    assert rfc2253(subject) == ("1.2.840.113549.1.9.1=#16056140622e63,"
                                "OU=eng+CN=alice,O=Acme\\, Inc.,C=US")


@pytest.mark.parametrize("rules, dn, name", [
    ("DEFAULT", "CN=alice,OU=eng", "CN=alice,OU=eng"),
    ("RULE:^CN=(.*?),OU=(.*?)$/$1@$2/L, DEFAULT", "CN=Alice,OU=Eng", "alice@eng"),
    ("RULE:^CN=(.*?),OU=(.*?)$/$1/U", "CN=alice,OU=eng", "ALICE"),
    ("RULE:^CN=([^,]*).*$/$1/, DEFAULT", "OU=x", "OU=x"),  # first rule misses: DEFAULT
    ("RULE:^CN=(.*)$/x\\/$1/", "CN=a", "x/a"),               # an escaped slash
    ("RULE:^CN=(.*)$/$2/", "CN=a", "$2"),                    # no group 2: literal, as Kafka
])
def test_principal_mapping_rules(rules: str, dn: str, name: str) -> None:
    assert PrincipalMapper(rules).name(dn) == name


def test_no_rule_matching_and_bad_rules() -> None:
    with pytest.raises(NoMatchingRule):
        PrincipalMapper("RULE:^CN=(.*)$/$1/").name("OU=eng")
    for bad in ("RULE:^CN/", "NOPE", "RULE:(/x/"):
        with pytest.raises(ValueError):
            PrincipalMapper(bad)


@pytest.fixture(scope="module")
def pems(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("pems")
    ca = trustme.CA()
    leaf = ca.issue_cert("localhost")
    paths = {"ca": ca.cert_pem.bytes(), "server": leaf.private_key_and_cert_chain_pem.bytes(),
             "chain": b"".join(b.bytes() for b in leaf.cert_chain_pems),
             "key": leaf.private_key_pem.bytes()}
    for name, data in paths.items():
        (root / f"{name}.pem").write_bytes(data)
    return {name: str(root / f"{name}.pem") for name in paths}


def _build(**props: str) -> object:
    config = load_broker_config(None, {"listeners": "SSL://127.0.0.1:0",
                                       "inter.broker.listener.name": "SSL", **props})
    return tls_listener(config, "SSL")


def test_inline_pem_on_one_line_and_per_listener_overrides(pems: dict[str, str]) -> None:
    key = Path(pems["key"]).read_text().replace("\n", " ")
    chain = Path(pems["chain"]).read_text().replace("\n", " ")
    assert _build(**{"ssl.keystore.key": key, "ssl.keystore.certificate.chain": chain})
    # The listener's own keys win over the broker-wide ones (here: a missing file).
    assert _build(**{"ssl.keystore.location": "/nonexistent.pem",
                     "listener.name.ssl.ssl.keystore.location": pems["server"]})
    config = load_broker_config(None, {"listeners": "SSL://127.0.0.1:0",
                                       "inter.broker.listener.name": "SSL",
                                       "listener.name.ssl.ssl.client.auth": "required"})
    assert config.for_listener("SSL", "ssl.client.auth") == "required"
    assert config["ssl.client.auth"] == "none" and not config.warnings


@pytest.mark.parametrize("props, key, words", [
    ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type", "PEM"),
    ({"ssl.truststore.type": "PKCS12"}, "ssl.truststore.type", "PEM"),
    ({}, "ssl.keystore.location", "needs its key"),
    ({"ssl.keystore.location": "/nonexistent.pem"}, "ssl.keystore.location", "No such file"),
    ({"ssl.keystore.location": "CA"}, "ssl.keystore.location", "Cannot load"),
    ({"ssl.keystore.location": "SERVER", "ssl.client.auth": "required",
      "ssl.truststore.location": "/nonexistent.pem"}, "ssl.truststore.location", "Cannot load"),
    ({"ssl.keystore.location": "SERVER", "ssl.principal.mapping.rules": "RULE:oops"},
     "ssl.principal.mapping.rules", "Invalid rule"),
    ({"listener.name.ssl.ssl.keystore.type": "JKS"}, "listener.name.ssl.ssl.keystore.type",
     "PEM"),
    ({"ssl.keystore.location": "SERVER", "ssl.keystore.password": "x"},
     "ssl.keystore.password", "ssl.key.password"),
    ({"ssl.keystore.location": "SERVER", "ssl.truststore.password": "x"},
     "ssl.truststore.password", "no store password"),
    ({"ssl.keystore.location": "SERVER", "ssl.cipher.suites": "NOT-A-CIPHER"},
     "ssl.cipher.suites", "OpenSSL names"),
])
def test_unusable_settings_are_start_errors_naming_the_key(
        pems: dict[str, str], props: dict[str, str], key: str, words: str) -> None:
    props = {k: {"CA": pems["ca"], "SERVER": pems["server"]}.get(v, v)
             for k, v in props.items()}
    with pytest.raises(ConfigError) as caught:
        _build(**props)
    assert caught.value.key == key and words in str(caught.value), str(caught.value)


def test_encrypted_key_with_its_password(pems: dict[str, str], tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    key = serialization.load_pem_private_key(Path(pems["key"]).read_bytes(), None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(b"s3cret"))
    path = tmp_path / "enc.pem"
    path.write_bytes(encrypted + Path(pems["chain"]).read_bytes())
    assert _build(**{"ssl.keystore.location": str(path), "ssl.key.password": "s3cret"})
    with pytest.raises(ConfigError, match="encrypted"):
        _build(**{"ssl.keystore.location": str(path)})
    with pytest.raises(ConfigError, match="wrong ssl.key.password"):
        _build(**{"ssl.keystore.location": str(path), "ssl.key.password": "nope"})


def test_sensitive_values_never_shown() -> None:
    config = load_broker_config(None, {"ssl.key.password": "s3cret",
                                       "listener.name.ssl.ssl.keystore.key": "PRIVATE"})
    assert "s3cret" not in repr(config) and "PRIVATE" not in repr(config)
    rows = {row.name: row for row in describe_broker_config(config)}
    for name in ("ssl.key.password", "listener.name.ssl.ssl.keystore.key"):
        assert rows[name].is_sensitive and rows[name].value is None
        assert all(s.value is None for s in rows[name].synonyms)
    assert not rows["ssl.client.auth"].is_sensitive
    assert rows["ssl.client.auth"].value == "none"


def test_sasl_listeners_stay_refused() -> None:
    with pytest.raises(ConfigError, match="SASL"):
        load_broker_config(None, {"listeners": "SASL_SSL://127.0.0.1:0",
                                  "inter.broker.listener.name": "SASL_SSL"})


def test_versions_ciphers_and_inline_trust_reach_the_context(pems: dict[str, str]) -> None:
    import ssl
    built = _build(**{"ssl.keystore.location": pems["server"],
                      "ssl.enabled.protocols": "TLSv1.3",
                      "ssl.cipher.suites": "ECDHE-ECDSA-AES128-GCM-SHA256",
                      "ssl.client.auth": "requested",
                      "ssl.truststore.certificates": Path(pems["ca"]).read_text()})
    context = built.context  # type: ignore[attr-defined]
    assert context.minimum_version == context.maximum_version == ssl.TLSVersion.TLSv1_3
    tls12 = [c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 == ["ECDHE-ECDSA-AES128-GCM-SHA256"]
    assert context.verify_mode == ssl.CERT_OPTIONAL
    assert len(context.get_ca_certs()) == 1
