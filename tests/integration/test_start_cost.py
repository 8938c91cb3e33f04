"""What a start pays before its listeners bind (issue #15 §3: start to listening at most a
tenth of Apache Kafka's). A single broker imports no code it does not serve with until it is
used; the default start, a node of one broker a CPU (num.cores=-1), runs a supervisor that
imports none of the broker's and brokers that import only what a cluster's member serves
with; and a start with many partitions on disk logs one line a topic, not one a partition."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pybroker.testing.broker import StartWatch, free_port_block
from tests.helpers import ROOT, Broker

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
            "--override", "log.dirs=" + sys.argv[1], "--override", "num.cores=1"]
from pybroker.__main__ import main
main()
"""


def test_a_single_broker_imports_only_what_it_serves_with(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _MODULES_AT_LISTENING, str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    loaded = set(done.stdout.split())
    assert "pybroker.handlers.produce" in loaded, done.stderr[-2000:]  # it did start
    assert not NOT_AT_START & loaded


# A node's brokers are members of its cluster from their start: they register in the node's
# store (kazoo's client), run its controller and fetch their replicas from each other.
CLUSTER_MEMBER = {"kazoo", "pybroker.cluster.zk_store", "pybroker.controller.controller",
                  "pybroker.replica.fetcher", "pybroker.client.connection"}
# A node's supervisor serves no client: it runs the node's store (kazoo's protocol, no
# client) and the workers, and the broker's own code is time before they start.
BROKER_CODE = {"pybroker.server", "pybroker.broker", "pybroker.handlers",
               "pybroker.network.dispatch", "pybroker.network.connection",
               "pybroker.coordinator.group_coordinator", "pybroker.replica.manager"}
# Nor does it import the single broker's metadata on a start that has none to import: the
# importer's readers bring the storage layer and trio (pybroker.node.import_check).
NOT_IN_SUPERVISOR = {"trio", "pybroker.storage", "pybroker.storage.log_manager",
                     "pybroker.node.metadata_import"}

# Each process of the node writes its modules, as of each `listening on` line it logs (a
# worker: its own; the supervisor: its workers' and last its `ready`), to a file named by
# its pid. Python imports `sitecustomize` from PYTHONPATH at start, in the supervisor and in
# every worker it runs (they inherit its environment).
_SITECUSTOMIZE = """
import logging, os, sys
class AtListening(logging.Handler):
    def emit(self, record):
        if "listening on" in record.getMessage():
            path = os.path.join(os.environ["PYBROKER_TEST_MODULES"], str(os.getpid()))
            with open(path, "w") as out:
                out.write(" ".join(sorted(sys.modules)))
logging.getLogger().addHandler(AtListening())
"""


def test_a_default_start_imports_only_what_it_serves_with(tmp_path: Path) -> None:
    cores = len(os.sched_getaffinity(0))
    if cores == 1:
        pytest.skip("one CPU: the default start is the single broker, tested above")
    hook, modules = tmp_path / "hook", tmp_path / "modules"
    hook.mkdir()
    modules.mkdir()
    (hook / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    port = free_port_block("127.0.0.1", cores)
    node = subprocess.Popen(
        [sys.executable, "-m", "pybroker", "--defaults",
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
         "--override", f"log.dirs={tmp_path / 'logs'}"],
        cwd=ROOT, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONPATH=f"{hook}{os.pathsep}{ROOT}",
                 PYBROKER_TEST_MODULES=str(modules)))
    lines: list[str] = []
    try:
        assert node.stderr is not None
        watch = StartWatch()
        for line in node.stderr:
            lines.append(line)
            if watch.feed(line) is not None:
                break
        assert watch.node, "".join(lines)
        node.send_signal(signal.SIGTERM)
        rest = node.communicate(timeout=60)[1]
    finally:
        node.kill()
    assert node.returncode == 0, "".join(lines) + rest
    loaded = {int(f.name): set(f.read_text().split()) for f in modules.iterdir()}
    supervisor = loaded.pop(node.pid)
    assert len(loaded) == cores, sorted(loaded)  # a file from each worker
    assert not BROKER_CODE & supervisor
    assert not NOT_IN_SUPERVISOR & supervisor
    assert not (NOT_AT_START - {"kazoo"}) & supervisor
    for worker in loaded.values():
        assert "pybroker.handlers.produce" in worker  # it is a broker
        assert not (NOT_AT_START - CLUSTER_MEMBER) & worker


def test_a_restart_logs_leadership_once_a_topic() -> None:
    # One broker: it leads every partition and logs each topic's line once (a node's workers
    # each lead a share), and its restart's log follows its shutdown's.
    broker = Broker(keep=True, num_cores="1").start()
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
