"""SASL connection set-up time per mechanism, and what SCRAM iterations cost (issue #13).

Not a test; run it by hand:

    cd /work/main && .venv/bin/python tests/bench/bench_sasl.py [--connections N]

One broker in this process (pybroker.testing.broker_in_thread) with PLAINTEXT, SSL,
SASL_PLAINTEXT and SASL_SSL listeners (trustme certificates). Set-up time: a fresh
confluent-kafka AdminClient's first metadata answer (TCP connect, TLS, ApiVersions,
SaslHandshake, the SASL exchange, Metadata), median of N; the broker and the client share
the machine's CPUs (and the broker's thread shares this process).

SCRAM iterations: the broker never runs PBKDF2 — it keeps the stored and server keys and
does a few HMACs per exchange — so its cost per authentication is measured on the exchange
itself (pybroker.security.sasl.scram_exchange, a scramp client on the other side) for 4096 and 8192
iterations; the client's Hi() is where the iterations go, printed beside it.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import scramp  # noqa: E402
import trustme  # noqa: E402

from pybroker.security.sasl.scram_credentials import (  # noqa: E402
    credential_from_salted_password, salted_password)
from pybroker.security.sasl.scram_exchange import ScramExchange  # noqa: E402
from pybroker.testing import broker_in_thread  # noqa: E402
from pybroker.tools import configs  # noqa: E402

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret";')


def _setup_ms(conf: dict, n: int) -> float:
    from confluent_kafka.admin import AdminClient
    times = []
    for _ in range(n):
        start = time.perf_counter()
        AdminClient(conf).list_topics(timeout=10)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _broker_exchange_us(mechanism: str, iterations: int, n: int) -> tuple[float, float]:
    """Median broker-side µs per exchange, and the client's µs for Hi()."""
    salt = os.urandom(16)
    credential = credential_from_salted_password(
        mechanism, salt, salted_password(mechanism, "pw", salt, iterations), iterations)
    server_us, client_us = [], []
    for _ in range(n):
        server = ScramExchange(mechanism, lambda user: credential)
        client = scramp.ScramClient([mechanism], "alice", "pw")
        first = client.get_client_first()
        t0 = time.perf_counter()
        server_first = server.first(first)
        t1 = time.perf_counter()
        client.set_server_first(server_first)
        final = client.get_client_final()  # runs Hi() with the iterations
        t2 = time.perf_counter()
        server.final(final)
        t3 = time.perf_counter()
        server_us.append((t1 - t0 + t3 - t2) * 1e6)
        client_us.append((t2 - t1) * 1e6)
    return statistics.median(server_us), statistics.median(client_us)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=30, help="connections per row")
    args = parser.parse_args()
    n = args.connections
    root = Path(tempfile.mkdtemp(prefix="bench-sasl-"))
    ca = trustme.CA()
    (root / "ca.pem").write_bytes(ca.cert_pem.bytes())
    (root / "server.pem").write_bytes(
        ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.bytes())
    with broker_in_thread(root / "logs",
                          listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,"
                                    "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                          ssl_keystore_location=str(root / "server.pem"),
                          sasl_enabled_mechanisms="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,"
                                                  "OAUTHBEARER",
                          sasl_jaas_config=JAAS) as info:
        plain = f"127.0.0.1:{info.ports['PLAINTEXT']}"
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            for user, iterations in (("alice", 4096), ("alice8k", 8192)):
                assert configs.main(["--bootstrap-server", plain, "--alter", "--entity-type",
                                     "users", "--entity-name", user, "--add-config",
                                     f"{mechanism}=[iterations={iterations},"
                                     f"password=alice-secret]"]) == 0
        print(f"\nconnection set-up (confluent-kafka AdminClient to first metadata), "
              f"median of {n}:")
        for protocol in ("PLAINTEXT", "SSL"):
            conf = {"bootstrap.servers": f"127.0.0.1:{info.ports[protocol]}",
                    "security.protocol": protocol, "ssl.ca.location": str(root / "ca.pem")}
            print(f"  {protocol:<15} {'-':<24} {_setup_ms(conf, n):7.2f} ms")
        for protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            for mechanism, user in (("PLAIN", "alice"), ("SCRAM-SHA-256", "alice"),
                                    ("SCRAM-SHA-256", "alice8k"), ("SCRAM-SHA-512", "alice"),
                                    ("SCRAM-SHA-512", "alice8k"), ("OAUTHBEARER", "alice")):
                conf = {"bootstrap.servers": f"127.0.0.1:{info.ports[protocol]}",
                        "security.protocol": protocol, "ssl.ca.location": str(root / "ca.pem"),
                        "sasl.mechanism": mechanism}
                if mechanism == "OAUTHBEARER":
                    conf.update({"sasl.oauthbearer.config": "principal=alice",
                                 "enable.sasl.oauthbearer.unsecure.jwt": "true"})
                else:
                    conf.update({"sasl.username": user, "sasl.password": "alice-secret"})
                label = mechanism + (" (8192 it.)" if user == "alice8k" else "")
                print(f"  {protocol:<15} {label:<24} {_setup_ms(conf, n):7.2f} ms")
    print(f"\nSCRAM per authentication, median of {n * 10}: broker exchange (µs) / "
          f"client Hi() (µs)")
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        for iterations in (4096, 8192):
            server_us, client_us = _broker_exchange_us(mechanism, iterations, n * 10)
            print(f"  {mechanism:<14} iterations={iterations:<5} broker {server_us:7.1f} µs"
                  f"   client {client_us:9.1f} µs")


if __name__ == "__main__":
    main()
