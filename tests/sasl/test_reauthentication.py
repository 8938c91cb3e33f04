"""KIP-368's rules in the SASL state machine, with time passed in (no clock, no network):
when a handshake may begin re-authentication, and what a re-authentication may change."""
from __future__ import annotations

import pytest

from pybroker.config import ConfigError, load_broker_config
from pybroker.config.sasl import SaslListenerConfig
from pybroker.security.sasl.authenticator import SaslAuthenticator, SaslState
from pybroker.security.sasl.mechanisms import AuthenticationFailed

CONFIG = SaslListenerConfig(("PLAIN", "SCRAM-SHA-256"),
                            reauth_ms_by_mechanism={"PLAIN": 1500, "SCRAM-SHA-256": 0},
                            plain_users={"alice": "a", "bob": "b"})


def _authenticated(user: str = "alice", password: str = "a") -> SaslAuthenticator:
    sasl = SaslAuthenticator(CONFIG, lambda user, mechanism: None)
    assert sasl.handshake("PLAIN", 1, now=0.0)
    sasl.authenticate(b"\0" + user.encode() + b"\0" + password.encode())
    assert sasl.complete
    return sasl


def test_only_a_session_with_a_lifetime_reauthenticates_and_at_most_once_a_second() -> None:
    sasl = _authenticated()
    assert sasl.session_lifetime_ms() == 1500
    assert not sasl.may_reauthenticate(5.0, expiring=False)
    assert sasl.may_reauthenticate(0.1, expiring=True)  # the first: whenever
    assert sasl.handshake("PLAIN", 1, now=10.0) and sasl.state is SaslState.AUTHENTICATE
    assert not sasl.may_reauthenticate(10.5, expiring=True)  # mid-exchange
    sasl.authenticate(b"\0alice\0a")
    assert not sasl.may_reauthenticate(10.999, expiring=True)
    assert sasl.may_reauthenticate(11.0, expiring=True)


def test_the_principal_may_not_change() -> None:
    sasl = _authenticated()
    sasl.handshake("PLAIN", 1, now=1.0)
    with pytest.raises(AuthenticationFailed, match="Cannot change principals during "
                                                   "re-authentication from User.alice: "
                                                   "User.bob"):
        sasl.authenticate(b"\0bob\0b")
    assert sasl.state is SaslState.FAILED


def test_another_mechanism_is_accepted_at_the_handshake_and_ends_the_exchange() -> None:
    sasl = _authenticated()
    assert sasl.handshake("SCRAM-SHA-256", 1, now=1.0)
    assert sasl.state is SaslState.BAD_MECHANISM
    sasl = _authenticated()
    assert not sasl.handshake("GSSAPI", 1, now=1.0)  # not enabled: refused as at first
    assert sasl.state is SaslState.FAILED


def test_a_mechanisms_own_lifetime_wins_over_the_listeners_and_the_brokers() -> None:
    config = load_broker_config(None, {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:9093",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                            'required user_alice="a";',
        "connections.max.reauth.ms": "60000",
        "listener.name.sasl_plaintext.connections.max.reauth.ms": "30000",
        "listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms": "1000"})
    assert config.warnings == ()
    listener = config.sasl_listeners["SASL_PLAINTEXT"]
    assert [listener.reauth_ms(m) for m in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")] == \
        [30000, 1000, 30000]


@pytest.mark.parametrize("value", ["-1", "soon"])
def test_a_mechanisms_lifetime_is_validated(value: str) -> None:
    key = "listener.name.sasl_plaintext.plain.connections.max.reauth.ms"
    with pytest.raises(ConfigError, match=key):
        load_broker_config(None, {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:9093", "sasl.enabled.mechanisms": "PLAIN",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                'required user_alice="a";', key: value})
