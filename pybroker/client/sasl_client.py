"""The client side of SASL: SaslHandshake v1, then SaslAuthenticate rounds until done.

As Kafka's SaslClientAuthenticator: after ApiVersions the client names its mechanism in
SaslHandshake v1 (v0's raw token frames are not spoken), then sends each token wrapped in
SaslAuthenticate. PLAIN is one token; SCRAM's four messages go through scramp's client, which
also checks the server's signature, so a broker that does not know the password cannot pass
itself off; OAUTHBEARER sends an unsecured JWS and, told why it was refused, answers %x01 as
RFC 7628 asks, so the broker ends the exchange with its message.

A refusal is raised as KafkaError(SASL_AUTHENTICATION_FAILED) with the broker's message
(Kafka's text: "Authentication failed: Invalid username or password"); a mechanism the broker
does not enable, KafkaError(UNSUPPORTED_SASL_MECHANISM) naming those it does. Neither is
retriable, so a tool reports it at once rather than retrying into its timeout.
"""
from __future__ import annotations

from typing import Any, Mapping, Protocol

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError
from pybroker.client.security import SaslCredentials, unsecured_jws



class _Connection(Protocol):
    """What authentication needs of a BrokerConnection (which imports this module)."""

    @property
    def address(self) -> str: ...

    async def request(self, api_key: int, body: Mapping[str, Any], *,
                      version: int | None = None, min_version: int | None = None,
                      max_version: int | None = None) -> Container: ...

__all__ = ["authenticate"]

_AUTH_FAILED = "Authentication failed during authentication due to invalid credentials with " \
               "SASL mechanism {}"


class _Exchange:
    """One mechanism's client: `first()` token, then `next(challenge)`: the next token, or
    None when the exchange is complete."""

    def first(self) -> bytes:
        raise NotImplementedError

    def next(self, challenge: bytes) -> bytes | None:
        return None


class _Plain(_Exchange):
    def __init__(self, creds: SaslCredentials) -> None:
        self._creds = creds

    def first(self) -> bytes:
        return b"\x00" + self._creds.username.encode() + b"\x00" + self._creds.password.encode()


class _Scram(_Exchange):
    def __init__(self, creds: SaslCredentials) -> None:
        # scramp (and the asn1crypto it pulls in) only once a SCRAM login happens: the
        # broker imports this module for its inter-broker connections, and its start should
        # not pay ~10 ms for a mechanism most deployments never use.
        import scramp
        self._scramp = scramp
        self._client = scramp.ScramClient([creds.mechanism], creds.username, creds.password)
        self._final_sent = False

    def first(self) -> bytes:
        return self._client.get_client_first().encode()

    def next(self, challenge: bytes) -> bytes | None:
        try:
            if not self._final_sent:
                self._client.set_server_first(challenge.decode())
                self._final_sent = True
                return self._client.get_client_final().encode()
            self._client.set_server_final(challenge.decode())
        except (self._scramp.ScramException, UnicodeDecodeError) as exc:
            raise KafkaError(ErrorCode.SASL_AUTHENTICATION_FAILED,
                             f"Authentication failed: the broker's SCRAM answer is not valid "
                             f"({exc})") from None
        return None


class _OAuthBearer(_Exchange):
    def __init__(self, creds: SaslCredentials) -> None:
        self._creds = creds

    def first(self) -> bytes:
        jws = unsecured_jws(self._creds.oauth_options)
        return f"n,,\x01auth=Bearer {jws}\x01\x01".encode()

    def next(self, challenge: bytes) -> bytes | None:
        # RFC 7628: a refusal comes as an error JSON, answered with %x01; the broker then
        # ends the exchange with its message.
        return b"\x01" if challenge else None


def _exchange(creds: SaslCredentials) -> _Exchange:
    if creds.mechanism == "PLAIN":
        return _Plain(creds)
    if creds.mechanism == "OAUTHBEARER":
        return _OAuthBearer(creds)
    return _Scram(creds)


async def authenticate(conn: _Connection, creds: SaslCredentials) -> int:
    """Authenticate `conn` as `creds`; the session lifetime the broker gave (ms, 0: none)."""
    resp = await conn.request(ApiKey.SASL_HANDSHAKE, {"mechanism": creds.mechanism},
                              version=1)
    if resp.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
        raise KafkaError(ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                         f"Client SASL mechanism '{creds.mechanism}' not enabled in the "
                         f"server, enabled mechanisms are [{', '.join(resp.mechanisms)}]")
    if resp.error_code:
        raise KafkaError(resp.error_code, f"SaslHandshake failed at {conn.address}")
    exchange = _exchange(creds)
    token: bytes | None = exchange.first()
    lifetime = 0
    while token is not None:
        resp = await conn.request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token},
                                  min_version=0, max_version=2)
        if resp.error_code:
            raise KafkaError(resp.error_code,
                             resp.error_message or _AUTH_FAILED.format(creds.mechanism))
        lifetime = int(getattr(resp, "session_lifetime_ms", 0) or 0)
        token = exchange.next(bytes(resp.auth_bytes))
    return lifetime
