"""Kafka's client security properties read into ClientSecurity (pybroker/client/security.py):
what each protocol needs, the JAAS lines a client logs in with, the unsecured OAUTHBEARER token,
and errors that name the property but never the secret."""
from __future__ import annotations

import base64
import json

import pytest

from pybroker.client.security import (
    SecurityConfigError, client_security, sasl_credentials, unsecured_jws)

SCRAM = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" '
         'password="s3cret";')


def test_plaintext_by_default_and_protocols_are_case_insensitive() -> None:
    assert client_security({}).protocol == "PLAINTEXT"
    security = client_security({"security.protocol": "sasl_plaintext",
                                "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": SCRAM})
    assert security.uses_sasl and not security.uses_tls and security.ssl_context is None
    assert security.sasl is not None and security.sasl.username == "bob"
    assert "s3cret" not in repr(security)


def test_ssl_verifies_the_host_name_unless_the_algorithm_is_empty() -> None:
    assert client_security({"security.protocol": "SSL"}).ssl_context.check_hostname
    off = client_security({"security.protocol": "SSL",
                           "ssl.endpoint.identification.algorithm": ""})
    assert not off.check_hostname and not off.ssl_context.check_hostname


@pytest.mark.parametrize("props, named", [
    ({"security.protocol": "KERBEROS"}, "security.protocol"),
    ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "ldap"},
     "ssl.endpoint.identification.algorithm"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "JKS"}, "ssl.truststore.type"),
    ({"security.protocol": "SSL", "ssl.keystore.key": "x"}, "ssl.keystore.certificate.chain"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/nonexistent"},
     "ssl.truststore.location"),
    ({"security.protocol": "SASL_SSL"}, "GSSAPI"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": SCRAM}, "PlainLoginModule"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
      "sasl.jaas.config": SCRAM.replace('password="s3cret"', "")}, "password"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
      "sasl.jaas.config": SCRAM.rstrip(";")}, "sasl.jaas.config"),
])
def test_unusable_properties_name_what_is_wrong(props: dict, named: str) -> None:
    with pytest.raises(SecurityConfigError) as info:
        client_security(props)
    assert named in str(info.value)
    assert "s3cret" not in str(info.value)


def _claims(jws: str) -> dict:
    header, claims, signature = jws.split(".")
    assert json.loads(base64.urlsafe_b64decode(header + "==")) == {"alg": "none"}
    assert signature == ""
    return json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))


def test_the_unsecured_token_carries_kafkas_login_claims() -> None:
    claims = _claims(unsecured_jws({"unsecuredLoginStringClaim_sub": "alice",
                                    "unsecuredLoginListClaim_scope": "|read|write",
                                    "unsecuredLoginNumberClaim_n": "7",
                                    "unsecuredLoginLifetimeSeconds": "60"}, now=lambda: 1000.5))
    assert claims == {"sub": "alice", "scope": ["read", "write"], "n": 7, "iat": 1000,
                      "exp": 1060}
    with pytest.raises(SecurityConfigError, match="unsecuredLoginStringClaim_sub"):
        unsecured_jws({})


def test_oauthbearer_credentials_are_checked_when_read() -> None:
    line = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'unsecuredLoginStringClaim_sub="alice";')
    creds = sasl_credentials("OAUTHBEARER", line, "sasl.jaas.config", "sasl.mechanism")
    assert creds.oauth_options == {"unsecuredLoginStringClaim_sub": "alice"}
    with pytest.raises(SecurityConfigError, match="not a number"):
        sasl_credentials("OAUTHBEARER", line.replace(";", ' unsecuredLoginLifetimeSeconds="x";'),
                         "sasl.jaas.config", "sasl.mechanism")
