"""The SASL side of a connection, for the handshake handlers and the gate in dispatch.

A connection on a SASL listener gets its `SaslAuthenticator` at its first SASL request; on
other listeners there is none, and the SASL APIs answer ILLEGAL_SASL_STATE as Kafka's do
once a connection is authenticated. Success is where the session learns its principal.

While a session re-authenticates (KIP-368) it is not `authenticated`: as during the first
exchange, only the SASL requests of the exchange are served, and the frame limit is
sasl.server.max.receive.size. The principal stays what it was.

It takes only what the exchange needs, each SASL listener's config (`sasl_listeners` of the
broker's config) and the SCRAM credential lookup, never the handlers' `Services`: the
connection layer asks it too, so it can live below both.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from pybroker.config.sasl import SaslListenerConfig
from pybroker.security.sasl.authenticator import SaslAuthenticator, ScramLookup
from pybroker.security.session import Session

log = logging.getLogger("pybroker.security.sasl")


def authenticator_of(sasl_listeners: Mapping[str, SaslListenerConfig], scram: ScramLookup,
                     session: Session) -> SaslAuthenticator | None:
    """The session's SASL exchange, begun at its first SASL request; None on a listener that
    is not a SASL one."""
    if session.sasl is None:
        config = sasl_listeners.get(session.listener or "")
        if config is None:
            return None
        session.sasl = SaslAuthenticator(config, scram)
    return session.sasl


def begins_reauthentication(session: Session, now: float) -> bool:
    """Whether a SaslHandshake arriving now on `session` starts re-authenticating it: the
    session is authenticated, has a lifetime, and began none in the last second."""
    sasl = session.sasl
    return (session.authenticated and sasl is not None
            and sasl.may_reauthenticate(now, session.expires_at is not None))


def reauthentication_started(session: Session) -> None:
    """Until the new exchange completes, only its SASL requests are served."""
    session.authenticated = False


def authenticated(session: Session, sasl: SaslAuthenticator, host: str) -> int:
    """Record success on the session; the session lifetime (ms, 0: none) to tell the client."""
    lifetime = sasl.session_lifetime_ms()
    session.principal = f"User:{sasl.user}"
    session.authenticated = True
    session.expires_at = time.monotonic() + lifetime / 1000 if lifetime else None
    log.debug("%s %sauthenticated from %s with %s (session lifetime %d ms)", session.principal,
              "re-" if sasl.reauthenticating else "", host, sasl.mechanism, lifetime)
    return lifetime


def failed(session: Session, host: str, mechanism: str | None, message: str) -> None:
    """The exchange failed: the response is the connection's last. Logged without the user
    name or anything the client sent (Kafka's INFO line names only the address)."""
    session.close_after_response = True
    log.info("Failed authentication with %s (%s) using %s", host, message, mechanism)


def frame_limit(sasl_listeners: Mapping[str, SaslListenerConfig], session: Session
                ) -> int | None:
    """The largest frame accepted now: sasl.server.max.receive.size before authentication
    on a SASL listener, else None (socket.request.max.bytes applies)."""
    if session.authenticated:
        return None
    config = sasl_listeners.get(session.listener or "")
    return config.max_receive_size if config is not None else None
