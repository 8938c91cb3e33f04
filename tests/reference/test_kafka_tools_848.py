"""Kafka 4.1.1's kafka-features and kafka-consumer-groups against KIP-848 on pybroker: the
feature levels as the tool reads them from ApiVersions, an upgrade through UpdateFeatures,
and a consumer group (a confluent-kafka member, group.protocol=consumer) as --describe,
--members --verbose, --state and --list --type show it from ConsumerGroupDescribe and
ListGroups v5. A broker of its own: the upgrade changes what its APIs are."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from compat import kafka_tools
from pybroker.testing.broker import broker_in_thread
from tests.helpers import ROOT
from tests.integration.raw import create_topic


def _kafka(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return kafka_tools.run(tool, list(args))


def _rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


def test_kafka_features_describe_and_upgrade(tools: None, tmp_path: Path) -> None:
    with broker_in_thread(tmp_path / "logs") as info:
        b = info.bootstrap
        described = _kafka("kafka-features", "--bootstrap-server", b, "describe")
        assert described.returncode == 0, described.stderr
        assert described.stdout.splitlines() == [
            "Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\t"
            "FinalizedVersionLevel: 1\tEpoch: 0",
            "Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\t"
            "SupportedMaxVersion: 4.1-IV1\tFinalizedVersionLevel: 4.1-IV1\tEpoch: 0",
            "Feature: share.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\t"
            "FinalizedVersionLevel: 0\tEpoch: 0"]
        up = _kafka("kafka-features", "--bootstrap-server", b, "upgrade",
                    "--feature", "share.version=1")
        assert (up.returncode, up.stdout.strip()) == (0, "share.version was upgraded to 1.")
        after = _kafka("kafka-features", "--bootstrap-server", b, "describe").stdout
        assert "Feature: share.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\t" \
            "FinalizedVersionLevel: 1\tEpoch: 1" in after.splitlines()
        too_far = _kafka("kafka-features", "--bootstrap-server", b, "upgrade",
                         "--feature", "share.version=2")
        assert too_far.returncode == 1
        assert "Invalid update version 2 for feature share.version" in too_far.stdout


def test_kafka_consumer_groups_describes_a_consumer_group(tools: None, tmp_path: Path) -> None:
    from confluent_kafka import Consumer

    with broker_in_thread(tmp_path / "logs") as info:
        b = info.bootstrap
        create_topic(b, "kt848", 3)
        consumer = Consumer({"bootstrap.servers": b, "group.id": "kt848-group",
                             "group.protocol": "consumer", "client.id": "kt848-client"})
        try:
            consumer.subscribe(["kt848"])
            deadline = time.monotonic() + 30
            while len(consumer.assignment()) < 3:
                assert time.monotonic() < deadline
                consumer.poll(0.2)
            group = ["--bootstrap-server", b, "--describe", "--group", "kt848-group"]
            partitions = _rows(_kafka("kafka-consumer-groups", *group).stdout)
            assert partitions[0][:3] == ["GROUP", "TOPIC", "PARTITION"]
            assert sorted(r[2] for r in partitions[1:]) == ["0", "1", "2"]
            assert {r[-1] for r in partitions[1:]} == {"kt848-client"}
            verbose = _kafka("kafka-consumer-groups", *group, "--members", "--verbose").stdout
            members = _rows(verbose)
            assert members[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                                  "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH",
                                  "TARGET-ASSIGNMENT"]
            assert members[1][3:] == ["kt848-client", "3", "1", "kt848:0,1,2", "1",
                                      "kt848:0,1,2"]
            state = _rows(_kafka("kafka-consumer-groups", *group, "--state").stdout)
            assert state[1][-3:] == ["uniform", "Stable", "1"]
            # pybroker's kafka-consumer-groups prints the same tables
            for args, theirs in (((*group, "--members", "--verbose"), verbose),
                                 ((*group, "--state"), None)):
                mine = subprocess.run([str(ROOT / "bin" / "kafka-consumer-groups"), *args],
                                      capture_output=True, text=True, timeout=60, cwd=ROOT)
                assert mine.returncode == 0, mine.stderr
                expected = theirs if theirs is not None else \
                    _kafka("kafka-consumer-groups", *args).stdout
                assert _rows(mine.stdout) == _rows(expected), (mine.stdout, expected)
            listed = _rows(_kafka("kafka-consumer-groups", "--bootstrap-server", b, "--list",
                                  "--type").stdout)
            assert ["kt848-group", "Consumer"] in listed
        finally:
            consumer.close()
