"""The server side of each SASL mechanism: tokens in, challenges out, a principal at the end.

Each exchange is pure (no I/O): SCRAM looks credentials up through a plain callable over the
credential store's memory. A failed exchange raises `AuthenticationFailed` with the message
Kafka sends: the same for an unknown user and a wrong password, so a client cannot probe for
user names, and never the password or token itself.
"""
from __future__ import annotations

import base64
import binascii
import hmac
import json
import time
from typing import Callable, Mapping

from pybroker.security.sasl.scram_credentials import ScramCredential
from pybroker.security.sasl.scram_exchange import ScramExchange, ScramFailure

# PlainSaslServer's wording (for both an unknown user and a wrong password).
PLAIN_FAILED = "Authentication failed: Invalid username or password"


class AuthenticationFailed(Exception):
    """The exchange failed; `str()` is what the client is told (nothing secret)."""


class SaslServer:
    """One exchange. `evaluate` answers each client token; once `complete`, `user` names who
    authenticated and `lifetime_ms` bounds the session (a token's expiry) when not None."""

    mechanism = ""
    complete = False
    user = ""
    lifetime_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes:
        raise NotImplementedError


class PlainServer(SaslServer):
    """RFC 4616: `authzid NUL user NUL password`, checked against the JAAS line's users."""

    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users

    def evaluate(self, token: bytes) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise AuthenticationFailed(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authz, user_b, password_b = parts
        try:
            user, password, authz_id = user_b.decode(), password_b.decode(), authz.decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed(PLAIN_FAILED) from None
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        expected = self._users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise AuthenticationFailed(PLAIN_FAILED)
        if authz_id and authz_id != user:
            raise AuthenticationFailed("Authentication failed: Client requested an "
                                       "authorization id that is different from username")
        self.user, self.complete = user, True
        return b""


class ScramServer(SaslServer):
    """RFC 5802: client-first, server-first, client-final, server-final (scram_exchange)."""

    def __init__(self, mechanism: str,
                 lookup: Callable[[str, str], ScramCredential | None],
                 reauthenticating: bool = False) -> None:
        self.mechanism = mechanism
        self._during = "re-authentication" if reauthenticating else "authentication"
        self._exchange = ScramExchange(mechanism, lambda user: lookup(user, mechanism))
        self._step = 0

    def evaluate(self, token: bytes) -> bytes:
        # SaslServerAuthenticator's message for any SaslException of the exchange.
        failed = (f"Authentication failed during {self._during} due to invalid credentials "
                  f"with SASL mechanism {self.mechanism}")
        try:
            message = token.decode()
            if self._step == 0:
                self._step = 1
                return self._exchange.first(message).encode()
            if self._step == 1:
                self._step = 2
                final = self._exchange.final(message)
                self.user = self._exchange.user
                self.complete = True
                return final.encode()
        except (ScramFailure, UnicodeDecodeError):
            raise AuthenticationFailed(failed) from None
        raise AuthenticationFailed(failed)


class OAuthBearerUnsecuredServer(SaslServer):
    """RFC 7628 with Kafka's unsecured JWS validator (alg "none"): the principal is the
    `sub` claim (unsecuredValidatorPrincipalClaimName), `exp` must lie ahead, and a scope
    may be required (unsecuredValidatorRequiredScope). A bad token gets RFC 7628's JSON
    error as a challenge; the client's %x01 reply then ends the exchange as failed."""

    mechanism = "OAUTHBEARER"

    def __init__(self, options: Mapping[str, str], now: Callable[[], float] = time.time
                 ) -> None:
        self._principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub")
        self._scope_claim = options.get("unsecuredValidatorScopeClaimName", "scope")
        required = options.get("unsecuredValidatorRequiredScope", "")
        self._required_scope = [s for s in required.replace(",", " ").split() if s]
        self._skew_ms = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0") or 0)
        self._now = now
        self._error: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self._error is not None:
            if token == b"\x01":
                raise AuthenticationFailed(self._error)
            raise AuthenticationFailed("Authentication failed: unexpected message after "
                                       "an OAUTHBEARER error")
        try:
            jws = _bearer_of(token)
            claims = self._validate(jws)
        except _InvalidToken as exc:
            self._error = f"Authentication failed: {exc}"
            return json.dumps({"status": "invalid_token"}).encode()
        self.user = claims[self._principal_claim]
        if "exp" in claims:
            self.lifetime_ms = max(0, int(float(claims["exp"]) * 1000 - self._now() * 1000))
        self.complete = True
        return b""

    def _validate(self, jws: str) -> dict:
        parts = jws.split(".")
        if len(parts) != 3 or parts[2] != "":
            raise _InvalidToken("an unsecured JWS has three parts, the last one empty")
        header, claims = _b64json(parts[0]), _b64json(parts[1])
        if header.get("alg") != "none":
            raise _InvalidToken("the token's alg must be none (unsecured)")
        principal = claims.get(self._principal_claim)
        if not isinstance(principal, str) or not principal:
            raise _InvalidToken(f"the token has no {self._principal_claim} claim")
        now_ms = self._now() * 1000
        exp = claims.get("exp")
        if not isinstance(exp, (int, float)):
            raise _InvalidToken("the token has no numeric exp claim")
        if exp * 1000 + self._skew_ms <= now_ms:
            raise _InvalidToken("the token has expired")
        if self._required_scope:
            scope = claims.get(self._scope_claim, [])
            granted = set(scope.split() if isinstance(scope, str) else scope)
            missing = [s for s in self._required_scope if s not in granted]
            if missing:
                raise _InvalidToken(f"the token lacks the required scope {' '.join(missing)}")
        return claims


class _InvalidToken(Exception):
    pass


def _bearer_of(token: bytes) -> str:
    """The JWS of RFC 7628's client response `gs2-header %x01 auth=Bearer <jws> %x01 ...`."""
    try:
        text = token.decode()
    except UnicodeDecodeError:
        raise _InvalidToken("the client response is not UTF-8") from None
    fields = text.split("\x01")
    if not fields[0].startswith(("n,", "y,")):
        raise _InvalidToken("the client response has no GS2 header")
    for kv in fields[1:]:
        if kv.startswith("auth="):
            scheme, _, jws = kv[len("auth="):].partition(" ")
            if scheme.lower() != "bearer" or not jws:
                raise _InvalidToken("the auth value is not 'Bearer <token>'")
            return jws.strip()
    raise _InvalidToken("the client response has no auth value")


def _b64json(part: str) -> dict:
    try:
        data = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (binascii.Error, ValueError):
        raise _InvalidToken("a token part is not base64url JSON") from None
    if not isinstance(data, dict):
        raise _InvalidToken("a token part is not a JSON object")
    return data
