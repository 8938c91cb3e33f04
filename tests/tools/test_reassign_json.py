"""kafka-reassign-partitions without a broker: the JSON documents (Kafka's format both ways,
its decoder's messages) and the command-line checks (Kafka's, then pybroker's refusals)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pybroker.client.cluster import TopicPartition
from pybroker.tools import reassign_partitions
from pybroker.tools.reassign_json import (
    ReassignFileError, check_executable, check_topics, format_reassignment,
    parse_broker_list, parse_reassignment, parse_topics_to_move,
)

T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def test_format_is_kafkas_compact_sorted_json_with_any_log_dirs() -> None:
    text = format_reassignment({U0: [3], T1: [2, 1], T0: (1, 2)})
    assert text == ('{"version":1,"partitions":['
                    '{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},'
                    '{"topic":"t","partition":1,"replicas":[2,1],"log_dirs":["any","any"]},'
                    '{"topic":"u","partition":0,"replicas":[3],"log_dirs":["any"]}]}')
    assert format_reassignment({}) == '{"version":1,"partitions":[]}'


def test_what_is_printed_reads_back() -> None:
    assignment = {T0: (1, 2, 3), T1: (4,), U0: (2, 1)}
    parsed = parse_reassignment(format_reassignment(assignment))
    assert parsed.targets == assignment and parsed.log_dirs == {}


def test_reassignment_as_the_docs_write_it() -> None:
    parsed = parse_reassignment('{"version":1,"partitions":[{"topic":"foo1","partition":0,'
                                '"replicas":[5,6]},{"topic":"foo2","partition":1,'
                                '"replicas":[2,3]}]}')
    assert parsed.partitions == ((TopicPartition("foo1", 0), (5, 6)),
                                 (TopicPartition("foo2", 1), (2, 3)))
    # version defaults to 1; "partitions" absent is an empty reassignment
    assert parse_reassignment('{"partitions":[]}').partitions == ()
    assert parse_reassignment("{}").partitions == ()


def test_log_dirs_other_than_any_are_kept_by_replica() -> None:
    parsed = parse_reassignment('{"partitions":[{"topic":"t","partition":0,"replicas":[1,2],'
                                '"log_dirs":["any","/data/b"]}]}')
    assert parsed.log_dirs == {(T0, 2): "/data/b"}


@pytest.mark.parametrize("text, message", [
    ("", "com.fasterxml.jackson.core.JsonParseException: The input string shouldn't be empty"),
    ("[]", "Expected JSON object, received []"),
    ('{"version":2}', "Not supported version field value 2"),
    ('{"version":"1"}', 'Expected `Integer` value, received "1"'),
    ('{"partitions":{}}', "Expected `JSON array` value, received {}"),
    ('{"partitions":[{"partition":0,"replicas":[1]}]}', "No such field exists: `topic`"),
    ('{"partitions":[{"topic":"t","replicas":[1]}]}', "No such field exists: `partition`"),
    ('{"partitions":[{"topic":"t","partition":0}]}', "No such field exists: `replicas`"),
    ('{"partitions":[{"topic":1,"partition":0,"replicas":[1]}]}',
     "Expected `String` value, received 1"),
    ('{"partitions":[{"topic":"t","partition":"0","replicas":[1]}]}',
     'Expected `Integer` value, received "0"'),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[1.5]}]}',
     "Expected `Integer` value, received 1.5"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[true]}]}',
     "Expected `Integer` value, received true"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}',
     "Size of replicas list [1, 2] is different from size of log dirs list [any] for "
     "partition t-0"),
])
def test_bad_reassignment_documents_get_kafkas_messages(text: str, message: str) -> None:
    with pytest.raises(ReassignFileError) as caught:
        parse_reassignment(text)
    assert str(caught.value) == message


def test_malformed_json_names_jacksons_exception_and_where() -> None:
    with pytest.raises(ReassignFileError) as caught:
        parse_reassignment('{"partitions": [')
    assert str(caught.value).startswith("com.fasterxml.jackson.core.JsonParseException: ")
    assert "line 1 column 17" in str(caught.value)


@pytest.mark.parametrize("text, message", [
    ('{"partitions":[]}', "Partition reassignment list cannot be empty"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[]}]}',
     "Partition replica list cannot be empty"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[1]},'
     '{"topic":"t","partition":0,"replicas":[2]}]}',
     "Partition reassignment contains duplicate topic partitions: t-0"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[1,1,2,2]},'
     '{"topic":"t","partition":1,"replicas":[3,3]}]}',
     "Partition replica lists may not contain duplicate entries: t-0 contains multiple "
     "entries for 1,2. t-1 contains multiple entries for 3"),
])
def test_execute_checks(text: str, message: str) -> None:
    with pytest.raises(ReassignFileError) as caught:
        check_executable(parse_reassignment(text))
    assert str(caught.value) == message


def test_topics_to_move() -> None:
    assert parse_topics_to_move('{"topics":[{"topic":"foo1"},{"topic":"foo2"}],'
                                '"version":1}') == ["foo1", "foo2"]
    assert parse_topics_to_move("{}") == []
    for bad in ("", "{", "nope"):
        with pytest.raises(ReassignFileError, match="^The input string is not a valid JSON$"):
            parse_topics_to_move(bad)
    with pytest.raises(ReassignFileError, match="^No such field exists: `topic`$"):
        parse_topics_to_move('{"topics":[{"name":"x"}]}')
    with pytest.raises(ReassignFileError) as caught:
        check_topics(["a", "b", "a"])
    assert str(caught.value) == "List of topics to reassign contains duplicate entries: [a]"


def test_broker_list_is_parsed_as_java_parses_ints() -> None:
    assert parse_broker_list("5,6") == [5, 6]
    assert parse_broker_list("+1,-2") == [1, -2]
    for bad, item in (("1,,2", ""), ("1, 2", " 2"), ("x", "x"), ("1_0", "1_0"),
                      ("2147483648", "2147483648")):
        with pytest.raises(ReassignFileError) as caught:
            parse_broker_list(bad)
        assert str(caught.value) == f'For input string: "{item}"'
    with pytest.raises(ReassignFileError) as caught:
        parse_broker_list("1,2,1,2")
    assert str(caught.value) == "Broker list contains duplicate entries: [1, 2]"


# -- the command line (no broker is reached: every case stops before connecting) -------------

def run_tool(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = reassign_partitions.main(list(argv))
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


@pytest.mark.parametrize("argv, message", [
    (["--bootstrap-server", "h:1"],
     "Command must include exactly one action: --generate, --execute, --verify, --cancel, "
     "--list"),
    (["--bootstrap-server", "h:1", "--list", "--verify"],
     "Command must include exactly one action: --generate, --execute, --verify, --cancel, "
     "--list"),
    (["--list"], "Please specify --bootstrap-server"),
    (["--bootstrap-server", "h:1", "--execute"],
     'Missing required argument "[reassignment-json-file]"'),
    (["--bootstrap-server", "h:1", "--generate", "--topics-to-move-json-file", "f"],
     'Missing required argument "[broker-list]"'),
    (["--bootstrap-server", "h:1", "--verify", "--reassignment-json-file", "f",
      "--additional"], 'Option "[additional]" can\'t be used with action "[verify]"'),
    (["--bootstrap-server", "h:1", "--list", "--timeout", "5"],
     'Option "[timeout]" can\'t be used with action "[list]"'),
    (["--bootstrap-server", "h:1", "--execute", "--reassignment-json-file", "f",
      "--replica-alter-log-dirs-throttle", "0"],
     "--replica-alter-log-dirs-throttle is not supported: pybroker does not move replicas "
     "between log directories (leave the flag out)"),
])
def test_command_line_checks(capsys: pytest.CaptureFixture[str], argv: list[str],
                             message: str) -> None:
    assert run_tool(capsys, *argv) == (1, "", message + "\n")


def test_files_are_read_before_connecting(capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    # The broker address is unreachable: each of these stops on the file first.
    bad = tmp_path / "bad.json"
    bad.write_text('{"partitions": [')
    rc, out, err = run_tool(capsys, "--bootstrap-server", "127.0.0.1:1", "--execute",
                            "--reassignment-json-file", str(bad))
    assert (rc, out) == (1, "")
    assert err.startswith("Error: com.fasterxml.jackson.core.JsonParseException: ")
    assert err.count("\n") == 1
    dirs = tmp_path / "dirs.json"
    dirs.write_text(json.dumps({"partitions": [{"topic": "t", "partition": 0,
                                                "replicas": [1], "log_dirs": ["/d"]}]}))
    assert run_tool(capsys, "--bootstrap-server", "127.0.0.1:1", "--verify",
                    "--reassignment-json-file", str(dirs)) == (
        1, "", 'Error: Moving a replica to a log directory is not supported: pybroker has no '
        'AlterReplicaLogDirs; give "any" as each log dir (t-0 on broker 1: /d)\n')
    rc, out, err = run_tool(capsys, "--bootstrap-server", "127.0.0.1:1", "--cancel",
                            "--reassignment-json-file", str(tmp_path / "absent.json"))
    assert (rc, out) == (1, "")
    assert err == f"Error: {tmp_path / 'absent.json'} (No such file or directory)\n"
    empty = tmp_path / "empty.json"
    empty.write_text('{"version":1,"partitions":[]}')
    assert run_tool(capsys, "--bootstrap-server", "127.0.0.1:1", "--execute",
                    "--reassignment-json-file", str(empty)) == (
        1, "", "Error: Partition reassignment list cannot be empty\n")


def test_a_negative_throttle_is_no_throttle(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    """Kafka's default is -1 (none); giving it explicitly is accepted."""
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    assert run_tool(capsys, "--bootstrap-server", "127.0.0.1:1", "--execute", "--throttle",
                    "-1", "--reassignment-json-file", str(empty)) == (
        1, "", "Error: Partition reassignment list cannot be empty\n")
