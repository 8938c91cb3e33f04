"""The README's quickstart, run as written: the server from config/standalone/server.properties, then each
tool line, with lines starting with `>` typed into the console producer.

Only two things are changed, so the test cannot collide with a real broker or earlier data:
the server listens on free ports (`localhost:9092` in the commands is rewritten to the first)
and writes to a temporary log dir. Its core count is the file's, num.cores left at its
default, every CPU: on a machine of N CPUs the README's server is a node of N brokers.
"""
from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.helpers import ROOT, BrokerProcess
from tests.readme_quickstart import quickstart_steps


@pytest.fixture
def server(tmp_path: Path):  # type: ignore[no-untyped-def]
    # The README's server command is `bin/pybroker-server config/standalone/server.properties`; the
    # harness runs the same module with the same file, overriding only ports and log dir (a
    # node's workers get a block of free ports: pybroker.testing.broker.free_port_block).
    proc = BrokerProcess(tmp_path / "logs", pin_cores=False,
                         config=str(ROOT / "config" / "standalone" / "server.properties")
                         ).start()
    yield proc
    proc.stop()


def test_readme_quickstart_runs_as_written(server: BrokerProcess) -> None:
    steps = quickstart_steps()
    assert len(steps) == 6
    outputs = []
    for command, typed in steps:
        command = command.replace("localhost:9092", server.bootstrap)
        result = subprocess.run(shlex.split(command), cwd=ROOT, input="\n".join(typed) + "\n",
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
        outputs.append(result)
    create, listing, produce, consume, describe, group = outputs
    assert "Created topic test." in create.stdout
    assert "test" in listing.stdout.split()
    assert consume.stdout.splitlines() == ["first event", "second event"]
    assert "Processed a total of 2 messages" in consume.stderr
    assert re.search(r"Topic: test\tTopicId: \S+\tPartitionCount: 1\tReplicationFactor: 1",
                     describe.stdout), describe.stdout
    # README: a machine of one CPU shows broker 0; one of N, any of the node's brokers 0,
    # 1000, ..., 1000 (N - 1), each the partition's only replica (the controller picks the
    # first broker at random, as Kafka's assignReplicasToBrokers does).
    shown = re.search(r"Partition: 0\s+Leader: (\d+)\s+Replicas: (\d+)\s+Isr: (\d+)\s",
                      describe.stdout)
    assert shown is not None, describe.stdout
    leader, replicas, isr = (int(g) for g in shown.groups())
    assert leader == replicas == isr, describe.stdout
    assert leader in {1000 * k for k in range(server.num_cores)}, describe.stdout
    header = group.stdout.split("\n")
    assert any(line.split()[:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                                    "LOG-END-OFFSET", "LAG"] for line in header), group.stdout
    row = next(line.split() for line in header if line.startswith("quickstart"))
    assert row[1:6] == ["test", "0", "2", "2", "0"], group.stdout
