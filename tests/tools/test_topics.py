"""kafka-topics: flags, Kafka's output lines, exit codes and error messages."""
from __future__ import annotations

import re
import time

from pybroker.tools import topics
from pybroker.tools.topics import main

DESCRIBE_TOPIC = re.compile(r"^Topic: (\S+)\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: (\d+)"
                            r"\tReplicationFactor: (\d+)\tConfigs: (.*)$")
DESCRIBE_PARTITION = re.compile(r"^\tTopic: (\S+)\tPartition: (\d+)\tLeader: (\d+|none)"
                                r"\tReplicas: ([\d,]*)\tIsr: ([\d,]*)\tElr: N/A"
                                r"\tLastKnownElr: N/A$")


def test_create_then_describe_matches_kafkas_format(tool, bootstrap, name) -> None:
    t = name("quickstart")
    r = tool(main, "--bootstrap-server", bootstrap, "--create", "--topic", t,
             "--partitions", "3", "--replication-factor", "1",
             "--config", "retention.ms=60000", "--config", "cleanup.policy=compact")
    assert (r.rc, r.out, r.err) == (0, f"Created topic {t}.\n", "")

    r = tool(main, "--bootstrap-server", bootstrap, "--describe", "--topic", t)
    assert r.rc == 0, r.err
    head, *parts = r.lines
    m = DESCRIBE_TOPIC.match(head)
    assert m, head
    assert m.groups() == (t, "3", "1", "cleanup.policy=compact,retention.ms=60000")
    assert [DESCRIBE_PARTITION.match(p).groups() for p in parts] == [  # type: ignore[union-attr]
        (t, str(i), "0", "0", "0") for i in range(3)]


def test_default_topic_has_empty_configs(tool, bootstrap, name) -> None:
    t = name()
    assert tool(main, "--bootstrap-server", bootstrap, "--create", "--topic", t).rc == 0
    r = tool(main, "--bootstrap-server", bootstrap, "--describe", "--topic", t)
    assert r.lines[0].endswith("\tConfigs: ")
    assert len(r.lines) == 2  # one partition: the broker's num.partitions default


def test_existing_topic_is_an_error_unless_if_not_exists(tool, bootstrap, name) -> None:
    t = name()
    assert tool(main, "--bootstrap-server", bootstrap, "--create", "--topic", t).rc == 0
    r = tool(main, "--bootstrap-server", bootstrap, "--create", "--topic", t)
    assert r.rc == 1
    assert r.err == f"Error while executing topic command : Topic '{t}' already exists.\n"
    r = tool(main, "--bootstrap-server", bootstrap, "--create", "--topic", t, "--if-not-exists")
    assert (r.rc, r.out, r.err) == (0, "", "")


def test_collision_warning_for_dots_and_underscores(tool, bootstrap, name) -> None:
    t = name("with.dot_and_underscore")
    r = tool(main, "--bootstrap-server", bootstrap, "--create", "--topic", t)
    assert r.rc == 0
    assert r.lines[0].startswith("WARNING: Due to limitations in metric names, topics with a "
                                 "period ('.') or underscore ('_') could collide.")
    assert r.lines[1] == f"Created topic {t}."


def test_list_is_sorted_and_takes_a_regex(tool, bootstrap, name) -> None:
    a, b = name("list-b"), name("list-a")
    for t in (a, b):
        assert tool(main, "--bootstrap-server", bootstrap, "--create", "--topic", t).rc == 0
    r = tool(main, "--bootstrap-server", bootstrap, "--list")
    assert r.rc == 0
    assert r.lines == sorted(r.lines) and {a, b} <= set(r.lines)
    r = tool(main, "--bootstrap-server", bootstrap, "--list", "--topic", "list-a.*,list-b.*")
    assert set(r.lines) >= {a, b} and all(n.startswith("list-") for n in r.lines)


def test_unknown_topic(tool, bootstrap) -> None:
    for action in ("--describe", "--delete"):
        r = tool(main, "--bootstrap-server", bootstrap, action, "--topic", "no-such-topic")
        assert (r.rc, r.out) == (1, "")
        assert r.err == "Topic 'no-such-topic' does not exist as expected\n"
    r = tool(main, "--bootstrap-server", bootstrap, "--alter", "--topic", "no-such-topic",
             "--partitions", "2")
    assert r.rc == 1 and "does not exist as expected" in r.err
    r = tool(main, "--bootstrap-server", bootstrap, "--describe", "--topic", "no-such-topic",
             "--if-exists")
    assert (r.rc, r.out, r.err) == (0, "", "")


def test_alter_adds_partitions(tool, bootstrap, name) -> None:
    t = name()
    assert tool(main, "--bootstrap-server", bootstrap, "--create", "--topic", t).rc == 0
    r = tool(main, "--bootstrap-server", bootstrap, "--alter", "--topic", t, "--partitions", "4")
    assert (r.rc, r.out, r.err) == (0, "", "")
    r = tool(main, "--bootstrap-server", bootstrap, "--describe", "--topic", t)
    assert "\tPartitionCount: 4\t" in r.lines[0] and len(r.lines) == 5
    r = tool(main, "--bootstrap-server", bootstrap, "--alter", "--topic", t, "--partitions", "2")
    assert r.rc == 1
    assert r.err.startswith("Error while executing topic command : ")
    assert "4 partitions" in r.err and r.err.count("\n") == 1


def test_delete(tool, bootstrap, name) -> None:
    t = name()
    assert tool(main, "--bootstrap-server", bootstrap, "--create", "--topic", t).rc == 0
    r = tool(main, "--bootstrap-server", bootstrap, "--delete", "--topic", t)
    assert (r.rc, r.out, r.err) == (0, "", "")
    assert t not in tool(main, "--bootstrap-server", bootstrap, "--list").lines


def test_invalid_arguments(tool, bootstrap, name) -> None:
    cases = {
        ("--list", "--describe"): "Command must include exactly one action",
        ("--create",): 'Missing required argument "[topic]"',
        ("--alter", "--topic", "x"): 'Missing required argument "[partitions]"',
        ("--describe", "--partitions", "3"): "can't be used with option \"[describe]\"",
        ("--create", "--topic", "x", "--partitions", "0"): "The partitions must be greater than 0",
        ("--create", "--topic", "x", "--replication-factor", "0"):
            "The replication factor must be between 1 and 32767 inclusive",
        ("--create", "--topic", "x", "--config", "nonsense"): 'in the format "key=val"',
        ("--list", "--bogus-flag"): "unrecognized arguments: --bogus-flag",
    }
    for argv, message in cases.items():
        r = tool(main, "--bootstrap-server", bootstrap, *argv)
        assert r.rc == 1, argv
        assert message in r.err and r.err.count("\n") == 1, (argv, r.err)
    r = tool(main, "--list")
    assert (r.rc, r.err) == (1, "--bootstrap-server must be specified\n")


def test_bad_topic_config_is_refused_by_the_broker(tool, bootstrap, name) -> None:
    r = tool(main, "--bootstrap-server", bootstrap, "--create", "--topic", name(),
             "--config", "retention.ms=soon")
    assert r.rc == 1 and r.err.startswith("Error while executing topic command : ")


def test_unreachable_broker_is_one_line_and_quick(tool) -> None:
    start = time.monotonic()
    r = tool(main, "--bootstrap-server", "127.0.0.1:1", "--list")
    assert time.monotonic() - start < 10
    assert (r.rc, r.out) == (1, "")
    assert r.err == ("Error while executing topic command : Could not connect to 127.0.0.1:1 "
                     "(Connection refused)\n")


def test_help_exits_zero(tool) -> None:
    r = tool(main, "--help")
    assert r.rc == 0 and "--bootstrap-server" in r.out
    assert topics.PROG == "kafka-topics"
