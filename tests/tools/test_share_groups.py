"""kafka-share-groups (pybroker.tools.share_groups) against a broker with share groups on:
each table as Kafka 4.1.1's tool prints it for the same group (its output was taken from it
against pybroker; tests/reference/test_kafka_share_groups.py runs Kafka's tool itself), and
the resets Kafka 4.1.1's tool does not do yet."""
from __future__ import annotations

from typing import Any, Iterator

import pytest

from pybroker.tools.share_groups import main
from tests.integration.raw import create_topic, enable_share_groups
from tests.integration.share_member import ACCEPT, Member, acquired, produce


@pytest.fixture(scope="module")
def shares(kafka: Any) -> str:
    enable_share_groups(kafka.bootstrap)
    return kafka.bootstrap


@pytest.fixture
def member(shares: str, name: Any) -> Iterator[Member]:
    """A member of a new share group on a new topic of 4 records, of which it acquired all
    and accepted 0 and 1: the group's SPSO is 2."""
    topic, group = name("q"), name("sg")
    create_topic(shares, topic)
    m = Member(shares, group=group, topic=topic)
    m.join()
    assert m.fetch().error_code == 0
    produce(shares, 4, topic)
    assert acquired(m.fetch(max_wait_ms=5000)) == [(0, 3, 1)]
    assert m.acknowledge([(0, 1, ACCEPT)]).error_code == 0
    yield m
    m.conn.close()


def run(tool: Any, bootstrap: str, *argv: str) -> Any:
    return tool(main, "--bootstrap-server", bootstrap, *argv)


def test_list_and_describe_as_kafka_prints_them(tool: Any, shares: str, member: Member
                                                ) -> None:
    g, t, mid = member.group, member.topic, member.member_id
    r = run(tool, shares, "--list")
    assert r.rc == 0 and g in r.lines
    r = run(tool, shares, "--list", "--state", "STABLE")
    assert r.lines[0] == f"{'GROUP':<15} STATE" and f"{g:<15} Stable" in r.lines
    assert g not in run(tool, shares, "--list", "--state", "empty").out
    r = run(tool, shares, "--list", "--state", "Sleeping")
    assert r.rc == 1 and "Invalid state list 'Sleeping'" in r.err
    r = run(tool, shares, "--describe", "--group", g)
    assert (r.rc, r.err) == (0, "")
    assert r.out == (f"\n{'GROUP':<15} {'TOPIC':<15} PARTITION  START-OFFSET\n"
                     f"{g:<15} {t:<15} 0          2\n")
    r = run(tool, shares, "--describe", "--group", g, "--offsets", "--verbose")
    assert r.out == (f"\n{'GROUP':<15} {'TOPIC':<15} PARTITION  LEADER-EPOCH  START-OFFSET\n"
                     f"{g:<15} {t:<15} 0          0             2\n")
    r = run(tool, shares, "--describe", "--group", g, "--members", "--verbose")
    assert r.out == (
        f"\n{'GROUP':<15} {'CONSUMER-ID':<36} {'HOST':<15} {'CLIENT-ID':<15} #PARTITIONS  "
        f"MEMBER-EPOCH  ASSIGNMENT\n"
        f"{g:<15} {mid} {'127.0.0.1':<15} {'raw-test':<15} 1            1             {t}:0\n")
    r = run(tool, shares, "--describe", "--group", g, "--state", "--verbose")
    coordinator = r.lines[2].split()[1:3]
    assert r.lines[1].split() == ["GROUP", "COORDINATOR", "(ID)", "STATE", "GROUP-EPOCH",
                                  "ASSIGNMENT-EPOCH", "#MEMBERS"]
    assert r.lines[2].split() == [g, *coordinator, "Stable", "1", "1", "1"]
    assert coordinator[1] == "(0)"
    r = run(tool, shares, "--describe", "--group", "no-such-group")
    assert (r.rc, r.err) == (1, "\nError: Share group 'no-such-group' does not exist.\n")


def test_offsets_change_only_once_the_group_is_empty(tool: Any, shares: str, member: Member
                                                     ) -> None:
    g, t = member.group, member.topic
    r = run(tool, shares, "--reset-offsets", "--group", g, "--topic", t, "--to-earliest",
            "--execute")
    assert r.rc == 1 and f"Share group '{g}' is not empty." in r.err
    r = run(tool, shares, "--delete-offsets", "--group", g, "--topic", t)
    assert r.rc == 1 and r.err == "\nError: The group is not empty.\n"
    assert r.out == f"\n{'TOPIC':<15} STATUS\n{t:<15} Error: The group is not empty.\n"
    r = run(tool, shares, "--delete", "--group", g)
    assert r.rc == 1 and f"* Group '{g}' could not be deleted due to: Share group '{g}' is " \
        "not EMPTY." in r.err
    assert member.heartbeat(-1).error_code == 0
    r = run(tool, shares, "--describe", "--group", g, "--members")
    assert (r.out, r.err) == ("", f"\nShare group '{g}' has no active members.\n")

    def reset(*argv: str) -> list[list[str]]:
        r = run(tool, shares, "--reset-offsets", "--group", g, *argv)
        assert r.rc == 0, r.err
        assert r.lines[1].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
        return [line.split() for line in r.lines[2:]]

    def start() -> str:
        return run(tool, shares, "--describe", "--group", g).lines[2].split()[-1]

    assert reset("--topic", t, "--to-earliest", "--dry-run") == [[g, t, "0", "0"]]
    assert start() == "2"  # a dry run changes nothing
    assert reset("--topic", t, "--to-earliest", "--execute") == [[g, t, "0", "0"]]
    assert start() == "0"
    assert reset("--all-topics", "--to-latest", "--execute") == [[g, t, "0", "4"]]
    assert start() == "4"
    assert reset("--topic", f"{t}:0", "--to-offset", "3", "--execute") == [[g, t, "0", "3"]]
    assert start() == "3"
    assert reset("--topic", t, "--to-datetime", "2000-01-01T00:00:00.000", "--execute") == [
        [g, t, "0", "0"]]
    again = Member(shares, group=g, topic=t)
    again.join()
    assert acquired(again.fetch(max_wait_ms=5000)) == [(0, 3, 1)]  # counts start afresh
    assert again.heartbeat(-1).error_code == 0
    r = run(tool, shares, "--delete-offsets", "--group", g, "--topic", t, "--topic", "nope")
    assert r.rc == 1
    assert r.out == (f"\n{'TOPIC':<15} STATUS\n"
                     f"{'nope':<15} Error: This server does not host this topic-partition.\n"
                     f"{t:<15} Successful\n")
    r = run(tool, shares, "--delete", "--group", g)
    assert (r.rc, r.out) == (0, f"Deletion of requested share groups ('{g}') was successful.\n")
    r = run(tool, shares, "--delete", "--group", g)
    assert r.rc == 1 and f"due to: Group '{g}' is not a share group." in r.err


def test_bad_command_lines(tool: Any, shares: str) -> None:
    def refused(*argv: str) -> str:
        r = run(tool, shares, *argv)
        assert r.rc == 1
        return r.err

    assert "exactly one action" in refused("--list", "--describe")
    assert "[all-groups], [group]" in refused("--describe")
    assert "[execute, dry-run]" in refused("--reset-offsets", "--group", "g", "--topic", "t",
                                           "--to-earliest", "--dry-run", "--execute")
    assert "exactly one of these scenarios" in refused("--reset-offsets", "--group", "g",
                                                       "--topic", "t")
    assert "[all-topics], [topic]" in refused("--reset-offsets", "--group", "g",
                                              "--to-earliest")
    assert "[group], [topic]" in refused("--delete-offsets", "--group", "g")
    assert "used with option [describe]" in refused("--list", "--members")
