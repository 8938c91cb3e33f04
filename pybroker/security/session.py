"""Who is on a connection, as the security layers establish it and the handlers ask it.

One `Session` per connection, made when it is accepted: the listener it came in on, that
listener's security protocol, and the principal — `User:ANONYMOUS` (Kafka's) until TLS with a
client certificate or SASL names someone. A SASL listener's connection starts unauthenticated:
until its SaslAuthenticate succeeds, only the handshake APIs are served. The authorizer and
the quotas read the principal from here through each request's context.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ANONYMOUS = "User:ANONYMOUS"
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


@dataclass
class Session:
    listener: str | None = None
    security_protocol: str = "PLAINTEXT"
    principal: str = ANONYMOUS
    # False on a SASL listener until the client has authenticated.
    authenticated: bool = True
    # The SASL exchange (pybroker.security.sasl.authenticator.SaslAuthenticator), made at the first
    # SASL request on a SASL listener.
    sasl: Any = None
    # time.monotonic() past which the SASL session has expired (KIP-368); None: never.
    expires_at: float | None = None
    # The response being sent is the last: the connection closes after it (a failed
    # authentication, a SASL request out of order, as Kafka does).
    close_after_response: bool = False
    # Over a client quota: the connection reads nothing more for this long (ms) after the
    # response just answered (pybroker/quota/client_quota.py).
    throttle_ms: int = 0

    @property
    def user(self) -> str:
        """The principal's name, as quotas key users (`User:alice` -> `alice`)."""
        return self.principal.partition(":")[2]

    @classmethod
    def on(cls, listener: str | None, security_protocol: str) -> "Session":
        return cls(listener, security_protocol,
                   authenticated=security_protocol not in SASL_PROTOCOLS)
