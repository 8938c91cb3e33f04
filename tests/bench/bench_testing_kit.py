"""The testing kit's figures (issue #16): what a test suite pays for pybroker, and the same
100-test suite against Apache Kafka. Prints figures; not a test (pytest does not collect
`bench_*.py`). Run it by hand:

    .venv/bin/python tests/bench/bench_testing_kit.py [--tests 100] [--rounds 1] [--no-kafka]

1. Start time of `pybroker.testing.Broker()`: in a thread (min/median of 5 in one process,
   and the first start of a fresh interpreter, imports included) and as a subprocess.
2. The `kafka_topic` fixture's cost per test: the wall time of N tests taking `kafka_topic`
   minus N taking only `kafka_broker`, over N; and `create_topic` alone (median of N).
3. An example suite of N small tests, each producing three records with confluent-kafka to
   its own `kafka_topic` and reading them back as a consumer group, run by pytest in a
   subprocess (a) on the pybroker plugin, (b) with `--kafka-bootstrap` against Apache Kafka
   (compat/apache_kafka.py: one KRaft node, 1 GB heap), and the ratio. The Kafka node gets
   `group.initial.rebalance.delay.ms=0` as testcontainers' KafkaContainer and pybroker's
   test broker do (else every new group waits 3 s); the rest is Kafka's shipped defaults.
   The Kafka figure is given without and with the node's start, which a suite also pays.

Docker (testcontainers) is not used: this machine has no Docker engine.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

EXAMPLE_TEST = '''
def test_round_trip_{n}(kafka_bootstrap, kafka_topic):
    producer = Producer({{"bootstrap.servers": kafka_bootstrap}})
    for i in range(3):
        producer.produce(kafka_topic, key=b"k%d" % i, value=b"v%d" % i)
    assert producer.flush(10) == 0
    consumer = Consumer({{"bootstrap.servers": kafka_bootstrap, "group.id": kafka_topic,
                         "auto.offset.reset": "earliest"}})
    consumer.subscribe([kafka_topic])
    got = []
    deadline = time.monotonic() + 20
    while len(got) < 3 and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    assert got == [b"v0", b"v1", b"v2"]
'''
EXAMPLE_HEAD = "import time\nfrom confluent_kafka import Consumer, Producer\n"


def median_min(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:.0f} ms, min {min(values) * 1000:.0f} ms"


def thread_starts(n: int = 5) -> list[float]:
    from pybroker.testing import Broker
    Broker().start().stop()  # imports and first-use costs out of the figure
    times = []
    for _ in range(n):
        began = time.perf_counter()
        broker = Broker().start()
        times.append(time.perf_counter() - began)
        broker.stop()
    return times


def cold_thread_start() -> float:
    """The first Broker() start of a fresh interpreter, `import pybroker.testing` included."""
    code = ("import time; t = time.perf_counter(); from pybroker.testing import Broker; "
            "b = Broker().start(); print(time.perf_counter() - t); b.stop()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), check=True)
    return float(out.stdout.strip().splitlines()[-1])


def process_starts(n: int = 5) -> list[float]:
    from pybroker.testing import Broker
    times = []
    for _ in range(n):
        began = time.perf_counter()
        broker = Broker(process=True).start()
        times.append(time.perf_counter() - began)
        broker.stop()
    return times


def create_topic_times(n: int) -> list[float]:
    from pybroker.testing import Broker
    times = []
    with Broker() as broker:
        for i in range(n):
            began = time.perf_counter()
            broker.create_topic(f"bench-{i}")
            times.append(time.perf_counter() - began)
    return times


def run_suite(directory: Path, body: str, *args: str) -> float:
    """Wall time of `pytest` over `body` in a fresh directory, in a subprocess; the plugin is
    loaded explicitly (autoload off) so that both runs load exactly the same plugins."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "test_suite.py").write_text(body)
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    env.pop("PYBROKER_TEST_BOOTSTRAP", None)
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "pybroker.testing.pytest_plugin", *args], cwd=directory, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"the suite failed in {directory}:\n{done.stdout[-4000:]}")
    return wall


def trivial_suite(n: int, fixture: str) -> str:
    return "".join(f"def test_{i}({fixture}):\n    pass\n\n" for i in range(n))


def example_suite(n: int) -> str:
    return EXAMPLE_HEAD + "".join(EXAMPLE_TEST.format(n=i) for i in range(n))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=int, default=100, help="tests per suite (100)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="runs of the example suite on each broker, alternating (1)")
    parser.add_argument("--no-kafka", action="store_true", help="skip Apache Kafka")
    args = parser.parse_args()
    n = args.tests
    work = Path(tempfile.mkdtemp(prefix="bench-testing-kit-"))

    print("1. Broker() start")
    print(f"   thread, warm process:         {median_min(thread_starts())} (of 5)")
    cold = [cold_thread_start() for _ in range(3)]
    print(f"   thread, fresh interpreter:    {median_min(cold)} (of 3; imports included)")
    print(f"   subprocess (process=True):    {median_min(process_starts())} (of 5)")

    print("2. kafka_topic per test")
    plain = run_suite(work / "plain", trivial_suite(n, "kafka_broker"))
    topics = run_suite(work / "topics", trivial_suite(n, "kafka_topic"))
    print(f"   {n} tests with kafka_broker: {plain:.2f} s; with kafka_topic: {topics:.2f} s; "
          f"overhead {(topics - plain) / n * 1000:.1f} ms a test")
    print(f"   create_topic alone: {median_min(create_topic_times(n))} (of {n})")

    print(f"3. example suite: {n} tests, each 3 records produced and consumed by a group")
    suite = example_suite(n)
    ours: list[float] = []
    theirs: list[float] = []
    kafka_starts: list[float] = []
    kafka_launches: list[float] = []
    for round_ in range(args.rounds):
        ours.append(run_suite(work / f"pybroker-{round_}", suite))
        if args.no_kafka:
            continue
        from compat.apache_kafka import ApacheKafka, classpath
        classpath()  # a first fetch is not the broker's start
        began = time.perf_counter()
        node = ApacheKafka(work / f"kafka-{round_}",
                           overrides={"group.initial.rebalance.delay.ms": 0})
        with node:
            kafka_starts.append(time.perf_counter() - began)
            kafka_launches.append(node.start_seconds or 0.0)
            theirs.append(run_suite(work / f"against-kafka-{round_}", suite,
                                    "--kafka-bootstrap", node.bootstrap))
    a = statistics.median(ours)
    print(f"   (a) pybroker plugin:           {a:.1f} s wall (pytest run, broker start "
          f"included){' median of %d' % len(ours) if len(ours) > 1 else ''}")
    if theirs:
        b, start = statistics.median(theirs), statistics.median(kafka_starts)
        launch = statistics.median(kafka_launches)
        print(f"   (b) Apache Kafka 4.1.1:        {b:.1f} s wall (pytest run); node start "
              f"{start:.1f} s (storage format + JVM launch to ApiVersions, of which the "
              f"launch {launch:.1f} s); {b + start:.1f} s together")
        print(f"   ratio Kafka / pybroker:        {b / a:.2f}x (runs only), "
              f"{(b + start) / a:.2f}x (with the node's start)")
    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
