"""One connection's SASL state, as Kafka's SaslServerAuthenticator keeps it.

Before authentication a connection may send ApiVersions and SaslHandshake; after a handshake
v1 the tokens come in SaslAuthenticate requests, after a handshake v0 (older clients) as raw
size-prefixed frames with no Kafka header. Success names the user; a failure, or a SASL
request out of order, is answered and the connection closed.

Re-authentication (KIP-368), as Kafka's KafkaChannel and SaslServerAuthenticator allow it: the
session's lifetime is the shortest of connections.max.reauth.ms (of the mechanism) and the
credential's own (a token's expiry); only a session with a lifetime may re-authenticate, at
most once a second (`may_reauthenticate`), by a new SaslHandshake and exchange on the same
connection. The principal must stay the same (else SASL_AUTHENTICATION_FAILED); a handshake
naming another enabled mechanism is answered, and the exchange's next frame then closes the
connection unanswered (Kafka's REAUTH_BAD_MECHANISM).
"""
from __future__ import annotations

import enum
from typing import Callable

from pybroker.config.sasl import OAUTHBEARER, PLAIN, SaslListenerConfig
from pybroker.security.sasl.mechanisms import (
    AuthenticationFailed, OAuthBearerUnsecuredServer, PlainServer, SaslServer, ScramServer,
)
from pybroker.security.sasl.scram_credentials import ScramCredential

ScramLookup = Callable[[str, str], "ScramCredential | None"]


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"          # waiting for SaslHandshake (ApiVersions allowed)
    AUTHENTICATE = "authenticate"    # handshake v1 done: SaslAuthenticate requests
    RAW_TOKEN = "raw_token"          # handshake v0 done: raw size-prefixed tokens
    COMPLETE = "complete"
    BAD_MECHANISM = "bad_mechanism"  # re-authentication named another mechanism: next frame closes
    FAILED = "failed"


# Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS.
MIN_REAUTH_INTERVAL_S = 1.0


class IllegalSaslState(Exception):
    """A SASL request out of order (ILLEGAL_SASL_STATE); the connection is closed."""


class SaslAuthenticator:
    def __init__(self, config: SaslListenerConfig, scram_lookup: ScramLookup) -> None:
        self.config = config
        self._scram_lookup = scram_lookup
        self.state = SaslState.HANDSHAKE
        self.mechanism: str | None = None
        self.user: str | None = None  # the authenticated user, kept across re-authentication
        self.reauthenticating = False  # the current (or last) exchange re-authenticates
        self._reauth_started: float | None = None  # when the last re-authentication began
        self._server: SaslServer | None = None

    @property
    def raw_tokens(self) -> bool:
        return self.state is SaslState.RAW_TOKEN

    def may_reauthenticate(self, now: float, expiring: bool) -> bool:
        """Whether a SaslHandshake arriving at `now` (monotonic seconds) begins re-authenticating
        a session that has a lifetime (`expiring`). When not, Kafka serves the handshake as an
        ordinary request: ILLEGAL_SASL_STATE, the connection kept (unless it has expired)."""
        return (self.state is SaslState.COMPLETE and expiring
                and (self._reauth_started is None
                     or now - self._reauth_started >= MIN_REAUTH_INTERVAL_S))

    def handshake(self, mechanism: str, version: int, now: float) -> bool:
        """Whether `mechanism` is offered; on a match the exchange starts. On a complete
        session the caller has checked `may_reauthenticate`: this begins re-authentication."""
        if self.state not in (SaslState.HANDSHAKE, SaslState.COMPLETE):
            raise IllegalSaslState("Unexpected SaslHandshake request during SASL authentication")
        if mechanism not in self.config.mechanisms:
            self.state = SaslState.FAILED
            return False
        if self.state is SaslState.COMPLETE:
            self.reauthenticating, self._reauth_started = True, now
            if mechanism != self.mechanism:
                self.state = SaslState.BAD_MECHANISM
                return True
        self.mechanism = mechanism
        self._server = self._new_server(mechanism)
        self.state = SaslState.AUTHENTICATE if version >= 1 else SaslState.RAW_TOKEN
        return True

    def authenticate(self, token: bytes) -> bytes:
        """The server's answer to one client token; AuthenticationFailed ends the exchange."""
        if self.state not in (SaslState.AUTHENTICATE, SaslState.RAW_TOKEN) or self._server is None:
            raise IllegalSaslState("Unexpected SaslAuthenticate request: no SASL handshake "
                                   "has selected a mechanism")
        try:
            challenge = self._server.evaluate(token)
            if self._server.complete and self.user is not None \
                    and self._server.user != self.user:
                raise AuthenticationFailed(
                    "Cannot change principals during re-authentication from "
                    f"User.{self.user}: User.{self._server.user}")
        except AuthenticationFailed:
            self.state = SaslState.FAILED
            raise
        if self._server.complete:
            self.user = self._server.user
            self.state = SaslState.COMPLETE
        return challenge

    @property
    def complete(self) -> bool:
        return self.state is SaslState.COMPLETE

    def session_lifetime_ms(self) -> int:
        """KIP-368's session lifetime after success; 0 when the session does not expire."""
        limits = [ms for ms in (self.config.reauth_ms(self.mechanism or ""),
                                self._server.lifetime_ms if self._server else None)
                  if ms is not None and ms > 0]
        return min(limits) if limits else 0

    def _new_server(self, mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            return PlainServer(self.config.plain_users)
        if mechanism == OAUTHBEARER:
            return OAuthBearerUnsecuredServer(self.config.oauth_options)
        return ScramServer(mechanism, self._scram_lookup, self.reauthenticating)
