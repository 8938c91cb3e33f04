"""Kafka 4.1.1's kafka-share-groups against share groups on pybroker: --list, --describe with
offsets, members and state (ListGroups v5, ShareGroupDescribe, DescribeShareGroupOffsets),
--delete-offsets refused on a group with members and done on an empty one
(DeleteShareGroupOffsets), --delete (DeleteGroups); and pybroker's own kafka-share-groups
printing the same tables. A broker of its own: share.version is raised on it."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from compat import kafka_tools
from compat.apache_kafka import ApacheKafkaUnavailable
from pybroker.testing import Broker
from tests.helpers import ROOT
from tests.integration.share_member import ACCEPT, SHORT, acquired, started


@pytest.fixture
def tools() -> None:
    try:
        kafka_tools.classpath()
    except ApacheKafkaUnavailable as exc:
        pytest.fail(f"Kafka's tools are unavailable: {exc}", pytrace=False)


def test_kafka_share_groups_lists_describes_and_deletes(tools: None, tmp_path: Path) -> None:
    # A process, so that the suite's PYBROKER_NUM_CORES=2 runs the tools against a node of
    # two brokers, as the default of all cores will (issue #29 item 3).
    with Broker(process=True, log_dir=tmp_path / "logs", **SHORT) as broker:
        b = broker.bootstrap
        m = started(b, 4)
        assert acquired(m.fetch(max_wait_ms=5000)) == [(0, 3, 1)]
        assert m.acknowledge([(0, 1, ACCEPT)]).error_code == 0

        def kafka(*args: str) -> subprocess.CompletedProcess[str]:
            return kafka_tools.run("kafka-share-groups", ["--bootstrap-server", b, *args])

        def ours(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([str(ROOT / "bin" / "kafka-share-groups"),
                                   "--bootstrap-server", b, *args],
                                  capture_output=True, text=True, timeout=60, cwd=ROOT)

        assert kafka("--list").stdout == "sg\n"
        described = {}
        for args in (("--describe", "--group", "sg", "--offsets", "--verbose"),
                     ("--describe", "--group", "sg", "--members", "--verbose"),
                     ("--describe", "--group", "sg", "--state", "--verbose")):
            theirs = kafka(*args)
            assert theirs.returncode == 0, theirs.stderr
            mine = ours(*args)
            assert (mine.returncode, mine.stdout) == (0, theirs.stdout), mine.stderr
            described[args[-2]] = [line.split() for line in theirs.stdout.splitlines()[1:]]
        assert described["--offsets"] == [
            ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET"],
            ["sg", "q", "0", "0", "2"]]
        assert described["--members"][1][:1] + described["--members"][1][2:] == [
            "sg", "127.0.0.1", "raw-test", "1", "1", "q:0"]
        assert described["--state"][1][3:] == ["Stable", "1", "1", "1"]
        refused = kafka("--delete-offsets", "--group", "sg", "--topic", "q").stdout
        assert "Error: The group is not empty." in refused
        assert m.heartbeat(-1).error_code == 0
        assert kafka("--list", "--state").stdout.splitlines()[1].split() == ["sg", "Empty"]
        deleted = kafka("--delete-offsets", "--group", "sg", "--topic", "q", "--topic", "nope")
        assert deleted.stdout.splitlines()[1:] == [
            "TOPIC           STATUS",
            "nope            Error: This server does not host this topic-partition.",
            "q               Successful"]
        assert kafka("--delete", "--group", "sg").stdout == \
            "Deletion of requested share groups ('sg') was successful.\n"
        assert kafka("--list").stdout == ""


def test_a_restart_keeps_membership_for_kafkas_tool_and_the_consumer_goes_on(
        tools: None, tmp_path: Path) -> None:
    """Membership is durable: after a kill -9, Kafka 4.1.1's `--describe --members` prints the
    group as before (member ids, epochs, assignments), and confluent-kafka's ShareConsumer
    goes on at its member epoch (no rejoin, which would have started it at epoch 1) and
    reads what is produced after the restart."""
    from pybroker.testing import BrokerProcess
    from tests.integration.share_clients import consumer, produce, warm_up
    from tests.integration.share_member import Member
    from tests.integration.raw import create_topic, enable_share_groups
    # Port 0: the kit picks the port, and for a node of several brokers (PYBROKER_NUM_CORES)
    # a block of them below the ephemeral range, so worker K's port + K is free at the
    # restart too (a free port of the ephemeral range says nothing of the one after it).
    log_dir = tmp_path / "logs"
    bp = BrokerProcess(log_dir, **SHORT).start()
    port = bp.port

    def members() -> list[list[str]]:
        out = kafka_tools.run("kafka-share-groups", [
            "--bootstrap-server", bp.bootstrap, "--describe", "--group", "sg", "--members",
            "--verbose"])
        assert out.returncode == 0, out.stderr
        return [line.split() for line in out.stdout.splitlines()[1:]]

    c = None
    try:
        enable_share_groups(bp.bootstrap)
        create_topic(bp.bootstrap, "q")
        c = consumer(bp.bootstrap)
        got: list[bytes] = []

        def poll() -> bool:
            got.extend(m.value() for m in c.poll(0.5) if m.error() is None)
            return bool(got)

        warm_up(bp.bootstrap, poll)
        for _ in range(2):  # two members in and out: the group epoch moves on to 5
            passer = Member(bp.bootstrap)
            passer.join()
            assert passer.heartbeat(-1).error_code == 0
        deadline = time.monotonic() + 30
        while (before := members())[1][5:6] != ["5"] and time.monotonic() < deadline:
            poll()  # the consumer catches up with the epoch at its heartbeat
        assert [row[5:] for row in before[1:]] == [["5", "q:0"]]  # MEMBER-EPOCH ASSIGNMENT
        bp.kill()
        bp = BrokerProcess(log_dir, port=port, **SHORT).start()
        assert members() == before
        got.clear()
        values = [f"after-{i}".encode() for i in range(20)]
        produce(bp.bootstrap, values)
        deadline = time.monotonic() + 60
        while len([v for v in got if v in values]) < len(values) \
                and time.monotonic() < deadline:
            poll()
        assert sorted(v for v in got if v in values) == sorted(values)
        assert members() == before  # the same member at the same epoch: it did not rejoin
    finally:
        if c is not None:
            c.close()
        if bp.proc is not None and bp.proc.poll() is None:
            bp.kill()
