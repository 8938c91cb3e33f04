"""RFC 5802's server side of SCRAM, as Kafka 3.9's ScramSaslServer runs it. Pure.

Why our own rather than scramp's server: Kafka 3.9 accepts a client-final nonce that *ends
with* the nonce of its server-first message (ScramSaslServer, since the CVE-2024-56128 fix in
3.8.1), where RFC 5802 and scramp want it equal. librdkafka before 2.6.1 (confluentinc/
librdkafka#4895) sends the client nonce once more in front of the combined nonce, so Debian's
kcat 1.7.1 (librdkafka 2.0.2) authenticates with Kafka 3.9 and was refused by scramp ("Server
nonce doesn't match"). The proof is still checked over the messages exactly as sent, so the
tolerance weakens nothing the proof protects: the server's fresh nonce must be there.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from pybroker.security.sasl.scram_credentials import ScramCredential

_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class ScramFailure(Exception):
    """A malformed message, an unknown user or a wrong proof (told apart only in logs)."""


@dataclass
class ClientFirst:
    gs2_header: str
    user: str
    nonce: str
    bare: str


def _attributes(text: str) -> list[tuple[str, str]]:
    out = []
    for part in text.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramFailure(f"malformed SCRAM attribute {part[:20]!r}")
        out.append((part[0], part[2:]))
    return out


def _unescape(name: str) -> str:
    """RFC 5802's saslname: `=2C` is a comma, `=3D` an equals sign, any other `=` is wrong."""
    if name.replace("=2C", "").replace("=3D", "").count("="):
        raise ScramFailure("bad escape in the user name")
    return name.replace("=2C", ",").replace("=3D", "=")


def parse_client_first(message: str) -> ClientFirst:
    flag, sep, rest = message.partition(",")
    authzid, sep2, bare = rest.partition(",")
    if not sep or not sep2 or flag not in ("n", "y"):
        raise ScramFailure("channel binding is not supported")  # Kafka refuses `p=`
    attrs = _attributes(bare)
    if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
        raise ScramFailure("client-first needs n= and r=")
    user = _unescape(attrs[0][1])
    if authzid and (not authzid.startswith("a=") or _unescape(authzid[2:]) != user):
        raise ScramFailure("an authorization id other than the user name")
    return ClientFirst(f"{flag},{authzid},", user, attrs[1][1], bare)


class ScramExchange:
    """One exchange: `first(client_first)` → server-first, `final(client_final)` →
    server-final. `lookup(user)` gives the user's credential for this mechanism, or None."""

    def __init__(self, mechanism: str,
                 lookup: Callable[[str], ScramCredential | None],
                 server_nonce: Callable[[], str] = lambda: secrets.token_urlsafe(24)) -> None:
        self.hash = _HASHES[mechanism]
        self._lookup = lookup
        self._server_nonce = server_nonce
        self.user = ""

    def first(self, message: str) -> str:
        self.client = parse_client_first(message)
        credential = self._lookup(self.client.user)
        if credential is None:
            raise ScramFailure("unknown user")
        self.credential = credential
        self.nonce = self.client.nonce + self._server_nonce()
        self.server_first = (f"r={self.nonce},s={base64.b64encode(credential.salt).decode()},"
                             f"i={credential.iterations}")
        return self.server_first

    def final(self, message: str) -> str:
        without_proof, sep, proof_attr = message.rpartition(",")
        if not sep or not proof_attr.startswith("p="):
            raise ScramFailure("client-final needs p= last")
        attrs = dict(_attributes(without_proof))
        try:
            binding = base64.b64decode(attrs.get("c", ""), validate=True)
            proof = base64.b64decode(proof_attr[2:], validate=True)
        except binascii.Error:
            raise ScramFailure("bad base64 in client-final") from None
        if binding != self.client.gs2_header.encode():
            raise ScramFailure("channel binding differs from the gs2 header")
        if not attrs.get("r", "").endswith(self.nonce):  # Kafka 3.9's rule (see above)
            raise ScramFailure("client-final nonce lacks the server's nonce")
        auth_message = f"{self.client.bare},{self.server_first},{without_proof}".encode()
        signature = hmac.new(self.credential.stored_key, auth_message, self.hash).digest()
        if len(proof) != len(signature):
            raise ScramFailure("proof of the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(self.hash, client_key).digest(),
                                   self.credential.stored_key):
            raise ScramFailure("wrong proof")
        self.user = self.client.user
        verifier = hmac.new(self.credential.server_key, auth_message, self.hash).digest()
        return f"v={base64.b64encode(verifier).decode()}"
