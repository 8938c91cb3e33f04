"""Certificates from trustme written as PEM files: a CA, the broker's certificate, a client
certificate, and ones a broker must refuse (expired, from another CA); for the TLS tests
(tests/integration/test_tls.py) and the SASL_SSL ones."""
from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import trustme


class Certs:
    """A CA, the broker's certificate, a client certificate, and bad ones, as PEM files."""

    def __init__(self, root: Path) -> None:
        self.root = root
        ca = trustme.CA()
        self.ca = self._write("ca.pem", ca.cert_pem.bytes())
        server = ca.issue_cert("localhost", "127.0.0.1")
        self.server = self._write("server.pem", server.private_key_and_cert_chain_pem.bytes())
        self.client_cert, self.client_key = self._leaf(ca, "client")
        past = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=1)
        self.expired_cert, self.expired_key = self._leaf(
            ca, "expired", not_before=past - datetime.timedelta(days=30), not_after=past)
        self.stranger_cert, self.stranger_key = self._leaf(trustme.CA(), "stranger")

    def _leaf(self, ca: Any, name: str, **dates: Any) -> tuple[str, str]:
        leaf = ca.issue_cert(f"{name}.example", common_name="alice",
                             organization_unit_name="eng", organization_name="acme", **dates)
        return (self._write(f"{name}-cert.pem",
                            b"".join(blob.bytes() for blob in leaf.cert_chain_pems)),
                self._write(f"{name}-key.pem", leaf.private_key_pem.bytes()))

    def _write(self, name: str, data: bytes) -> str:
        path = self.root / name
        path.write_bytes(data)
        return str(path)
