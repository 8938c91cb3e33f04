"""kafka-configs: describe and alter topic and broker configs, Kafka's lines and errors."""
from __future__ import annotations

import re

from pybroker.tools import topics
from pybroker.tools.configs import main


def create(tool, bootstrap, name):  # type: ignore[no-untyped-def]
    t = name("cfg")
    assert tool(topics.main, "--bootstrap-server", bootstrap, "--create", "--topic", t).rc == 0
    return t


def test_alter_then_describe(tool, bootstrap, name) -> None:
    t = create(tool, bootstrap, name)
    r = tool(main, "--bootstrap-server", bootstrap, "--describe", "--entity-type", "topics",
             "--entity-name", t)
    assert (r.rc, r.out) == (0, f"Dynamic configs for topic {t} are:\n")

    r = tool(main, "--bootstrap-server", bootstrap, "--alter", "--entity-type", "topics",
             "--entity-name", t, "--add-config", "retention.ms=86400000,cleanup.policy=[compact,"
             "delete]")
    assert (r.rc, r.out, r.err) == (0, f"Completed updating config for topic {t}.\n", "")

    r = tool(main, "--bootstrap-server", bootstrap, "--describe", "--topic", t)
    assert r.lines[0] == f"Dynamic configs for topic {t} are:"
    assert r.lines[1].startswith("  cleanup.policy=compact,delete sensitive=false "
                                 "synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete")
    assert r.lines[2].startswith("  retention.ms=86400000 sensitive=false "
                                 "synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=86400000")
    assert len(r.lines) == 3

    r = tool(main, "--bootstrap-server", bootstrap, "--alter", "--topic", t,
             "--delete-config", "cleanup.policy")
    assert r.rc == 0
    r = tool(main, "--bootstrap-server", bootstrap, "--describe", "--topic", t)
    assert [line.split("=")[0].strip() for line in r.lines[1:]] == ["retention.ms"]
    # kafka-topics --describe shows the override in its Configs: column
    r = tool(topics.main, "--bootstrap-server", bootstrap, "--describe", "--topic", t)
    assert r.lines[0].endswith("\tConfigs: retention.ms=86400000")


def test_describe_all_lists_defaults_with_synonyms(tool, bootstrap, name) -> None:
    t = create(tool, bootstrap, name)
    r = tool(main, "--bootstrap-server", bootstrap, "--describe", "--topic", t, "--all")
    assert r.lines[0] == f"All configs for topic {t} are:"
    line = next(x for x in r.lines if x.startswith("  cleanup.policy="))
    assert line == ("  cleanup.policy=delete sensitive=false "
                    "synonyms={DEFAULT_CONFIG:log.cleanup.policy=delete}")
    assert all(re.fullmatch(r"  \S+=.* sensitive=(true|false) synonyms=\{.*\}", x)
               for x in r.lines[1:])


def test_brokers(tool, bootstrap) -> None:
    r = tool(main, "--bootstrap-server", bootstrap, "--describe", "--entity-type", "brokers",
             "--entity-name", "0")
    assert (r.rc, r.out) == (0, "Dynamic configs for broker 0 are:\n")
    r = tool(main, "--bootstrap-server", bootstrap, "--describe", "--broker", "0", "--all")
    assert r.lines[0] == "All configs for broker 0 are:" and len(r.lines) > 20
    r = tool(main, "--bootstrap-server", bootstrap, "--describe", "--entity-type", "brokers")
    assert r.lines == ["Dynamic configs for broker 0 are:",
                       "Default configs for brokers in the cluster are:"]
    r = tool(main, "--bootstrap-server", bootstrap, "--describe", "--broker", "7")
    assert (r.rc, r.err) == (1, "The broker '7' doesn't exist and doesn't have dynamic "
                                "config.\n")
    r = tool(main, "--bootstrap-server", bootstrap, "--alter", "--broker", "0",
             "--add-config", "num.partitions=3")
    assert (r.rc, r.err) == (1, "Error while executing config command: Cannot update these "
                                "configs dynamically: Set(num.partitions)\n")


def test_errors(tool, bootstrap, name) -> None:
    t = create(tool, bootstrap, name)
    r = tool(main, "--bootstrap-server", bootstrap, "--describe", "--topic", "not-a-topic")
    assert (r.rc, r.err) == (1, "The topic 'not-a-topic' doesn't exist and doesn't have "
                                "dynamic config.\n")
    r = tool(main, "--bootstrap-server", bootstrap, "--alter", "--topic", t,
             "--delete-config", "retention.ms")
    assert (r.rc, r.err) == (1, "Invalid config(s): retention.ms\n")
    r = tool(main, "--bootstrap-server", bootstrap, "--alter", "--topic", t,
             "--add-config", "retention.ms=later")
    assert r.rc == 1
    assert r.err.startswith("Error while executing config command: ") and "retention.ms" in r.err
    r = tool(main, "--bootstrap-server", bootstrap, "--alter", "--topic", "not-a-topic",
             "--add-config", "retention.ms=1")
    assert r.rc == 1 and "not-a-topic" in r.err and r.err.count("\n") == 1
    cases = {
        ("--describe", "--alter", "--topic", t): "exactly one action",
        ("--alter", "--topic", t): "At least one of --add-config",
        ("--alter", "--topic", t, "--add-config", "novalue"): 'in the format "key=val"',
        ("--describe",): "At least one entity type must be specified",
        ("--describe", "--entity-type", "ips"): "is not supported",
        ("--describe", "--entity-type", "planets"): "Invalid entity type planets",
        ("--describe", "--entity-type", "brokers", "--entity-name", "zero"):
            "must be a valid integer broker id",
        ("--describe", "--topic", t, "--frobnicate"): "unrecognized arguments",
    }
    for argv, message in cases.items():
        r = tool(main, "--bootstrap-server", bootstrap, *argv)
        assert r.rc == 1 and message in r.err and r.err.count("\n") == 1, (argv, r.err)


def test_unreachable_broker(tool) -> None:
    r = tool(main, "--bootstrap-server", "127.0.0.1:1", "--describe", "--topic", "t")
    assert (r.rc, r.err) == (1, "Error while executing config command: Could not connect to "
                                "127.0.0.1:1 (Connection refused)\n")
