"""Kafka Connect (4.1.1) against pybroker (issue #14), as in Kafka's quickstart.

Standalone: `FileStreamSourceConnector` reads a file into a topic, `FileStreamSinkConnector`
writes the topic into another file, with the JsonConverter's schema wrapper on the topic.
Distributed: one worker creates its compacted config/offset/status topics on pybroker, joins
its group with the `connect` protocol, and runs a connector created through its REST API;
stopped and started again, it resumes from its committed source offset (no line lost or
repeated). The standalone test ends with the quickstart's console-consumer check.
Each test is one Connect JVM (about 10 s of start-up on a loaded machine) against one
pybroker process for the module.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from compat.apache_kafka import free_port
from compat.streams import Jvm
from pybroker.testing import Broker
from tests.compat.eco_helpers import (consume_until, require_classpath, topic_config,
                                      wait_for_topics)
from tests.helpers import ROOT

JSON = "org.apache.kafka.connect.json.JsonConverter"


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    require_classpath()
    # A process, so that the suite's PYBROKER_NUM_CORES=2 runs this against a node of two
    # brokers, as the default of all cores will (issue #29 item 3); one broker otherwise.
    with Broker(process=True, group_initial_rebalance_delay_ms=0,
                offsets_topic_num_partitions=3) as b:
        yield b


def properties(path: Path, entries: dict[str, object]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in entries.items()))
    return path


def wait_for_lines(path: Path, want: list[str], timeout: float, worker: Jvm) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        have = path.read_text().splitlines() if path.exists() else []
        if have == want:
            return have
        if time.monotonic() > deadline or not worker.running:
            raise AssertionError(f"{path.name} has {have}, not {want}:\n{worker.tail()}")
        time.sleep(0.3)


def test_standalone_file_source_to_file_sink(broker: Broker, tmp_path: Path) -> None:
    source, sink = tmp_path / "test.txt", tmp_path / "test.sink.txt"
    source.write_text("foo\nbar\n")
    worker = properties(tmp_path / "connect-standalone.properties", {
        "bootstrap.servers": broker.bootstrap,
        "key.converter": JSON, "value.converter": JSON,
        "key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true",
        "offset.storage.file.filename": tmp_path / "connect.offsets",
        "offset.flush.interval.ms": 1000,
        "listeners": "http://127.0.0.1:0",
    })
    source_conf = properties(tmp_path / "connect-file-source.properties", {
        "name": "local-file-source", "tasks.max": 1,
        "connector.class": "FileStreamSource", "file": source, "topic": "connect-test"})
    sink_conf = properties(tmp_path / "connect-file-sink.properties", {
        "name": "local-file-sink", "tasks.max": 1,
        "connector.class": "FileStreamSink", "file": sink, "topics": "connect-test"})
    connect = Jvm(tmp_path, "connect-standalone", "org.apache.kafka.connect.cli.ConnectStandalone",
                  [worker, source_conf, sink_conf], log_level="INFO").start()
    try:
        wait_for_lines(sink, ["foo", "bar"], 90, connect)
        with source.open("a") as f:
            f.write("another line\n")
        wait_for_lines(sink, ["foo", "bar", "another line"], 30, connect)
    finally:
        connect.stop()

    records = consume_until(broker.bootstrap, "connect-test", lambda rs: len(rs) >= 3,
                            timeout=20)
    assert [json.loads(v) for _, v in records] == [
        {"schema": {"type": "string", "optional": False}, "payload": line}
        for line in ("foo", "bar", "another line")]
    # The quickstart's last step: the topic read by (our) kafka-console-consumer.
    consumed = subprocess.run(
        [sys.executable, "-m", "pybroker.tools.console_consumer", "--bootstrap-server",
         broker.bootstrap, "--topic", "connect-test", "--from-beginning", "--max-messages", "3"],
        capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == [
        '{"schema":{"type":"string","optional":false},"payload":"%s"}' % line
        for line in ("foo", "bar", "another line")], consumed.stdout
    assert not connect.errors(), connect.errors()


def rest(port: int, method: str, path: str, body: object | None = None) -> object:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


def test_distributed_worker_rest_connector_and_restart(broker: Broker, tmp_path: Path) -> None:
    internal = {"config": "connect-configs", "offset": "connect-offsets",
                "status": "connect-status"}
    port = free_port()
    worker = properties(tmp_path / "connect-distributed.properties", {
        "bootstrap.servers": broker.bootstrap,
        "group.id": "connect-cluster",
        "key.converter": JSON, "value.converter": JSON,
        **{f"{kind}.storage.topic": name for kind, name in internal.items()},
        **{f"{kind}.storage.replication.factor": 1 for kind in internal},
        "offset.storage.partitions": 5, "status.storage.partitions": 2,
        "offset.flush.interval.ms": 1000,
        "listeners": f"http://127.0.0.1:{port}",
    })
    connect = Jvm(tmp_path, "connect-distributed", "org.apache.kafka.connect.cli.ConnectDistributed",
                  [worker], log_level="INFO").start()
    source = tmp_path / "lines.txt"
    source.write_text("one\ntwo\n")
    try:
        connect.wait_for(r"Kafka Connect started", 90)  # REST resources ready
        rest(port, "POST", "/connectors", {"name": "lines", "config": {
            "connector.class": "FileStreamSource", "tasks.max": "1",
            "file": str(source), "topic": "lines"}})
        records = consume_until(broker.bootstrap, "lines", lambda rs: len(rs) >= 2, timeout=60)
        assert [json.loads(v)["payload"] for _, v in records] == ["one", "two"], connect.tail()
        status = rest(port, "GET", "/connectors/lines/status")
        assert isinstance(status, dict) and status["connector"]["state"] == "RUNNING", status
    finally:
        connect.stop()
    first = connect

    # Restarted without loss: lines appended while the worker is down are read from the
    # source offset it committed to connect-offsets, each once, in order.
    with source.open("a") as f:
        f.write("three\nfour\n")
    connect = Jvm(tmp_path, "connect-distributed-again",
                  "org.apache.kafka.connect.cli.ConnectDistributed", [worker],
                  log_level="INFO").start()
    want = ["one", "two", "three", "four"]
    try:
        records = consume_until(broker.bootstrap, "lines", lambda rs: len(rs) >= 4, timeout=90)
        assert [json.loads(v)["payload"] for _, v in records] == want, connect.tail()
        # a few more seconds for a duplicate (a re-read from offset 0) to show up
        records = consume_until(broker.bootstrap, "lines", lambda rs: len(rs) > 4, timeout=5)
        assert [json.loads(v)["payload"] for _, v in records] == want, connect.tail()
    finally:
        connect.stop()

    assert set(internal.values()) <= wait_for_topics(broker.bootstrap, set(internal.values()))
    for name in internal.values():
        assert topic_config(broker.bootstrap, name)["cleanup.policy"] == "compact", name
    for run in (first, connect):
        assert not run.errors(), run.errors()
