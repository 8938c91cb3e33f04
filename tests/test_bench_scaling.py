"""The bench's scale workload (tests/bench/bench_scaling.py, issue #15 §3) kept from rotting:
each point runs against the session broker with tiny counts, and what the table is built from
(the series' flags, the first-to-last summary) is checked. No figure is judged here: the
machine is shared; bin/pybroker-bench measures."""
from __future__ import annotations

import argparse
import os
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException

from protocol.api_keys import ApiKey
from tests.bench import bench_scaling
from tests.bench.bench_scaling import (
    bench_connections_point, bench_partitions_point, create_wide_topic, hold_connections,
    wait_partitions_ready,
)
from tests.integration.raw import RawConnection

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/status"),
                                reason="the bench reads RSS from /proc")


def _name(kind: str) -> str:
    return f"scale-{kind}-{uuid.uuid4().hex[:8]}"


def _log_end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
        {"partition_index": p, "timestamp": -1, "current_leader_epoch": -1}
        for p in range(partitions)]}]}
    with RawConnection(bootstrap) as conn:
        answer = conn.request(ApiKey.LIST_OFFSETS, 7, body)
    assert answer is not None
    return [p.offset for p in sorted(answer.topics[0].partitions,
                                     key=lambda p: p.partition_index)]


def test_partitions_point_spreads_the_volume_and_reads_it_back(kafka_bootstrap: str) -> None:
    topic = _name("partitions")
    point = bench_partitions_point(kafka_bootstrap, os.getpid(), topic, 20, 2_000)
    assert point.partitions == 20 and not point.stepped
    assert point.produce.records == 2_000 and point.produce.size == 1024
    # The clock starts at the first records received, not counted: a consumer may get
    # all of so few at once.
    assert point.consume.records <= 2_000
    assert point.create_seconds > 0 and point.rss_mb > 0
    assert _log_end_offsets(kafka_bootstrap, topic, 20) == [100] * 20  # round-robin


def test_held_connections_each_see_the_topic(kafka_bootstrap: str, kafka_broker) -> None:
    topic = _name("held")
    kafka_broker.create_topic(topic, partitions=3)
    wait_partitions_ready(kafka_bootstrap, topic, 3)
    held = hold_connections(kafka_bootstrap, 30, topic, 3)
    try:
        assert (len(held.conns), held.failed, held.errors) == (30, 0, [])
    finally:
        held.close()
    # A Metadata answer that does not name every partition is a failure, with its reason.
    wrong = hold_connections(kafka_bootstrap, 7, topic, 4)
    assert (len(wrong.conns), wrong.failed) == (0, 7)
    assert wrong.errors[0] == "RuntimeError: Metadata named 3 of 4 partitions"
    assert wrong.errors[-1] == "... 2 more" and len(wrong.errors) == 6


def test_connections_point_holds_them_through_the_produce(kafka_bootstrap: str) -> None:
    point = bench_connections_point(kafka_bootstrap, os.getpid(), _name("conns"), 25, 2_000)
    assert (point.connections, point.opened, point.failed, point.errors) == (25, 25, 0, [])
    assert point.produce.records == 2_000
    assert 0 < point.metadata_p50_ms <= point.metadata_p99_ms
    assert point.rss_per_connection_kb is not None


def test_a_refused_wide_topic_is_made_in_steps(kafka_bootstrap: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka's controller refuses a CreateTopics of over 10,000 records: the topic is then
    made from a CreateTopics of one step and CreatePartitions of a step at a time."""
    real = bench_scaling.create_topic
    asked: list[int] = []

    def refusing(bootstrap: str, name: str, partitions: int) -> None:
        asked.append(partitions)
        if partitions > 5:
            raise KafkaException(KafkaError(KafkaError.POLICY_VIOLATION, "too large"))
        real(bootstrap, name, partitions)

    monkeypatch.setattr(bench_scaling, "create_topic", refusing)
    topic = _name("wide")
    assert create_wide_topic(kafka_bootstrap, topic, 12, step=5) is True
    assert asked == [12, 5]
    wait_partitions_ready(kafka_bootstrap, topic, 12)
    assert len(_log_end_offsets(kafka_bootstrap, topic, 12)) == 12
    # Small topics and other errors are not retried in steps.
    with pytest.raises(KafkaException):
        create_wide_topic(kafka_bootstrap, _name("small"), 5 + 1, step=10)


def test_a_topic_that_never_gets_ready_times_out(kafka_bootstrap: str) -> None:
    with pytest.raises(RuntimeError, match="3 of 3 partitions not ready"):
        wait_partitions_ready(kafka_bootstrap, _name("missing"), 3, timeout=0.3)


def test_series_flags_and_the_first_to_last_summary() -> None:
    from tests.bench import peer_bench

    parser = argparse.ArgumentParser()
    assert peer_bench._counts(parser, "--x", "10,100,5000") == (10, 100, 5000)
    for bad in ("100,10", "0,10", "10,10", "ten", ""):
        with pytest.raises(SystemExit):
            peer_bench._counts(parser, "--x", bad)
    results = peer_bench.Results(columns=("pybroker", "kafka"))
    peer_bench._scale_summary(results, "partitions", (10, 100, 1000), [
        ("produce throughput kept", "%", "higher",
         {"pybroker": {10: 200.0, 1000: 50.0}, "kafka": {10: 100.0, 1000: 50.0}}),
        ("Metadata p99 growth", "x", "lower", {"pybroker": {10: 1.0, 1000: 3.0},
                                               "kafka": {10: 2.0}}),  # no last point
        ("RSS growth", "MB", "lower", {"pybroker": {10: 40.0, 1000: 45.5}})])
    kept = results.by_name("scale: 10 -> 1,000 partitions", "produce throughput kept")
    growth = results.by_name("scale: 10 -> 1,000 partitions", "Metadata p99 growth")
    rss = results.by_name("scale: 10 -> 1,000 partitions", "RSS growth")
    assert kept and growth and rss
    assert results.median(kept, "pybroker") == 25.0 and results.median(kept, "kafka") == 50.0
    assert results.ratio(kept, "kafka") == 0.5
    assert results.median(growth, "pybroker") == 3.0 and results.median(growth, "kafka") is None
    assert results.median(rss, "pybroker") == 5.5


def test_multicore_low_load_flags_reach_the_workload(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #29 item 5 needs more low-load turns than throughput rounds on a shared VM."""
    from tests.bench import bench_multicore, peer_bench

    seen: dict[str, object] = {}

    def fake(*args: object, **kwargs: object) -> str:
        seen.update(kwargs)
        return "ran"

    monkeypatch.setattr(bench_multicore, "bench_multicore", fake)
    parser = argparse.ArgumentParser()

    def args(**over: object) -> argparse.Namespace:
        base: dict[str, object] = dict(
            multicore_setups="single,node", cores=2, count=None, quick=False, rounds=None,
            multicore_producers="1", multicore_latency_turns=None,
            multicore_latency_seconds=None)
        base.update(over)
        return argparse.Namespace(**base)

    assert peer_bench.run_multicore(parser, args(multicore_latency_turns=24,
                                                 multicore_latency_seconds=8.0)) == "ran"
    assert seen == {"latency_seconds": 8.0, "latency_turns": 24}
    assert peer_bench.run_multicore(parser, args(quick=True)) == "ran"
    assert seen == {"latency_seconds": 3.0, "latency_turns": None}
    for bad in ({"multicore_latency_turns": 0}, {"multicore_latency_seconds": 0.0}):
        with pytest.raises(SystemExit):
            peer_bench.run_multicore(parser, args(**bad))
