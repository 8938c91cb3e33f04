"""The SCRAM server exchange against scramp's client (an independent RFC 5802 client), and
Kafka 3.9's tolerance of old librdkafka's client-final nonce."""
from __future__ import annotations

import base64
import os

import pytest
import scramp

from pybroker.security.sasl.scram_credentials import credential_from_salted_password, \
    salted_password
from pybroker.security.sasl.scram_exchange import ScramExchange, ScramFailure


def _exchange(mechanism: str, password: str = "pw") -> ScramExchange:
    salt = os.urandom(16)
    credential = credential_from_salted_password(
        mechanism, salt, salted_password(mechanism, password, salt, 4096), 4096)
    return ScramExchange(mechanism, lambda user: credential if user == "alice" else None)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scramps_client_authenticates_and_checks_the_servers_signature(mechanism: str) -> None:
    server = _exchange(mechanism)
    client = scramp.ScramClient([mechanism], "alice", "pw")
    client.set_server_first(server.first(client.get_client_first()))
    client.set_server_final(server.final(client.get_client_final()))  # raises on a bad v=
    assert server.user == "alice"


def test_a_wrong_password_and_an_unknown_user_fail() -> None:
    server = _exchange("SCRAM-SHA-256")
    client = scramp.ScramClient(["SCRAM-SHA-256"], "alice", "not-pw")
    client.set_server_first(server.first(client.get_client_first()))
    with pytest.raises(ScramFailure):
        server.final(client.get_client_final())
    assert server.user == ""
    with pytest.raises(ScramFailure):
        _exchange("SCRAM-SHA-256").first("n,,n=mallory,r=abc")


def _client_final(server: ScramExchange, first_bare: str, server_first: str, nonce: str,
                  password: str = "pw") -> str:
    """A client-final with any nonce, proved over exactly what is sent (as librdkafka does)."""
    import hashlib
    import hmac
    attrs = dict(p.split("=", 1) for p in server_first.split(","))
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]),
                                 int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    without_proof = f"c=biws,r={nonce}"
    auth = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.sha256(client_key).digest(), auth, "sha256").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    return f"{without_proof},p={base64.b64encode(proof).decode()}"


def test_old_librdkafkas_repeated_client_nonce_is_accepted_as_kafka_39_accepts_it() -> None:
    server = _exchange("SCRAM-SHA-256")
    server_first = server.first("n,,n=alice,r=cnonce")
    combined = server_first.split(",")[0][2:]
    assert combined.startswith("cnonce") and len(combined) > len("cnonce")
    final = _client_final(server, "n=alice,r=cnonce", server_first, "cnonce" + combined)
    assert server.final(final).startswith("v=")


@pytest.mark.parametrize("nonce", ["cnonce", "cnonce-made-up-server-part"])
def test_a_client_final_without_the_servers_nonce_fails(nonce: str) -> None:
    server = _exchange("SCRAM-SHA-256")
    server_first = server.first("n,,n=alice,r=cnonce")
    with pytest.raises(ScramFailure):
        server.final(_client_final(server, "n=alice,r=cnonce", server_first, nonce))


@pytest.mark.parametrize("message", ["p,,n=alice,r=x", "n,,r=x,n=alice", "n,,n=al=ice,r=x",
                                     "n,a=bob,n=alice,r=x", "n,,n=alice"])
def test_malformed_or_unsupported_client_first_fails(message: str) -> None:
    with pytest.raises(ScramFailure):
        _exchange("SCRAM-SHA-256").first(message)


def test_escaped_user_names_and_a_matching_authzid() -> None:
    salt = b"s" * 16
    credential = credential_from_salted_password(
        "SCRAM-SHA-256", salt, salted_password("SCRAM-SHA-256", "pw", salt, 4096), 4096)
    server = ScramExchange("SCRAM-SHA-256",
                           lambda user: credential if user == "a,b=c" else None)
    assert server.first("n,a=a=2Cb=3Dc,n=a=2Cb=3Dc,r=xyz").startswith("r=xyz")
