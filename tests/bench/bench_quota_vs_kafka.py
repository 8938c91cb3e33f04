"""A producer under a 1 MB/s producer_byte_rate quota, on pybroker and on Apache Kafka 4.1.1
side by side: the rate each client gets (after a warm-up), as a fraction of the quota.

The integration test (tests/integration/test_quotas.py) holds pybroker to ±10 % for
confluent-kafka and 0.8-1.1 for kafka-python; this prints what Kafka itself gives the same
clients with the same settings, so the bounds can be read against the reference. Both brokers
keep quota.window.num=2 samples of 1 s (see the test module's docstring for why Kafka's 11
make a 6 s slice meaningless on either broker).

    python tests/bench/bench_quota_vs_kafka.py [--rounds N]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from compat.apache_kafka import ApacheKafka
from pybroker.testing import Broker
from pybroker.tools.configs import main as configs
from tests.integration.quota_load import (
    RATE, Produced, _produce_confluent, _produce_kafka_python, _steady_rate,
)
from tests.integration.raw import create_topic

CLIENTS = {"kafka-python": _produce_kafka_python, "confluent-kafka": _produce_confluent}


def _quota(bootstrap: str, client_id: str) -> None:
    rc = configs(["--bootstrap-server", bootstrap, "--alter", "--entity-type", "clients",
                  "--entity-name", client_id, "--add-config", f"producer_byte_rate={RATE}"])
    assert rc == 0


def _rate(bootstrap: str, produce: Callable[[str, str, str, Produced], None],
          topic: str, client_id: str) -> float:
    """As the integration test measures it: each record timed by its LogAppendTime, so on the
    broker's clock (the same machine's wall clock); a producer's failure is raised, not read
    as a rate of 0."""
    create_topic(bootstrap, topic, 1, {"message.timestamp.type": "LogAppendTime"})
    out = Produced()
    failed: list[BaseException] = []

    def run() -> None:
        try:
            produce(bootstrap, topic, client_id, out)
        except BaseException as e:  # raised below, not lost with the thread
            failed.append(e)
    start = time.time()
    worker = threading.Thread(target=run)
    worker.start()
    worker.join(60)
    assert not worker.is_alive() and not failed, failed
    return _steady_rate(out.acked, start) / RATE


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="quota-vs-kafka-"))
    kafka = ApacheKafka(work / "kafka", overrides={"quota.window.num": "2"})
    broker = Broker(process=True, quota_window_num=2, num_partitions=1)
    kafka.start()
    broker.start()
    try:
        results: dict[tuple[str, str], list[float]] = {}
        # A client id per client: what one's producer still has queued at its close drains at
        # its own quota, not the next one's (as in the integration test).
        for bootstrap in (kafka.bootstrap, broker.bootstrap):
            for name in CLIENTS:
                _quota(bootstrap, f"c1-{name}")
        time.sleep(1)
        for r in range(args.rounds):
            for name, produce in CLIENTS.items():
                for side, bootstrap in (("kafka", kafka.bootstrap),
                                        ("pybroker", broker.bootstrap)):
                    topic = f"q-{name}-{r}"
                    results.setdefault((name, side), []).append(
                        _rate(bootstrap, produce, topic, f"c1-{name}"))
        print("producer_byte_rate=1 MiB/s, rate after a 2 s warm-up over 6 s, fraction of "
              f"the quota (median of {args.rounds}; all runs):")
        for name in CLIENTS:
            k, p = results[(name, "kafka")], results[(name, "pybroker")]
            print(f"  {name:16s} Apache Kafka 4.1.1 {statistics.median(k):.3f} "
                  f"{[round(x, 3) for x in k]}   pybroker {statistics.median(p):.3f} "
                  f"{[round(x, 3) for x in p]}")
    finally:
        broker.stop()
        kafka.stop()


if __name__ == "__main__":
    main()
