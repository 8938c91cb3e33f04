"""What a start pays before its listeners bind (issue #15 §3: start to listening at most a
tenth of Apache Kafka's). A default single broker imports no code it does not serve with
until it is used, and a start with many partitions on disk logs one line a topic, not one a
partition."""
from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from pybroker.testing import Broker
from tests.helpers import ROOT

# Loaded on first use, never by a default start: the metrics registry and the HTTP side door
# (without http.listeners), the cluster's code (without zookeeper.connect), the client
# library's admin/consumer/producer and SCRAM, and crc32c with the importlib.metadata it
# reads its version through (until a checksum is needed).
NOT_AT_START = {
    "prometheus_client", "h11", "kazoo", "scramp", "asn1crypto", "crc32c",
    "importlib.metadata", "pybroker.ops.metrics", "pybroker.ops.http_server",
    "pybroker.ops.endpoints", "pybroker.ops.status.page", "pybroker.cluster.zk_store",
    "pybroker.controller.controller", "pybroker.replica.fetcher",
    "pybroker.client.connection", "pybroker.client.admin", "pybroker.client.consumer",
    "pybroker.client.producer",
}

_MODULES_AT_LISTENING = """
import logging, os, sys
class AtListening(logging.Handler):
    def emit(self, record):
        if "listening on" in record.getMessage():
            print(" ".join(sorted(sys.modules)), flush=True)
            os._exit(0)
logging.getLogger().addHandler(AtListening())
sys.argv = ["pybroker", "--defaults", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
            "--override", "log.dirs=" + sys.argv[1]]
from pybroker.__main__ import main
main()
"""


def test_a_default_start_imports_only_what_it_serves_with(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _MODULES_AT_LISTENING, str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    loaded = set(done.stdout.split())
    assert "pybroker.handlers.produce" in loaded, done.stderr[-2000:]  # it did start
    assert not NOT_AT_START & loaded


def test_a_restart_logs_leadership_once_a_topic() -> None:
    broker = Broker(keep=True).start()
    try:
        broker.create_topic("wide", partitions=40)
        broker.create_topic("narrow", partitions=2)
        broker.restart()
        deadline = time.monotonic() + 10
        while not any("leads 2 of the 2 partitions of narrow" in line
                      for line in broker.recent_log(400)) and time.monotonic() < deadline:
            time.sleep(0.05)
        lines = broker.recent_log(400)
        since_restart = lines[max(i for i, line in enumerate(lines) if "shut down" in line):]
        assert sum("leads 40 of the 40 partitions of wide" in line
                   for line in since_restart) == 1
        assert sum("leads 2 of the 2 partitions of narrow" in line
                   for line in since_restart) == 1
        assert not any(" leads wide-" in line for line in since_restart)
    finally:
        broker.stop()
        if broker.log_dir is not None:
            shutil.rmtree(broker.log_dir, ignore_errors=True)
