"""1 KB produce and consume throughput over SSL beside PLAINTEXT (issue #13), one broker.

Not a test; run it by hand:

    cd /work/main && .venv/bin/python tests/bench/bench_tls.py [--count N]

One `python -m pybroker` child with a PLAINTEXT and an SSL listener (trustme certificates,
no client certificates); bench_broker's confluent-kafka (librdkafka) producer and consumer
drive each listener in turn, to a 1-partition topic of its own, with the same settings
(acks=1, linger.ms=5, no compression). The broker and the client share the machine's CPUs.
"""
from __future__ import annotations

import argparse
import shutil
import socket
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import trustme  # noqa: E402

from tests.bench.bench_broker import bench_consume, bench_produce  # noqa: E402
from tests.helpers import BrokerProcess  # noqa: E402

SIZE = 1024


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=200_000, help="records per run")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="pybroker-bench-tls-"))
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
        str(root / "server.pem"))
    ssl_port = _free_port()
    broker = BrokerProcess(root / "logs", listeners=f"PLAINTEXT://127.0.0.1:0,"
                                                    f"SSL://127.0.0.1:{ssl_port}",
                           ssl_keystore_location=str(root / "server.pem")).start(timeout=120)
    runs = {"PLAINTEXT": (broker.bootstrap, {}),
            "SSL": (f"localhost:{ssl_port}", {"security.protocol": "SSL",
                                              "ssl.ca.location": str(root / "ca.pem")})}
    rows = []
    try:
        pid = broker.proc.pid  # type: ignore[union-attr]
        for name, (bootstrap, client) in runs.items():
            topic = f"bench-{name.lower()}"
            produced = bench_produce(bootstrap, pid, topic, 1, SIZE, args.count, client=client)
            consumed = bench_consume(bootstrap, pid, topic, 1, SIZE, args.count, client=client)
            rows.append((name, produced, consumed))
    finally:
        broker.kill()
        shutil.rmtree(root, ignore_errors=True)
    print(f"1 KB records, {args.count:,} per run, 1 partition, confluent-kafka "
          "(acks=1, linger.ms=5)")
    print(f"{'listener':<10} {'produce MB/s':>13} {'rec/s':>9} {'CPU s/M':>8}   "
          f"{'consume MB/s':>13} {'rec/s':>9} {'CPU s/M':>8}")
    for name, p, c in rows:
        print(f"{name:<10} {p.mb_s:>13.1f} {p.rec_s:>9,.0f} {p.cpu_per_million:>8.1f}   "
              f"{c.mb_s:>13.1f} {c.rec_s:>9,.0f} {c.cpu_per_million:>8.1f}")
    base, tls = rows[0], rows[1]
    print(f"SSL / PLAINTEXT: produce {tls[1].mb_s / base[1].mb_s:.2f}x, "
          f"consume {tls[2].mb_s / base[2].mb_s:.2f}x")


if __name__ == "__main__":
    main()
