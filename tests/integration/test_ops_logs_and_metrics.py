"""Operations beyond the first /metrics (issue #17): the request log, `log.format=json`, the
broker's internal figures (purgatory, log flushes, group rebalances, open transactions) as
they move under stock clients, and /metrics held to `promtool check metrics`."""
from __future__ import annotations

import json
import logging
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.helpers import Broker
from tests.integration.http_scrape import get, scrape, value

pytestmark = pytest.mark.in_process(
    "reads the request logger's records (caplog); its module's broker also serves /metrics, "
    "one broker's page")


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(http_listeners="http://127.0.0.1:0", request_log_enable=True,
                group_initial_rebalance_delay_ms=0) as running:
        yield running


def eventually(check: Callable[[], bool], what: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def request_lines(caplog: pytest.LogCaptureFixture) -> list[dict]:
    return [r.request for r in caplog.records if r.name == "pybroker.request.logger"]


# -- the request log -------------------------------------------------------------------------------
def test_request_log_has_one_line_per_request_with_who_and_what(
        broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    broker.create_topic("o-logged")
    with caplog.at_level(logging.INFO, logger="pybroker.request.logger"):
        producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": 'ops "client"',
                             "linger.ms": 0})
        producer.produce("o-logged", b"x")
        assert producer.flush(15) == 0
        bad = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "ops-txn",
                        "transactional.id": "o-too-long", "transaction.timeout.ms": 3_600_000})
        with pytest.raises(KafkaException):
            bad.init_transactions(10)
    lines = request_lines(caplog)
    produce = [line for line in lines if line["api"] == "Produce"]
    assert len(produce) == 1
    line = produce[0]
    assert line["client_id"] == 'ops "client"' and line["principal"] == "User:ANONYMOUS"
    assert line["error"] == "NONE" and line["error_code"] == 0
    assert line["client"].startswith("127.0.0.1:") and line["version"] >= 3
    assert 0 <= line["time_ms"] < 5000
    assert {"ApiVersions", "Metadata"} <= {line["api"] for line in lines}
    # A top-level error code is logged by name (transaction.timeout.ms above the broker's max).
    init = [line for line in lines if line["api"] == "InitProducerId"]
    assert init and init[-1]["error"] == "INVALID_TRANSACTION_TIMEOUT"
    # The text line quotes the client id: a quote in it cannot end the field.
    text = next(r.getMessage() for r in caplog.records
                if getattr(r, "request", None) is line)
    assert text.startswith("Completed request: api=Produce ")
    assert 'client_id="ops \\"client\\""' in text and 'principal="User:ANONYMOUS"' in text


def test_request_log_is_off_by_default(caplog: pytest.LogCaptureFixture) -> None:
    with Broker() as quiet, caplog.at_level(logging.DEBUG, logger="pybroker.request.logger"):
        quiet.create_topic("o-quiet")
        producer = Producer({"bootstrap.servers": quiet.bootstrap})
        producer.produce("o-quiet", b"x")
        assert producer.flush(15) == 0
    assert request_lines(caplog) == []


def test_json_log_format_writes_one_object_per_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """pybroker-server with log.format=json: every stderr line, the start-up ones included
    (written before the config was read), is a JSON object with Kafka-ish fields."""
    with Broker(process=True, log_format="json", request_log_enable=True,
                no_such_key="typo") as running:
        producer = Producer({"bootstrap.servers": running.bootstrap})
        producer.produce("o-json", b"x")  # auto-created
        assert producer.flush(15) == 0
        # The line is written after the response is sent, and read from the process's
        # stderr by another thread: wait for the Produce line itself, not any request's.
        eventually(lambda: any("pybroker.request.logger" in line and '"Produce"' in line
                               for line in running.recent_log(1000)), "Produce's log line")
        lines = running.recent_log(1000)
    records = [json.loads(line) for line in lines if line.strip()]
    assert records and all({"timestamp", "level", "logger", "message"} <= set(r)
                           for r in records)
    assert any("no.such.key" in r["message"] and r["level"] == "WARNING" for r in records)
    assert any("listening on" in r["message"] for r in records)
    assert records[0]["timestamp"][10] == "T" and records[0]["timestamp"].endswith("+00:00")
    produce = [r for r in records if r["logger"] == "pybroker.request.logger"
               and r["request"]["api"] == "Produce"]
    assert produce and produce[0]["request"]["error"] == "NONE"


# -- the broker's internals ------------------------------------------------------------------------
def test_a_waiting_fetch_is_in_the_purgatory(broker: Broker) -> None:
    broker.create_topic("o-idle")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "o-unused",
                         "fetch.wait.max.ms": 5000, "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("o-idle", 0, 0)])
        consumer.poll(0.2)
        eventually(lambda: value(scrape(broker.http_port), "pybroker_purgatory_size",
                                 delayed_operation="Fetch") >= 1, "a fetch in the purgatory")
    finally:
        consumer.close()
    eventually(lambda: value(scrape(broker.http_port), "pybroker_purgatory_size",
                             delayed_operation="Fetch") == 0, "the purgatory to empty")


def test_log_flushes_are_timed(broker: Broker) -> None:
    broker.create_topic("o-flushed", config={"flush.messages": 1})
    before = value(scrape(broker.http_port), "pybroker_log_flush_duration_seconds_count")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(3):
        producer.produce("o-flushed", b"x")
        assert producer.flush(15) == 0
    samples = scrape(broker.http_port)
    count = value(samples, "pybroker_log_flush_duration_seconds_count")
    assert count >= before + 3
    assert value(samples, "pybroker_log_flush_duration_seconds_bucket", le="+Inf") == count
    assert value(samples, "pybroker_log_flush_duration_seconds_sum") > 0


def test_group_rebalances_are_counted(broker: Broker) -> None:
    broker.create_topic("o-grouped", partitions=2)
    before = value(scrape(broker.http_port), "pybroker_group_rebalances_total")
    consumers = []
    try:
        for n in range(2):
            consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "o-group",
                                 "session.timeout.ms": 6000})
            consumer.subscribe(["o-grouped"])
            consumers.append(consumer)

            def assigned(c: Consumer = consumer) -> bool:
                for other in consumers:
                    other.poll(0.05)
                return bool(c.assignment())
            eventually(assigned, f"consumer {n} to be assigned", timeout=30)
        # One rebalance for the first member, at least one more for the second.
        assert value(scrape(broker.http_port), "pybroker_group_rebalances_total") >= before + 2
    finally:
        for consumer in consumers:
            consumer.close()


def test_open_transactions_are_counted(broker: Broker) -> None:
    broker.create_topic("o-txn")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "o-t1"})
    producer.init_transactions(15)
    assert value(scrape(broker.http_port), "pybroker_transactions_open") == 0
    producer.begin_transaction()
    producer.produce("o-txn", b"x")
    assert producer.flush(15) == 0
    assert value(scrape(broker.http_port), "pybroker_transactions_open") == 1
    producer.commit_transaction(15)
    eventually(lambda: value(scrape(broker.http_port), "pybroker_transactions_open") == 0,
               "the transaction to complete")


# -- promtool ---------------------------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("promtool") is None,
                    reason="needs promtool (Debian's prometheus package; bin/test installs it)")
def test_metrics_pass_promtool_check_metrics(broker: Broker) -> None:
    """Every family the broker serves, with traffic behind it (the tests above ran first,
    in this module), passes Prometheus' own linter without a warning."""
    broker.create_topic("o-linted")
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("o-linted", b"x")
    assert producer.flush(15) == 0
    status, body, _ = get(broker.http_port, "/metrics")
    assert status == 200 and b"kafka_topic_partition_current_offset" in body
    checked = subprocess.run(["promtool", "check", "metrics"], input=body,
                             capture_output=True, timeout=60)
    assert (checked.returncode, checked.stdout, checked.stderr) == (0, b"", b"")
