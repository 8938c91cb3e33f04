"""Kafka 0.8's listener keys (port, host.name, advertised.host.name, advertised.port) still
start a broker where they point, and the broker says at start which key to use instead."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from compat.wire import request
from protocol.api_keys import ApiKey
from pybroker.testing.broker import StartWatch, free_port_block
from tests.helpers import ROOT, serving_broker


def test_port_and_host_name_make_the_listener(tmp_path: Path) -> None:
    """A 0.8-era server.properties: no listeners, port= and host.name=. A stock producer
    reaches the broker on that port; stderr names listeners as the key to use."""
    # num.cores is left at its default, every CPU: broker K of the node listens on port + K.
    port = free_port_block("127.0.0.1", len(os.sched_getaffinity(0)))
    config = tmp_path / "server.properties"
    config.write_text(f"broker.id=0\nport={port}\nhost.name=127.0.0.1\n"
                      f"log.dirs={tmp_path / 'logs'}\noffsets.topic.num.partitions=1\n")
    broker = subprocess.Popen([sys.executable, "-m", "pybroker", str(config)], cwd=ROOT,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)),
                              stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        assert broker.stderr is not None
        deadline = time.monotonic() + 30
        watch, serving = StartWatch(), None
        while time.monotonic() < deadline and serving is None:
            line = broker.stderr.readline()
            assert line, "broker exited:\n" + "".join(lines)
            lines.append(line)
            serving = watch.feed(line)
        assert f"listening on 127.0.0.1:{port}" in "".join(lines)
        _produce(f"127.0.0.1:{port}", "legacy-port")
        broker.send_signal(signal.SIGTERM)
        rest = broker.communicate(timeout=20)[1]
    finally:
        broker.kill()
    warned = [ln for ln in lines if "deprecated" in ln]
    expected = f"use listeners=PLAINTEXT://127.0.0.1:{port}"
    assert [re.sub(r"^\[.*?\] WARNING ", "", ln).rstrip() for ln in warned] == [
        f"Configuration 'port' is deprecated: {expected} (pybroker.config)",
        f"Configuration 'host.name' is deprecated: {expected} (pybroker.config)"]
    assert broker.returncode == 0, rest


def _produce(bootstrap: str, topic: str) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        assert producer.send(topic, b"from an old config").get(30).offset == 0
    finally:
        producer.close(5)


def test_advertised_host_name_and_port_are_what_metadata_answers(tmp_path: Path) -> None:
    """With listeners set (the test broker's ephemeral one) and advertised.listeners unset,
    advertised.host.name and advertised.port are the advertised PLAINTEXT endpoint."""
    # One broker: a node's brokers would reach each other at what they advertise, which here
    # nobody serves (as a cluster's would).
    with serving_broker(tmp_path / "logs", advertised_host_name="old.example",
                        advertised_port="1", num_cores="1") as info:
        body = request(info.bootstrap, ApiKey.METADATA, 9,
                       {"topics": [], "allow_auto_topic_creation": False})
        assert [(b.host, b.port) for b in body.brokers] == [("old.example", 1)]
