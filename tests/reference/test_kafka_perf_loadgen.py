"""Kafka's perf tools as peer_bench's second load generator, and the latency rates (issue #15 §3).

The summary parsers are held to lines the 4.1.1 tools printed; one test runs both tools (two
JVMs with the scripts' performance flags, a few seconds) against a pybroker child process, so
a flag the tools refuse or a summary they print differently fails here rather than in the
lead's benchmark run. Like the other reference tests it fails where Java or Maven is missing.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from compat import kafka_tools
from compat.apache_kafka import ApacheKafkaUnavailable
from tests.bench import kafka_perf, peer_bench
from tests.bench.bench_broker import QUIET
from tests.bench.kafka_perf import (
    PERF_JVM, PerfToolError, parse_consumer_summary, parse_producer_summary, perf_consume,
    perf_produce,
)
from tests.bench.peer_bench import Metric, Results, latency_metrics, throughput_metrics
from tests.helpers import BrokerProcess

PRODUCER_OUT = (
    "112367 records sent, 22469.0 records/sec (21.94 MB/sec), 1020.9 ms avg latency, "
    "1466.0 ms max latency.\n"
    "300000 records sent, 62695.9 records/sec (61.23 MB/sec), 8.27 ms avg latency, "
    "286.00 ms max latency, 6 ms 50th, 18 ms 95th, 38 ms 99th, 47 ms 99.9th.\n")
CONSUMER_OUT = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n"
    "2026-12-02 02:06:19:043, 2026-12-02 02:06:19:461, 1.9073, 4.5630, 20000, 47846.8900, "
    "322, 96, 19.8682, 208333.3333\n")


def test_producer_summary_is_the_total_line_not_a_window_line() -> None:
    s = parse_producer_summary(PRODUCER_OUT)
    assert (s.records, s.rec_s, s.mib_s, s.avg_ms, s.p99_ms) == (300000, 62695.9, 61.23, 8.27, 38)
    with pytest.raises(PerfToolError, match="no summary line"):
        parse_producer_summary(PRODUCER_OUT.splitlines()[0])


def test_consumer_summary_reads_the_row_under_the_header() -> None:
    s = parse_consumer_summary("WARN something on stdout\n" + CONSUMER_OUT)
    header, row = CONSUMER_OUT.splitlines()
    gave_up = parse_consumer_summary(f"{header}\nWARNING: Exiting before consuming the "
                                     f"expected number of messages: timeout (1000 ms) "
                                     f"exceeded.\n{row}")
    assert gave_up == s
    assert (s.records, s.mib, s.rebalance_ms, s.fetch_ms) == (20000, 1.9073, 322, 96)
    assert (s.fetch_mib_s, s.fetch_rec_s) == (19.8682, 208333.3333)
    with pytest.raises(PerfToolError, match="no summary row"):
        parse_consumer_summary(CONSUMER_OUT.splitlines()[0])
    with pytest.raises(PerfToolError, match="no header"):
        parse_consumer_summary(CONSUMER_OUT.splitlines()[1])


def test_short_or_odd_runs_are_errors_not_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    header, row = CONSUMER_OUT.splitlines()
    outputs = {
        "short consume": f"{header}\nWARNING: Exiting before consuming the expected number "
                         f"of messages: timeout (30000 ms) exceeded.\n{row}\n",
        "short produce": PRODUCER_OUT.replace("300000 records sent, 62695.9",
                                              "299999 records sent, 62695.9"),
    }
    ran: list[str] = []

    def fake_run(tool: str, args: list[str], pid: int) -> tuple[str, float, float, int]:
        ran.append(tool)
        return outputs[which], 0.1, 1.0, 1024
    monkeypatch.setattr(kafka_perf, "_run", fake_run)
    monkeypatch.setattr(kafka_perf, "create_topic", lambda *args: None)
    which = "short consume"
    with pytest.raises(PerfToolError, match="consumed 20000 of 20001 records"):
        kafka_perf.perf_consume("b:9092", 1, "t", 100, 20001)
    # 20,000 records of 100 B are 1.9073 MB; of 1,000 B they would be 19.07 MB.
    with pytest.raises(PerfToolError, match="reported 1.9073 MB"):
        kafka_perf.perf_consume("b:9092", 1, "t", 1000, 20000)
    assert kafka_perf.perf_consume("b:9092", 1, "t", 100, 20000).seconds == 0.096
    which = "short produce"
    with pytest.raises(PerfToolError, match="299999 of 300000 records acknowledged"):
        kafka_perf.perf_produce("b:9092", 1, "t", 1, 1024, 300000, "1")
    which = "produce"
    outputs["produce"] = PRODUCER_OUT
    with pytest.raises(PerfToolError, match="reported 61.23 MB"):  # 62,695.9 x 1 KB is 61.23
        kafka_perf.perf_produce("b:9092", 1, "t", 1, 2048, 300000, "1")
    t = kafka_perf.perf_produce("b:9092", 1, "t", 1, 1024, 300000, "1")
    assert t.rec_s == pytest.approx(62695.9) and t.broker_cpu == 0.1
    assert ran == ["kafka-consumer-perf-test"] * 3 + ["kafka-producer-perf-test"] * 3


def test_perf_tools_run_with_the_scripts_jvm_flags() -> None:
    cmd = kafka_tools.command("kafka-producer-perf-test", ["--help"], jvm=PERF_JVM)
    assert "-Xmx512M" in cmd and "-XX:+UseG1GC" in cmd
    assert "-XX:TieredStopAtLevel=1" not in cmd  # the CLI default stops the JIT at C1
    assert "-XX:TieredStopAtLevel=1" in kafka_tools.command("kafka-topics", ["--list"])


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    try:
        kafka_tools.classpath()
    except ApacheKafkaUnavailable as exc:
        pytest.fail(f"Kafka's tools are unavailable: {exc}", pytrace=False)
    b = BrokerProcess(Path(tmp_path_factory.mktemp("loadgen"))).start(timeout=60)
    yield b
    b.stop()


def test_kafka_perf_produces_round_robin_and_consumes_every_record(broker: BrokerProcess) -> None:
    assert broker.proc is not None
    pid = broker.proc.pid
    produced = perf_produce(broker.bootstrap, pid, "loadgen", 2, 100, 3000, "all")
    assert (produced.records, produced.size) == (3000, 100)
    assert produced.seconds > 0 and produced.peak_rss_kb > 0
    assert produced.client_cpu > 0.5  # a JVM's start alone costs more: it was counted
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "loadgen-check", **QUIET})
    highs = [c.get_watermark_offsets(TopicPartition("loadgen", p), timeout=10)[1]
             for p in range(2)]
    c.close()
    assert highs == [1500, 1500]  # the round-robin partitioner, as confluent's runs spread
    consumed = perf_consume(broker.bootstrap, pid, "loadgen", 100, 3000)
    assert consumed.records == 3000 and consumed.seconds > 0


def test_sections_name_the_load_generator() -> None:
    confluent = throughput_metrics(1024, 8, "all")["mb_s"]
    java = throughput_metrics(1024, 8, "all", "kafka-perf")["mb_s"]
    consume = throughput_metrics(10240, 1, None, "kafka-perf")["mb_s"]
    assert confluent.section == "produce 1024 B, 8 partitions, acks=all (confluent-kafka)"
    assert java.section == "produce 1024 B, 8 partitions, acks=all (kafka-producer-perf-test)"
    assert consume.section == "consume 10240 B, 1 partition (kafka-consumer-perf-test)"
    assert java.kafka_target == consume.kafka_target == 1.0


def test_latency_at_50000_is_held_to_kafkas_p99() -> None:
    m = latency_metrics(50_000)
    assert m["p99"].section == "latency 50,000 rec/s, 100 B, acks=1, linger.ms=0"
    assert m["p99"].target is None and m["p99"].kafka_target == 1.0
    assert latency_metrics(5000)["p99"].target == 5.0
    results = Results(columns=("pybroker", "kafka"))

    def verdict(mine: float, kafka: float) -> str:
        p99: Metric = m["p99"]
        results.values.pop(p99, None)
        results.add(p99, "pybroker", mine)
        results.add(p99, "kafka", kafka)
        return results.rows()[-1][-1]
    assert verdict(4.0, 4.0) == "/kafka <= 1: ok"
    assert verdict(4.1, 4.0) == "/kafka <= 1: MISSED"


@pytest.mark.parametrize("argv, message", [
    (["--loadgen", "jmeter"], "--loadgen: choose from"),
    (["--loadgen", "kafka-perf,kafka-perf"], "--loadgen: choose from"),
    (["--rates", "5000,0"], "--rates: positive"),
    (["--rates", "fast"], "--rates: positive"),
])
def test_command_line_refuses_bad_loadgen_and_rates(argv: list[str], message: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        peer_bench.main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
