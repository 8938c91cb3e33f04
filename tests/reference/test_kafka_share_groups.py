"""Kafka 4.1.1's kafka-share-groups against share groups on pybroker: --list, --describe with
offsets, members and state (ListGroups v5, ShareGroupDescribe, DescribeShareGroupOffsets),
--delete-offsets refused on a group with members and done on an empty one
(DeleteShareGroupOffsets), --delete (DeleteGroups); and pybroker's own kafka-share-groups
printing the same tables. A broker of its own: share.version is raised on it."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from compat import kafka_tools
from compat.apache_kafka import ApacheKafkaUnavailable
from pybroker.testing.broker import broker_in_thread
from tests.helpers import ROOT
from tests.integration.share_member import ACCEPT, SHORT, acquired, started


@pytest.fixture
def tools() -> None:
    try:
        kafka_tools.classpath()
    except ApacheKafkaUnavailable as exc:
        pytest.fail(f"Kafka's tools are unavailable: {exc}", pytrace=False)


def test_kafka_share_groups_lists_describes_and_deletes(tools: None, tmp_path: Path) -> None:
    with broker_in_thread(tmp_path / "logs", **SHORT) as info:
        b = info.bootstrap
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
