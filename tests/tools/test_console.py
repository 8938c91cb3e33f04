"""kafka-console-producer and kafka-console-consumer: lines in, lines out, as Kafka's do."""
from __future__ import annotations

import re

import pytest

from pybroker.tools import console_consumer, console_producer, topics

PROCESSED = re.compile(r"Processed a total of (\d+) messages\n$")


@pytest.fixture
def topic(tool, bootstrap, name):  # type: ignore[no-untyped-def]
    t = name("console")
    assert tool(topics.main, "--bootstrap-server", bootstrap, "--create", "--topic", t,
                "--partitions", "1").rc == 0
    return t


def consume(tool, bootstrap, topic, *extra):  # type: ignore[no-untyped-def]
    return tool(console_consumer.main, "--bootstrap-server", bootstrap, "--topic", topic,
                "--from-beginning", "--timeout-ms", "1500", *extra)


def test_lines_round_trip(tool, bootstrap, topic) -> None:
    r = tool(console_producer.main, "--bootstrap-server", bootstrap, "--topic", topic,
             stdin=b"hello\nworld\n\nlast line without newline")
    assert (r.rc, r.out, r.err) == (0, "", "")
    r = consume(tool, bootstrap, topic, "--max-messages", "4")
    assert r.rc == 0
    assert r.out == "hello\nworld\n\nlast line without newline\n"
    assert PROCESSED.search(r.err).group(1) == "4"  # type: ignore[union-attr]


def test_keys_timestamps_headers_partitions_offsets(tool, bootstrap, topic) -> None:
    r = tool(console_producer.main, "--broker-list", bootstrap, "--topic", topic,
             "--property", "parse.key=true", "--property", "key.separator=:",
             "--property", "parse.headers=true", "--sync",
             stdin=b"h1:a,h2:b\tk1:v1\n\tk2:v2\r\n")
    assert r.rc == 0, r.err
    r = consume(tool, bootstrap, topic, "--max-messages", "2",
                "--property", "print.key=true", "--property", "print.timestamp=true",
                "--property", "print.headers=true", "--property", "print.partition=true",
                "--property", "print.offset=true", "--property", "key.separator=|")
    lines = r.out.splitlines()
    assert re.fullmatch(r"CreateTime:\d{13}\|Partition:0\|Offset:0\|h1:a,h2:b\|k1\|v1",
                        lines[0]), lines
    assert re.fullmatch(r"CreateTime:\d{13}\|Partition:0\|Offset:1\|NO_HEADERS\|k2\|v2",
                        lines[1]), lines
    assert PROCESSED.search(r.err).group(1) == "2"  # type: ignore[union-attr]


def test_null_marker_and_null_literal(tool, bootstrap, topic) -> None:
    r = tool(console_producer.main, "--bootstrap-server", bootstrap, "--topic", topic,
             "--property", "parse.key=true", "--property", "null.marker=NULL",
             stdin=b"NULL\tvalue\nkey\tNULL\n")
    assert r.rc == 0, r.err
    r = consume(tool, bootstrap, topic, "--max-messages", "2", "--property", "print.key=true",
                "--property", "null.literal=<none>")
    assert r.out == "<none>\tvalue\nkey\t<none>\n"


def test_missing_key_separator_stops_the_producer(tool, bootstrap, topic) -> None:
    r = tool(console_producer.main, "--bootstrap-server", bootstrap, "--topic", topic,
             "--property", "parse.key=true", stdin=b"no separator here\n")
    assert r.rc == 1
    assert r.err == "Error: No key separator found on line number 1: 'no separator here'\n"
    r = tool(console_producer.main, "--bootstrap-server", bootstrap, "--topic", topic,
             "--property", "parse.key=true", "--property", "ignore.error=true",
             stdin=b"no separator here\n")
    assert r.rc == 0
    assert consume(tool, bootstrap, topic, "--max-messages", "1",
                   "--property", "print.key=true").out == "null\tno separator here\n"


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd", "none"])
def test_compression_codecs_and_acks(tool, bootstrap, topic, codec) -> None:
    r = tool(console_producer.main, "--bootstrap-server", bootstrap, "--topic", topic,
             "--compression-codec", codec, "--request-required-acks", "1",
             "--producer-property", "linger.ms=0", stdin=b"a\nb\nc\n")
    assert r.rc == 0, r.err
    assert consume(tool, bootstrap, topic, "--max-messages", "3").out == "a\nb\nc\n"


def test_compression_codec_without_value_means_gzip(tool, bootstrap, topic, tmp_path) -> None:
    r = tool(console_producer.main, "--bootstrap-server", bootstrap, "--topic", topic,
             "--compression-codec", stdin=b"zipped\n")
    assert r.rc == 0
    assert consume(tool, bootstrap, topic, "--max-messages", "1").out == "zipped\n"


def test_acks_zero_exits_once_written(tool, bootstrap, topic) -> None:
    r = tool(console_producer.main, "--bootstrap-server", bootstrap, "--topic", topic,
             "--request-required-acks", "0", stdin=b"fire\nand\nforget\n")
    assert r.rc == 0, r.err
    assert consume(tool, bootstrap, topic, "--max-messages", "3").out == "fire\nand\nforget\n"


def test_partition_and_offset(tool, bootstrap, topic) -> None:
    tool(console_producer.main, "--bootstrap-server", bootstrap, "--topic", topic,
         stdin=b"m0\nm1\nm2\nm3\n")
    base = ("--bootstrap-server", bootstrap, "--topic", topic, "--partition", "0",
            "--timeout-ms", "1000")
    assert tool(console_consumer.main, *base, "--offset", "2").out == "m2\nm3\n"
    assert tool(console_consumer.main, *base, "--offset", "earliest",
                "--max-messages", "1").out == "m0\n"
    r = tool(console_consumer.main, *base)  # default: latest, so nothing
    assert r.out == "" and PROCESSED.search(r.err).group(1) == "0"  # type: ignore[union-attr]
    assert "TimeoutException" in r.err and r.rc == 0


def test_group_commits_what_was_printed(tool, bootstrap, topic, name) -> None:
    group = name("console-group")
    tool(console_producer.main, "--bootstrap-server", bootstrap, "--topic", topic,
         stdin=b"1\n2\n3\n4\n5\n")
    args = ("--bootstrap-server", bootstrap, "--topic", topic, "--group", group,
            "--from-beginning", "--timeout-ms", "1500")
    assert tool(console_consumer.main, *args, "--max-messages", "2").out == "1\n2\n"
    r = tool(console_consumer.main, *args)
    assert r.out == "3\n4\n5\n" and PROCESSED.search(r.err).group(1) == "3"  # type: ignore
    assert tool(console_consumer.main, *args).out == ""


def test_isolation_level_and_consumer_properties(tool, bootstrap, topic) -> None:
    tool(console_producer.main, "--bootstrap-server", bootstrap, "--topic", topic,
         stdin=b"committed\n")
    r = consume(tool, bootstrap, topic, "--isolation-level", "read_committed",
                "--consumer-property", "fetch.max.wait.ms=100", "--max-messages", "1")
    assert r.out == "committed\n"
    r = consume(tool, bootstrap, topic, "--isolation-level", "serializable")
    assert r.rc == 1 and "isolation.level" in r.err


def test_unknown_topic(tool, bootstrap) -> None:
    r = tool(console_producer.main, "--bootstrap-server", bootstrap, "--topic", "nowhere",
             stdin=b"x\n")
    assert (r.rc, r.err) == (1, "Error: Topic 'nowhere' does not exist.\n")
    r = tool(console_consumer.main, "--bootstrap-server", bootstrap, "--topic", "nowhere")
    assert r.rc == 1 and r.err.endswith("Error: Topic 'nowhere' does not exist.\n")
    r = tool(console_consumer.main, "--bootstrap-server", bootstrap, "--topic", "nowhere",
             "--partition", "0")
    assert r.rc == 1 and "does not exist" in r.err


def test_missing_partition(tool, bootstrap, topic) -> None:
    r = tool(console_consumer.main, "--bootstrap-server", bootstrap, "--topic", topic,
             "--partition", "7")
    assert r.rc == 1
    assert f"Partition 7 of topic {topic} does not exist" in r.err


def test_invalid_arguments(tool, bootstrap, topic) -> None:
    consumer_cases = {
        ("--topic", topic, "--offset", "3"): "The partition is required when offset is "
                                             "specified.",
        ("--topic", topic, "--partition", "0", "--offset", "1", "--from-beginning"):
            "Options from-beginning and offset cannot be specified together.",
        ("--topic", topic, "--partition", "0", "--group", "g"):
            "Options group and partition cannot be specified together.",
        ("--topic", topic, "--partition", "0", "--offset", "-5"):
            "The provided offset value '-5' is incorrect.",
        ("--partition", "0",): "Exactly one of include/topic is required.",
        ("--topic", topic, "--from-beginning", "--consumer-property",
         "auto.offset.reset=latest"): "Can't simultaneously specify --from-beginning and "
                                      "'auto.offset.reset=latest'",
        ("--topic", topic, "--nope"): "unrecognized arguments: --nope",
    }
    for argv, message in consumer_cases.items():
        r = tool(console_consumer.main, "--bootstrap-server", bootstrap, *argv)
        assert r.rc == 1, argv
        assert message in r.err and r.err.count("\n") == 1, (argv, r.err)
    producer_cases = {
        ("--request-required-acks", "2"): "Invalid value 2 for acks",
        ("--compression-codec", "brotli"): "Invalid compression type 'brotli'",
        ("--producer-property", "linger.ms=soon"): "Invalid value soon for configuration "
                                                   "linger.ms",
        ("--bogus",): "unrecognized arguments: --bogus",
    }
    for argv, message in producer_cases.items():
        r = tool(console_producer.main, "--bootstrap-server", bootstrap, "--topic", topic,
                 *argv, stdin=b"x\n")
        assert r.rc == 1, argv
        assert message in r.err and r.err.count("\n") == 1, (argv, r.err)
    r = tool(console_producer.main, "--topic", topic, stdin=b"")
    assert (r.rc, r.err) == (1, 'Missing required argument "[bootstrap-server]"\n')


def test_unreachable_broker(tool) -> None:
    r = tool(console_producer.main, "--bootstrap-server", "127.0.0.1:1", "--topic", "t",
             stdin=b"x\n")
    assert (r.rc, r.err) == (1, "Error: Could not connect to 127.0.0.1:1 (Connection refused)\n")
    r = tool(console_consumer.main, "--bootstrap-server", "127.0.0.1:1", "--topic", "t")
    assert (r.rc, r.err) == (1, "Error: Could not connect to 127.0.0.1:1 (Connection refused)\n")


def test_include_regex_reads_every_matching_topic(tool, bootstrap, name) -> None:
    prefix = name("inc")
    for suffix in ("a", "b"):
        t = f"{prefix}-{suffix}"
        tool(topics.main, "--bootstrap-server", bootstrap, "--create", "--topic", t)
        tool(console_producer.main, "--bootstrap-server", bootstrap, "--topic", t,
             stdin=suffix.encode() + b"\n")
    r = tool(console_consumer.main, "--bootstrap-server", bootstrap, "--include", f"{prefix}-.*",
             "--from-beginning", "--max-messages", "2", "--timeout-ms", "1500")
    assert sorted(r.out.splitlines()) == ["a", "b"]
