"""Kafka 4.1.1's kafka-features and kafka-consumer-groups against KIP-848 on pybroker: the
feature levels as the tool reads them from ApiVersions, an upgrade through UpdateFeatures,
and a consumer group (a confluent-kafka member, group.protocol=consumer) as --describe,
--members --verbose, --state and --list --type show it from ConsumerGroupDescribe and
ListGroups v5. A broker of its own: the upgrade changes what its APIs are. A process, so
that the suite's PYBROKER_NUM_CORES=2 runs the tools against a node of two brokers, as the
default of all cores will (issue #29 item 3)."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from compat import kafka_tools
from pybroker.testing import Broker
from tests.helpers import ROOT
from tests.integration.raw import create_topic


def _kafka(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return kafka_tools.run(tool, list(args))


def _rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


def test_kafka_features_describe_and_upgrade(tools: None, tmp_path: Path) -> None:
    with Broker(process=True, log_dir=tmp_path / "logs") as broker:
        b = broker.bootstrap
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

    with Broker(process=True, log_dir=tmp_path / "logs") as broker:
        b = broker.bootstrap
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


def test_kafka_consumer_groups_describes_a_mixed_group(tools: None, tmp_path: Path) -> None:
    """A classic group upgraded online (a classic confluent-kafka member, then one with
    group.protocol=consumer): Kafka 4.1.1's tool and pybroker's print the same tables; the
    verbose members table has Kafka's UPGRADED column (false for the classic member) and the
    verbose state its group and target assignment epochs (issue #33)."""
    import threading

    from confluent_kafka import Consumer

    from compat import wire

    with Broker(process=True, log_dir=tmp_path / "logs") as broker:
        b, topic, group = broker.bootstrap, "mixed", "mixed-group"
        create_topic(b, topic, 4)
        stop = threading.Event()

        def member(client_id: str, protocol: str) -> None:
            consumer = Consumer({"bootstrap.servers": b, "group.id": group,
                                 "group.protocol": protocol, "client.id": client_id})
            consumer.subscribe([topic])
            try:
                while not stop.is_set():
                    consumer.poll(0.1)
            finally:
                consumer.close()

        def wait(condition, what: str) -> None:  # type: ignore[no-untyped-def]
            deadline = time.monotonic() + 90
            while not condition():
                assert time.monotonic() < deadline, f"timed out waiting for {what}"
                time.sleep(0.3)

        def classic_alone() -> bool:
            state, _, members = wire.group_members(b, group)
            return state == "Stable" and \
                [len(parts.get(topic, [])) for _, parts in members.values()] == [4]

        def mixed_and_stable() -> bool:
            g = wire.consumer_group(b, group)
            return g.error == 0 and g.state == "Stable" and len(g.members) == 2 and all(
                len(m.assigned.get(topic, [])) == 2 and m.epoch == g.assignment_epoch
                for m in g.members.values())

        threads = [threading.Thread(target=member, args=("classic-client", "classic"))]
        threads[0].start()
        try:
            wait(lambda: _settled(classic_alone), "the classic member to hold 4 partitions")
            threads.append(threading.Thread(target=member, args=("consumer-client", "consumer")))
            threads[1].start()
            wait(mixed_and_stable, "the upgraded group to share the partitions 2/2")
            epoch = wire.consumer_group(b, group).group_epoch
            args = ["--bootstrap-server", b, "--describe", "--group", group]
            verbose = _rows(_kafka("kafka-consumer-groups", *args, "--members",
                                   "--verbose").stdout)
            assert verbose[0][-1] == "UPGRADED"
            assert sorted((r[3], r[5], r[-1]) for r in verbose[1:]) == [
                ("classic-client", str(epoch), "false"), ("consumer-client", str(epoch), "true")]
            for extra in (["--members", "--verbose"], ["--members"], ["--state", "--verbose"],
                          ["--state"], ["--offsets", "--verbose"]):
                theirs = _kafka("kafka-consumer-groups", *args, *extra)
                mine = subprocess.run([str(ROOT / "bin" / "kafka-consumer-groups"), *args,
                                       *extra], capture_output=True, text=True, timeout=60,
                                      cwd=ROOT)
                assert (mine.returncode, theirs.returncode) == (0, 0), mine.stderr
                # rows in Kafka's order but for --offsets, which Kafka takes from a HashMap
                assert sorted(_rows(mine.stdout)) == sorted(_rows(theirs.stdout)), \
                    (extra, mine.stdout, theirs.stdout)
                if extra[0] != "--offsets":
                    assert _rows(mine.stdout) == _rows(theirs.stdout), (extra, mine.stdout)
        finally:
            stop.set()
            for t in threads:
                t.join(30)


def _settled(condition) -> bool:  # type: ignore[no-untyped-def]
    """`condition()`, False while the group is not there yet (DescribeGroups asserts)."""
    try:
        return bool(condition())
    except AssertionError:
        return False
