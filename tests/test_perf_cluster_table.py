"""The cluster workload's table (tests/bench/peer_bench.py cluster_results, issue #15 §3):
fed a made-up run, it must show Kafka's three nodes as a column, divide pybroker's cluster
by it and judge the /kafka targets; without Kafka the table is the cluster against one broker."""
from __future__ import annotations

from tests.bench.bench_broker import Latency, Throughput
from tests.bench.bench_cluster import ClusterRun, Load
from tests.bench.peer_bench import cluster_results


def load(mb_s: float, cpu_s: float, p99: float) -> Load:
    # 100,000 records of 1 KB (102.4 MB) in 102.4 / mb_s seconds, `cpu_s` broker CPU-seconds.
    t = Throughput(100_000, 1024, 102.4 / mb_s, cpu_s, 1.0, 300 * 1024)
    lat = Latency(5000, 5000, 5000.0, p99 / 4, p99, p99 * 2, p99 * 3, 1.0)
    return Load(produce={1: t}, consume={1: t}, latency=lat)


def row(results, section: str, figure: str) -> tuple[str, ...]:  # type: ignore[no-untyped-def]
    rows = results.rows()
    at = next(i for i, r in enumerate(rows) if r[0].startswith(section))
    return next(r for r in rows[at:] if r[1].startswith(figure))


def test_the_kafka_cluster_is_a_column_with_its_targets() -> None:
    run = ClusterRun(kill_s=[3.0], term_s=[0.5],
                     idle_rss_mb={"cluster": 150.0, "kafka": 1000.0, "single": 50.0},
                     loads={"cluster": [load(100, 0.5, 20), load(120, 0.5, 30)],
                            "kafka": [load(80, 0.2, 40), load(90, 0.2, 10)],
                            "single": [load(200, 0.2, 5)]})
    results = cluster_results(run)
    assert results.columns == ("3 brokers, RF 3", "1 broker", "kafka")
    header = results.rows()[0]
    assert header[-3:] == ("ratio /1 broker", "ratio /kafka", "target")
    produce = row(results, "produce 1 KB, acks=all, 1 partition", "throughput")
    # medians: 110 / 200 = 0.55 (>= 0.4) and 110 / 85 = 1.29 (>= 1)
    assert produce[2:7] == ("110.0", "200.0", "85.0", "0.55", "1.29")
    assert produce[7] == "/1 broker >= 0.4: ok; /kafka >= 1: ok"
    cpu = row(results, "produce 1 KB, acks=all, 1 partition", "broker CPU per GB")
    assert cpu[7] == "/kafka <= 1.5: MISSED"  # 0.5 / 0.2 = 2.5
    p99 = row(results, "latency 5,000 rec/s", "p99")
    assert p99[2:5] == ("25.00", "5.00", "25.00") and p99[7] == "/kafka <= 1: ok"
    assert row(results, "memory", "idle RSS")[7] == "/kafka <= 0.2: ok"  # 0.15
    assert any("Apache Kafka KRaft nodes" in note for note in results.notes)


def test_without_kafka_the_cluster_is_against_one_broker() -> None:
    run = ClusterRun(idle_rss_mb={"cluster": 150.0, "single": 50.0},
                     loads={"cluster": [load(100, 0.5, 20)], "single": [load(200, 0.2, 5)]})
    results = cluster_results(run)
    assert results.columns == ("3 brokers, RF 3", "1 broker")
    produce = row(results, "produce 1 KB, acks=all, 1 partition", "throughput")
    assert produce[2:] == ("100.0", "200.0", "0.50", "/1 broker >= 0.4: ok")
    assert not any("kafka" in note for note in results.notes)
