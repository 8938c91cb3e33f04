"""KIP-368 re-authentication on the wire: what a broker does with a SASL session over time.

The same scenarios run against pybroker (tests/integration/test_sasl_reauth.py) and against
Apache Kafka 4.1.1 (tests/reference/test_sasl_reauth_kafka.py), both configured with
`SETTINGS` on a SASL_PLAINTEXT listener named AUTH: PLAIN sessions last LIFETIME_MS (the
per-listener, per-mechanism key), SCRAM-SHA-256 sessions never expire (the broker-wide key
left at 0). Each scenario speaks raw frames on one socket, so nothing re-authenticates
unless the scenario does. Waits are past the lifetime with a wide margin, never races
against it: a session is only ever checked well after it expired, or right after it began.
"""
from __future__ import annotations

import socket
import time
from typing import Any

from compat.wire import encode_request, read_exact, read_frame
from protocol.api_keys import ApiKey
from protocol.codec import decode_response
from protocol.errors import ErrorCode

LISTENER = "AUTH"
LIFETIME_MS = 1500
PAST_LIFETIME_S = LIFETIME_MS / 1000 + 0.7  # also more than Kafka's 1 s between re-auths
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="alice" password="alice-secret" user_alice="alice-secret" '
              'user_bob="bob-secret";')
SCRAM_USER, SCRAM_PASSWORD = "carol", "carol-secret"
SETTINGS = {
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
    "listener.name.auth.plain.sasl.jaas.config": PLAIN_JAAS,
    "listener.name.auth.scram-sha-256.sasl.jaas.config":
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    "listener.name.auth.plain.connections.max.reauth.ms": str(LIFETIME_MS),
}
METADATA = (ApiKey.METADATA, 9, {"topics": [], "allow_auto_topic_creation": False})
API_VERSIONS = (ApiKey.API_VERSIONS, 3, {"client_software_name": "reauth",
                                         "client_software_version": "1"})


class RawSession:
    """One socket to the SASL listener; `send` answers the decoded response, or None once
    the broker has closed the connection."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=15)
        self._cid = 0

    def __enter__(self) -> "RawSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def send(self, api_key: int, version: int, body: dict) -> Any:
        self._cid += 1
        try:
            self.sock.sendall(encode_request(api_key, version, self._cid, "reauth", body))
            return decode_response(api_key, version, read_frame(self.sock))[1]
        except (ConnectionError, OSError):
            return None

    def handshake(self, mechanism: str, version: int = 1) -> Any:
        return self.send(ApiKey.SASL_HANDSHAKE, version, {"mechanism": mechanism})

    def token(self, data: bytes) -> Any:
        return self.send(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": data})

    def metadata(self) -> Any:
        return self.send(*METADATA)

    def plain(self, user: str = "alice", password: str = "alice-secret") -> Any:
        """Handshake and one PLAIN token; the SaslAuthenticate answer."""
        assert self.handshake("PLAIN").error_code == 0
        return self.token(b"\0" + user.encode() + b"\0" + password.encode())

    def scram(self) -> Any:
        """A SCRAM-SHA-256 exchange as SCRAM_USER; the last SaslAuthenticate answer."""
        import scramp
        client = scramp.ScramClient(["SCRAM-SHA-256"], SCRAM_USER, SCRAM_PASSWORD)
        assert self.handshake("SCRAM-SHA-256").error_code == 0
        first = self.token(client.get_client_first().encode())
        assert first.error_code == 0, first
        client.set_server_first(bytes(first.auth_bytes).decode())
        final = self.token(client.get_client_final().encode())
        assert final.error_code == 0, final
        client.set_server_final(bytes(final.auth_bytes).decode())
        return final


def lifetime_comes_from_the_mechanisms_key(address: tuple[str, int]) -> None:
    with RawSession(address) as s:
        assert s.plain().session_lifetime_ms == LIFETIME_MS
    with RawSession(address) as s:
        assert s.scram().session_lifetime_ms == 0


def an_expired_session_is_closed_at_its_next_request(address: tuple[str, int]) -> None:
    with RawSession(address) as s:
        assert s.plain().error_code == 0
        assert s.metadata() is not None
        time.sleep(PAST_LIFETIME_S)
        assert s.metadata() is None


def a_session_without_lifetime_never_expires(address: tuple[str, int]) -> None:
    with RawSession(address) as s:
        s.scram()
        time.sleep(PAST_LIFETIME_S)
        assert s.metadata() is not None


def reauthenticating_keeps_the_connection_past_several_lifetimes(
        address: tuple[str, int]) -> None:
    """Each re-authentication comes after the session expired: the broker still accepts a
    SaslHandshake that begins one (Kafka's SocketServer asks before checking expiry)."""
    with RawSession(address) as s:
        assert s.plain().error_code == 0
        for _ in range(3):
            time.sleep(PAST_LIFETIME_S)
            again = s.plain()
            assert again.error_code == 0 and again.session_lifetime_ms == LIFETIME_MS
            assert s.metadata() is not None


def without_a_lifetime_sasl_requests_are_refused_and_the_connection_kept(
        address: tuple[str, int]) -> None:
    with RawSession(address) as s:
        s.scram()
        handshake = s.handshake("SCRAM-SHA-256")
        assert handshake.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert list(handshake.mechanisms) == []
        token = s.token(b"n,,n=carol,r=abc")
        assert token.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert token.error_message == ("SaslAuthenticate request received after successful "
                                       "authentication")
        assert s.metadata() is not None


def the_principal_must_not_change(address: tuple[str, int]) -> None:
    with RawSession(address) as s:
        assert s.plain().error_code == 0
        refused = s.plain("bob", "bob-secret")
        assert refused.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert refused.error_message == ("Cannot change principals during re-authentication "
                                         "from User.alice: User.bob")
        assert s.metadata() is None


def a_failed_reauthentication_closes_the_connection(address: tuple[str, int]) -> None:
    with RawSession(address) as s:
        assert s.plain().error_code == 0
        refused = s.plain("alice", "wrong")
        assert refused.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert refused.error_message == "Authentication failed: Invalid username or password"
        assert s.metadata() is None


def the_mechanism_must_not_change(address: tuple[str, int]) -> None:
    """Kafka answers the handshake, then closes at the exchange's first token."""
    with RawSession(address) as s:
        assert s.plain().error_code == 0
        assert s.handshake("SCRAM-SHA-256").error_code == 0
        assert s.token(b"n,,n=alice,r=abc") is None


def only_the_exchange_is_served_while_reauthenticating(address: tuple[str, int]) -> None:
    """Another request is answered with its error body (Metadata has no error code: an
    empty answer), then the connection closed; the same during a first exchange."""
    with RawSession(address) as s:
        assert s.plain().error_code == 0
        assert s.handshake("PLAIN").error_code == 0
        refused = s.metadata()
        assert refused is not None and list(refused.brokers) == []
        assert s.metadata() is None
    with RawSession(address) as s:
        assert s.handshake("PLAIN").error_code == 0
        versions = s.send(*API_VERSIONS)
        assert versions.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert s.send(*API_VERSIONS) is None


def a_v0_handshake_reauthenticates_with_raw_tokens(address: tuple[str, int]) -> None:
    with RawSession(address) as s:
        assert s.plain().error_code == 0
        assert s.handshake("PLAIN", version=0).error_code == 0
        token = b"\0alice\0alice-secret"
        s.sock.sendall(len(token).to_bytes(4, "big") + token)
        assert read_exact(s.sock, 4) == b"\0\0\0\0"  # PLAIN's empty challenge, size-prefixed
        assert s.metadata() is not None


SCENARIOS = [lifetime_comes_from_the_mechanisms_key,
             an_expired_session_is_closed_at_its_next_request,
             a_session_without_lifetime_never_expires,
             reauthenticating_keeps_the_connection_past_several_lifetimes,
             without_a_lifetime_sasl_requests_are_refused_and_the_connection_kept,
             the_principal_must_not_change,
             a_failed_reauthentication_closes_the_connection,
             the_mechanism_must_not_change,
             only_the_exchange_is_served_while_reauthenticating,
             a_v0_handshake_reauthenticates_with_raw_tokens]
