"""kafka-get-offsets and kafka-delete-records: Kafka's output lines, filters and errors."""
from __future__ import annotations

import json
import time

import pytest

from pybroker.client.producer import default_partition
from pybroker.tools import console_producer, delete_records, get_offsets, topics


@pytest.fixture
def filled(tool, bootstrap, name):  # type: ignore[no-untyped-def]
    """A 3-partition topic with 4 records in partition 0, sent before and after `middle`."""
    t = name("off")
    assert tool(topics.main, "--bootstrap-server", bootstrap, "--create", "--topic", t,
                "--partitions", "3").rc == 0
    key = next(k for k in (b"k%d" % i for i in range(100)) if default_partition(k, 3) == 0)
    send = (console_producer.main, "--bootstrap-server", bootstrap, "--topic", t,
            "--property", "parse.key=true")
    assert tool(*send, stdin=key + b"\ta\n" + key + b"\tb\n").rc == 0
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    assert tool(*send, stdin=key + b"\tc\n" + key + b"\td\n").rc == 0
    return t, middle


def test_latest_earliest_and_timestamps(tool, bootstrap, filled) -> None:
    t, middle = filled
    r = tool(get_offsets.main, "--bootstrap-server", bootstrap, "--topic", t)
    assert (r.rc, r.lines) == (0, [f"{t}:0:4", f"{t}:1:0", f"{t}:2:0"])
    for spec in ("-2", "earliest"):
        r = tool(get_offsets.main, "--bootstrap-server", bootstrap, "--topic", t, "--time", spec)
        assert r.lines == [f"{t}:0:0", f"{t}:1:0", f"{t}:2:0"]
    r = tool(get_offsets.main, "--bootstrap-server", bootstrap, "--topic", t,
             "--time", str(middle))
    assert r.lines == [f"{t}:0:2"]  # empty partitions have no offset at that time: left out
    r = tool(get_offsets.main, "--bootstrap-server", bootstrap, "--topic", t, "--time", "-3")
    assert r.lines[0] in (f"{t}:0:2", f"{t}:0:3")  # c and d may share a millisecond
    r = tool(get_offsets.main, "--broker-list", bootstrap, "--topic", t, "--partitions", "0,2")
    assert r.lines == [f"{t}:0:4", f"{t}:2:0"]
    r = tool(get_offsets.main, "--bootstrap-server", bootstrap, "--topic-partitions",
             f"{t}:1-,{t}:0")
    assert r.lines == [f"{t}:0:4", f"{t}:1:0", f"{t}:2:0"]


def test_get_offsets_errors(tool, bootstrap, filled) -> None:
    t, _ = filled
    r = tool(get_offsets.main, "--bootstrap-server", bootstrap, "--topic", "no-such-topic")
    assert (r.rc, r.out, r.err) == (1, "", "Error occurred: Could not match any "
                                           "topic-partitions with the specified filters\n")
    r = tool(get_offsets.main, "--bootstrap-server", bootstrap, "--topic", t, "--time", "soon")
    assert r.rc == 1 and r.err.startswith("Malformed time argument soon.")
    r = tool(get_offsets.main, "--bootstrap-server", bootstrap, "--topic", t,
             "--topic-partitions", f"{t}:0")
    assert r.rc == 1 and "cannot be used with --topic" in r.err
    r = tool(get_offsets.main, "--bootstrap-server", bootstrap, "--topic", t, "--partitions", "x")
    assert r.rc == 1 and "--partitions expects a comma separated list" in r.err
    r = tool(get_offsets.main, "--bootstrap-server", "127.0.0.1:1", "--topic", t)
    assert (r.rc, r.err) == (1, "Error occurred: Could not connect to 127.0.0.1:1 "
                                "(Connection refused)\n")
    r = tool(get_offsets.main, "--bootstrap-server", bootstrap, "--tpoic", t)
    assert r.rc == 1 and "unrecognized arguments" in r.err


def test_delete_records(tool, bootstrap, filled, tmp_path) -> None:
    t, _ = filled
    plan = tmp_path / "offsets.json"
    plan.write_text(json.dumps({"partitions": [{"topic": t, "partition": 0, "offset": 3}],
                                "version": 1}))
    r = tool(delete_records.main, "--bootstrap-server", bootstrap, "--offset-json-file", str(plan))
    assert (r.rc, r.out) == (0, "Executing records delete operation\n"
                                "Records delete operation completed:\n"
                                f"partition: {t}-0\tlow_watermark: 3\n")
    r = tool(get_offsets.main, "--bootstrap-server", bootstrap, "--topic", t, "--time", "-2",
             "--partitions", "0")
    assert r.lines == [f"{t}:0:3"]

    plan.write_text(json.dumps({"partitions": [{"topic": t, "partition": 1, "offset": 5},
                                               {"topic": "ghost", "partition": 0, "offset": 1}],
                                "version": 1}))
    r = tool(delete_records.main, "--bootstrap-server", bootstrap, "--offset-json-file", str(plan))
    assert r.rc == 1
    assert r.lines[2].startswith(f"partition: {t}-1\terror: ")
    assert r.lines[3] == "partition: ghost-0\terror: Topic 'ghost' does not exist."


def test_delete_records_bad_input(tool, bootstrap, tmp_path) -> None:
    plan = tmp_path / "bad.json"
    for text, message in (("{not json", "The input string is not a valid JSON"),
                          ('{"version": 2, "partitions": []}', "Not supported version field"),
                          ('{"version": 1}', "Missing partitions field"),
                          ('{"partitions": [{"topic": "a", "partition": 0, "offset": 1},'
                           '{"topic": "a", "partition": 0, "offset": 2}]}',
                           "contains duplicate topic partitions: a-0")):
        plan.write_text(text)
        r = tool(delete_records.main, "--bootstrap-server", bootstrap,
                 "--offset-json-file", str(plan))
        assert r.rc == 1 and message in r.err and r.err.count("\n") == 1, r.err
    r = tool(delete_records.main, "--bootstrap-server", bootstrap,
             "--offset-json-file", str(tmp_path / "missing.json"))
    assert r.rc == 1 and "Cannot read" in r.err
    r = tool(delete_records.main, "--bootstrap-server", bootstrap)
    assert (r.rc, r.err) == (1, 'Missing required argument "[offset-json-file]"\n')
