"""SCRAM credentials as Kafka keeps them: salt, stored key, server key and iterations, never
the password (RFC 5802's server-side values).

The text form is Kafka's (ScramCredentialUtils), the one written to ZooKeeper's
/config/users/<user> as the value of `SCRAM-SHA-256` / `SCRAM-SHA-512`:
`salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>`. The wire numbering of
mechanisms is AlterUserScramCredentials' (1 = SHA-256, 2 = SHA-512).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass

MECHANISM_IDS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {v: k for k, v in MECHANISM_IDS.items()}
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's bounds (ScramMechanism.minIterations / AlterUserScramCredentials' maximum).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_kafka(self) -> str:
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_kafka(cls, text: str) -> "ScramCredential":
        fields = dict(part.split("=", 1) for part in text.split(","))
        return cls(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                   base64.b64decode(fields["server_key"]), int(fields["iterations"]))



def credential_from_salted_password(mechanism: str, salt: bytes, salted_password: bytes,
                                    iterations: int) -> ScramCredential:
    """The stored form of what AlterUserScramCredentials carries (the client salts and hashes
    the password; the broker derives the keys, as Kafka's ScramFormatter does)."""
    name = _HASHES[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", name).digest()
    stored_key = hashlib.new(name, client_key).digest()
    server_key = hmac.new(salted_password, b"Server Key", name).digest()
    return ScramCredential(salt, stored_key, server_key, iterations)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(): what a client (kafka-configs, the admin client) sends for a password."""
    return hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode(), salt, iterations)


def iterations_problem(iterations: int) -> str | None:
    """Kafka's UNACCEPTABLE_CREDENTIAL message for an iteration count, or None when fine."""
    if iterations < MIN_ITERATIONS:
        return f"Too few iterations ({iterations}); at least {MIN_ITERATIONS} are required"
    if iterations > MAX_ITERATIONS:
        return f"Too many iterations ({iterations}); at most {MAX_ITERATIONS} are allowed"
    return None
