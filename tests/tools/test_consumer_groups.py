"""kafka-consumer-groups: Kafka's tables, offset resets, deletion, and the error cases."""
from __future__ import annotations

import re
import threading
import time
from contextlib import contextmanager
from datetime import datetime
from typing import Iterator

import pytest
import trio

from pybroker.client.client import open_client
from pybroker.client.consumer import Consumer
from pybroker.tools import console_consumer, console_producer, topics
from pybroker.tools.consumer_groups import main

OFFSETS_HEADER = ("GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  "
                  "LAG             CONSUMER-ID     HOST            CLIENT-ID")


@pytest.fixture
def setup(tool, bootstrap, name):  # type: ignore[no-untyped-def]
    """A two-partition topic with 3 + 2 records and a group that committed 1 and 2 of them."""
    t, g = name("gt"), name("grp")
    assert tool(topics.main, "--bootstrap-server", bootstrap, "--create", "--topic", t,
                "--partitions", "2").rc == 0
    for p, lines in ((0, b"a\nb\nc\n"), (1, b"d\ne\n")):
        r = tool(console_producer.main, "--bootstrap-server", bootstrap, "--topic", t,
                 "--property", "parse.key=true", stdin=b"".join(
                     _key_for(p) + b"\t" + v + b"\n" for v in lines.split()))
        assert r.rc == 0, r.err
    r = tool(console_consumer.main, "--bootstrap-server", bootstrap, "--topic", t,
             "--group", g, "--from-beginning", "--max-messages", "5", "--timeout-ms", "3000")
    assert r.rc == 0 and len(r.out.splitlines()) == 5
    r = tool(main, "--bootstrap-server", bootstrap, "--reset-offsets", "--group", g, "--topic",
             f"{t}:0", "--to-offset", "1", "--execute")
    assert r.rc == 0, r.err
    return t, g


def _key_for(partition: int) -> bytes:
    """A key that Kafka's murmur2 partitioner sends to `partition` of a 2-partition topic."""
    from pybroker.client.producer import default_partition
    return next(k for k in (b"k%d" % i for i in range(100)) if default_partition(k, 2) == partition)


@contextmanager
def active_member(bootstrap: str, group: str, topic: str) -> Iterator[dict]:
    """A consumer (our client) in `group` for the duration of the block, in its own thread."""
    ready, stop = threading.Event(), threading.Event()
    box: dict = {}

    async def member() -> None:
        async with open_client(bootstrap, client_id="member-client") as client:
            async with Consumer(client, group_id=group, heartbeat_interval_ms=500,
                                enable_auto_commit=False) as consumer:
                await consumer.subscribe([topic])
                box["member_id"] = consumer.membership.member_id  # type: ignore[union-attr]
                ready.set()
                while not stop.is_set():
                    await trio.sleep(0.05)

    def run() -> None:
        try:
            trio.run(member)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            box["error"] = exc
            ready.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(30), "member did not join"
    assert "error" not in box, box.get("error")
    try:
        yield box
    finally:
        stop.set()
        thread.join(30)


def test_list(tool, bootstrap, setup) -> None:
    _, g = setup
    r = tool(main, "--bootstrap-server", bootstrap, "--list")
    assert r.rc == 0 and g in r.lines
    r = tool(main, "--bootstrap-server", bootstrap, "--list", "--state")
    width = max([15] + [len(x) for x in r.lines[1:] for x in [x.split()[0]]]) + 10
    assert r.lines[0] == f"{'GROUP':<{width}} {'STATE':<20}"
    assert f"{g:<{width}} {'Empty':<20}" in r.lines
    r = tool(main, "--bootstrap-server", bootstrap, "--list", "--state", "Stable")
    assert g not in r.out
    r = tool(main, "--bootstrap-server", bootstrap, "--list", "--state", "Sleeping")
    assert r.rc == 1 and "Invalid state list 'Sleeping'" in r.err


def test_describe_offsets_of_an_empty_group(tool, bootstrap, setup) -> None:
    t, g = setup
    r = tool(main, "--bootstrap-server", bootstrap, "--describe", "--group", g)
    assert r.rc == 0
    assert r.err == f"\nConsumer group '{g}' has no active members.\n"
    assert r.out == (
        f"\n{OFFSETS_HEADER}\n"
        f"{g:<15} {t:<15} 0          1               3               2               "
        f"-               -               -\n"
        f"{g:<15} {t:<15} 1          2               2               0               "
        f"-               -               -\n")


def test_describe_active_group(tool, bootstrap, setup) -> None:
    t, g = setup
    with active_member(bootstrap, g, t) as member:
        mid = member["member_id"]
        r = tool(main, "--bootstrap-server", bootstrap, "--describe", "--group", g)
        assert r.rc == 0 and r.err == ""
        rows = [line.split() for line in r.lines[2:]]
        assert rows == [[g, t, "0", "1", "3", "2", mid, "/127.0.0.1", "member-client"],
                        [g, t, "1", "2", "2", "0", mid, "/127.0.0.1", "member-client"]]

        r = tool(main, "--bootstrap-server", bootstrap, "--describe", "--group", g, "--members")
        assert r.lines[0] == ""
        assert r.lines[1].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        assert r.lines[2].split() == [g, mid, "/127.0.0.1", "member-client", "2"]
        assert r.lines[1].endswith(" ")  # Kafka's format leaves a trailing space

        r = tool(main, "--bootstrap-server", bootstrap, "--describe", "--group", g,
                 "--members", "--verbose")
        assert r.lines[2].split()[-4:] == ["-", f"{t}:0,1", "-", "-"]

        r = tool(main, "--bootstrap-server", bootstrap, "--describe", "--group", g, "--state")
        assert r.lines[1].split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY",
                                      "STATE", "#MEMBERS"]
        assert re.fullmatch(rf"{g}\s+127\.0\.0\.1:\d+  \(0\)\s+range\s+Stable\s+1", r.lines[2])

        r = tool(main, "--bootstrap-server", bootstrap, "--reset-offsets", "--group", g,
                 "--all-topics", "--to-earliest", "--execute")
        assert r.rc == 1
        assert (f"Error: Assignments can only be reset if the group '{g}' is inactive, but the "
                "current state is Stable.") in r.err

        r = tool(main, "--bootstrap-server", bootstrap, "--delete", "--group", g)
        assert r.rc == 1
        assert f"* Group '{g}' could not be deleted due to: " in r.err


def test_reset_offsets_scenarios(tool, bootstrap, setup, tmp_path) -> None:
    t, g = setup
    base = ("--bootstrap-server", bootstrap, "--reset-offsets", "--group", g)

    def plan(*argv: str) -> list[list[str]]:
        r = tool(main, *base, *argv)
        assert r.rc == 0, r.err
        assert r.lines[:2] == ["", f"{'GROUP':<15} {'TOPIC':<15} {'PARTITION':<10} NEW-OFFSET"]
        return [line.split() for line in r.lines[2:]]

    r = tool(main, *base, "--all-topics", "--to-earliest")
    assert r.err.startswith("WARN: No action will be performed as the --execute option is "
                            "missing.")
    assert plan("--all-topics", "--to-earliest", "--dry-run") == [[g, t, "0", "0"],
                                                                  [g, t, "1", "0"]]
    assert plan("--topic", t, "--to-latest", "--dry-run") == [[g, t, "0", "3"], [g, t, "1", "2"]]
    assert plan("--topic", f"{t}:1", "--shift-by", "-1", "--dry-run") == [[g, t, "1", "1"]]
    r = tool(main, *base, "--topic", f"{t}:0", "--to-offset", "10", "--dry-run")
    assert "WARN: New offset (10) is higher than latest offset" in r.err
    assert r.lines[-1].split() == [g, t, "0", "3"]
    future = datetime.fromtimestamp(time.time() + 3600).strftime("%Y-%m-%dT%H:%M:%S.000")
    r = tool(main, *base, "--topic", f"{t}:0", "--to-datetime", future, "--dry-run")
    assert "Falling back to latest known offset." in r.out
    assert r.lines[-1].split() == [g, t, "0", "3"]
    assert plan("--topic", f"{t}:0", "--to-datetime", "2000-01-01T00:00:00.000",
                "--dry-run") == [[g, t, "0", "0"]]
    assert plan("--topic", f"{t}:0", "--by-duration", "P1D", "--dry-run") == [[g, t, "0", "0"]]
    r = tool(main, *base, "--all-topics", "--to-current", "--dry-run", "--export")
    assert r.lines == [f"{t},0,1", f"{t},1,2"]

    csv = tmp_path / "plan.csv"
    csv.write_text(f"{t},0,2\n{t},1,1\n")
    assert plan("--from-file", str(csv), "--execute") == [[g, t, "0", "2"], [g, t, "1", "1"]]
    r = tool(main, "--bootstrap-server", bootstrap, "--describe", "--group", g, "--offsets")
    assert [line.split()[3] for line in r.lines[2:]] == ["2", "1"]


def test_reset_offsets_errors(tool, bootstrap, setup) -> None:
    t, g = setup
    base = ("--bootstrap-server", bootstrap, "--reset-offsets", "--group", g)
    r = tool(main, *base, "--topic", "missing-topic", "--to-earliest", "--execute")
    assert r.rc == 1 and "Topic 'missing-topic' does not exist." in r.err
    r = tool(main, *base, "--topic", f"{t}:9", "--to-earliest", "--execute")
    assert r.rc == 1 and f'The partitions "{t}-9" do not exist' in r.err
    r = tool(main, *base, "--to-earliest")
    assert r.rc == 1 and "One of the reset scopes should be defined" in r.err
    r = tool(main, *base, "--all-topics")
    assert r.rc == 1 and "requires one of the following scenarios" in r.err
    r = tool(main, *base, "--all-topics", "--to-earliest", "--execute", "--dry-run")
    assert r.rc == 1 and "only accepts one of [execute, dry-run]" in r.err
    r = tool(main, *base, "--all-topics", "--to-datetime", "yesterday")
    assert r.rc == 1 and "Error parsing timestamp 'yesterday'" in r.err


def test_delete_groups_and_offsets(tool, bootstrap, setup) -> None:
    t, g = setup
    r = tool(main, "--bootstrap-server", bootstrap, "--delete-offsets", "--group", g,
             "--topic", f"{t}:1")
    assert r.rc == 0, r.err
    assert r.lines[0] == f"Request succeeded for deleting offsets from group {g}."
    assert r.lines[2].split() == ["TOPIC", "PARTITION", "STATUS"]
    assert r.lines[3].split() == [t, "1", "Successful"]

    r = tool(main, "--bootstrap-server", bootstrap, "--delete", "--group", g)
    assert (r.rc, r.out) == (0, f"Deletion of requested consumer groups ('{g}') was "
                                "successful.\n")
    r = tool(main, "--bootstrap-server", bootstrap, "--delete", "--group", g)
    assert r.rc == 1
    assert r.err == ("\nError: Deletion of some consumer groups failed:\n"
                     f"* Group '{g}' could not be deleted due to: Group '{g}' does not exist.\n")


def test_unknown_group_and_bad_arguments(tool, bootstrap) -> None:
    r = tool(main, "--bootstrap-server", bootstrap, "--describe", "--group", "nobody-home")
    assert (r.rc, r.out) == (1, "")
    assert r.err == "\nError: Consumer group 'nobody-home' does not exist.\n"
    cases = {
        (): "Command must include exactly one action",
        ("--list", "--describe"): "Command must include exactly one action",
        ("--describe",): "Option [describe] takes one of these options: [all-groups], [group]",
        ("--list", "--members"): "can only be used with option [describe]",
        ("--list", "--whatever"): "unrecognized arguments: --whatever",
    }
    for argv, message in cases.items():
        r = tool(main, "--bootstrap-server", bootstrap, *argv)
        assert r.rc == 1 and message in r.err and r.err.count("\n") == 1, (argv, r.err)


def test_unreachable_broker(tool) -> None:
    r = tool(main, "--bootstrap-server", "127.0.0.1:1", "--list")
    assert (r.rc, r.out) == (1, "")
    assert r.err == ("Error: Executing consumer group command failed due to Could not connect "
                     "to 127.0.0.1:1 (Connection refused)\n")
