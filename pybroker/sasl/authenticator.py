"""One connection's SASL state, as Kafka's SaslServerAuthenticator keeps it.

Before authentication a connection may send ApiVersions and SaslHandshake; after a handshake
v1 the tokens come in SaslAuthenticate requests, after a handshake v0 (older clients) as raw
size-prefixed frames with no Kafka header. Success names the user; a failure, or a SASL
request out of order, is answered and the connection closed. Once authenticated, a client
may re-authenticate (KIP-368) with the same mechanism and principal; the session's lifetime
is the shortest of connections.max.reauth.ms and the credential's own (a token's expiry).
"""
from __future__ import annotations

import enum
from typing import Callable

from pybroker.config.sasl import OAUTHBEARER, PLAIN, SaslListenerConfig
from pybroker.sasl.mechanisms import (
    AuthenticationFailed, OAuthBearerUnsecuredServer, PlainServer, SaslServer, ScramServer,
)
from pybroker.sasl.scram_credentials import ScramCredential

ScramLookup = Callable[[str, str], "ScramCredential | None"]


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"          # waiting for SaslHandshake (ApiVersions allowed)
    AUTHENTICATE = "authenticate"    # handshake v1 done: SaslAuthenticate requests
    RAW_TOKEN = "raw_token"          # handshake v0 done: raw size-prefixed tokens
    COMPLETE = "complete"
    FAILED = "failed"


class IllegalSaslState(Exception):
    """A SASL request out of order (ILLEGAL_SASL_STATE); the connection is closed."""


class SaslAuthenticator:
    def __init__(self, config: SaslListenerConfig, scram_lookup: ScramLookup) -> None:
        self.config = config
        self._scram_lookup = scram_lookup
        self.state = SaslState.HANDSHAKE
        self.mechanism: str | None = None
        self.user: str | None = None  # the authenticated user, kept across re-authentication
        self._server: SaslServer | None = None

    @property
    def raw_tokens(self) -> bool:
        return self.state is SaslState.RAW_TOKEN

    def handshake(self, mechanism: str, version: int) -> bool:
        """Whether `mechanism` is offered; on a match the exchange starts."""
        if self.state not in (SaslState.HANDSHAKE, SaslState.COMPLETE):
            raise IllegalSaslState("Unexpected SaslHandshake request during SASL authentication")
        reauthenticating = self.state is SaslState.COMPLETE
        if reauthenticating and (version < 1 or mechanism != self.mechanism):
            raise IllegalSaslState("Re-authentication must keep the SASL mechanism "
                                   f"{self.mechanism} and use SaslHandshake v1 or later")
        if mechanism not in self.config.mechanisms:
            self.state = SaslState.FAILED
            return False
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
                    f"User:{self.user}: User:{self._server.user}")
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
        limits = [ms for ms in (self.config.reauth_ms,
                                self._server.lifetime_ms if self._server else None)
                  if ms is not None and ms > 0]
        return min(limits) if limits else 0

    def _new_server(self, mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            return PlainServer(self.config.plain_users)
        if mechanism == OAUTHBEARER:
            return OAuthBearerUnsecuredServer(self.config.oauth_options)
        return ScramServer(mechanism, self._scram_lookup)
