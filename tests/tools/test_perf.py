"""kafka-producer-perf-test and kafka-consumer-perf-test: Kafka's summary lines."""
from __future__ import annotations

import re

from pybroker.tools import consumer_perf_test, producer_perf_test, topics

PRODUCER_SUMMARY = re.compile(
    r"^(\d+) records sent, \d+\.\d{6} records/sec \(\d+\.\d{2} MB/sec\), \d+\.\d{2} ms avg "
    r"latency, \d+\.\d{2} ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, "
    r"\d+ ms 99\.9th\.$")
CONSUMER_HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
                   "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
DATE = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"
NUMBER = r"(?:\d+\.\d{4}|Infinity|NaN)"
CONSUMER_LINE = re.compile(rf"^{DATE}, {DATE}, {NUMBER}, {NUMBER}, (\d+), {NUMBER}, (\d+), "
                           rf"-?\d+, {NUMBER}, {NUMBER}$")


def test_produce_then_consume(tool, bootstrap, name) -> None:
    t = name("perf")
    assert tool(topics.main, "--bootstrap-server", bootstrap, "--create", "--topic", t,
                "--partitions", "2").rc == 0
    r = tool(producer_perf_test.main, "--topic", t, "--num-records", "3000", "--record-size",
             "100", "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}",
             "acks=1", "linger.ms=1")
    assert r.rc == 0, r.err
    m = PRODUCER_SUMMARY.match(r.lines[-1])
    assert m and m.group(1) == "3000", r.lines[-1]

    r = tool(consumer_perf_test.main, "--bootstrap-server", bootstrap, "--topic", t,
             "--messages", "3000", "--timeout", "5000")
    assert r.rc == 0, r.err
    assert r.lines[0] == CONSUMER_HEADER
    m = CONSUMER_LINE.match(r.lines[1])
    assert m and m.group(1) == "3000", r.lines[1]
    assert r.lines[1].split(", ")[2] == "0.2861"  # 3000 * 100 bytes in MB

    r = tool(consumer_perf_test.main, "--bootstrap-server", bootstrap, "--topic", t,
             "--messages", "5000", "--timeout", "500", "--group", name("perf-group"),
             "--hide-header")
    assert r.rc == 0
    assert r.lines[0].startswith("WARNING: Exiting before consuming the expected number of "
                                 "messages: timeout (500 ms) exceeded.")
    m = CONSUMER_LINE.match(r.lines[1])
    assert m and m.group(1) == "3000", r.lines


def test_throttled_progress_lines(tool, bootstrap, name, monkeypatch) -> None:
    monkeypatch.setattr(producer_perf_test, "REPORTING_INTERVAL_MS", 200)
    t = name("perf")
    assert tool(topics.main, "--bootstrap-server", bootstrap, "--create", "--topic", t).rc == 0
    r = tool(producer_perf_test.main, "--bootstrap-server", bootstrap, "--topic", t,
             "--num-records", "100", "--payload-monotonic", "--throughput", "200")
    assert r.rc == 0, r.err
    progress = [x for x in r.lines[:-1]]
    assert progress and all(re.fullmatch(r"\d+ records sent, \d+\.\d records/sec \(\d+\.\d\d "
                                         r"MB/sec\), \d+\.\d ms avg latency, \d+\.\d ms max "
                                         r"latency\.", x) for x in progress), r.lines
    assert PRODUCER_SUMMARY.match(r.lines[-1])


def test_payload_file(tool, bootstrap, name, tmp_path) -> None:
    t = name("perf")
    assert tool(topics.main, "--bootstrap-server", bootstrap, "--create", "--topic", t).rc == 0
    payloads = tmp_path / "payloads.txt"
    payloads.write_text("one\ntwo\nthree\n")
    r = tool(producer_perf_test.main, "--bootstrap-server", bootstrap, "--topic", t,
             "--num-records", "10", "--payload-file", str(payloads), "--throughput", "-1")
    assert r.rc == 0
    assert r.lines[:2] == [f"Reading payloads from: {payloads}", "Number of messages read: 3"]


def test_errors(tool, bootstrap) -> None:
    r = tool(producer_perf_test.main, "--bootstrap-server", bootstrap, "--topic", "x",
             "--num-records", "1", "--throughput", "-1")
    assert r.rc == 1 and "Either --record-size or --payload-file" in r.err
    r = tool(producer_perf_test.main, "--bootstrap-server", bootstrap, "--topic", "ghost",
             "--num-records", "1", "--record-size", "1", "--throughput", "-1")
    assert (r.rc, r.err) == (1, "Error: Topic 'ghost' does not exist.\n")
    r = tool(producer_perf_test.main, "--topic", "x", "--num-records", "1", "--record-size", "1",
             "--throughput", "-1")
    assert (r.rc, r.err) == (1, 'Missing required argument "[bootstrap-server]"\n')
    r = tool(producer_perf_test.main, "--bootstrap-server", "127.0.0.1:1", "--topic", "x",
             "--num-records", "1", "--record-size", "1", "--throughput", "-1")
    assert (r.rc, r.err) == (1, "Error: Could not connect to 127.0.0.1:1 (Connection refused)\n")
    r = tool(consumer_perf_test.main, "--bootstrap-server", bootstrap, "--topic", "ghost",
             "--messages", "1")
    assert r.rc == 1 and r.err == "Error: Topic 'ghost' does not exist.\n"
    r = tool(consumer_perf_test.main, "--bootstrap-server", bootstrap, "--topic", "x")
    assert (r.rc, r.err) == (1, 'Missing required argument "[messages]"\n')
