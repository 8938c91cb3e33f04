"""kafka-console-producer and kafka-console-consumer: lines in, lines out, as Kafka's do.

Most tests run the tools in-process; the prompt at a terminal (a pty) and the warning when the
broker goes away (a broker killed under a running consumer) need real processes.
"""
from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from pybroker.tools import console_consumer, console_producer, topics
from tests.helpers import ROOT, BrokerProcess
from tests.integration.group_harness import wait_until

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


# -- as processes ----------------------------------------------------------------------------

def _tool_process(module: str, *argv: str, **popen: object) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", f"pybroker.tools.{module}", *argv],
                            cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                            **popen)  # type: ignore[call-overload]


def _terminal() -> tuple[int, int]:
    """A pty (master, slave) without echo, so the master reads only what the tool writes."""
    master, slave = pty.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[3] &= ~termios.ECHO
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    return master, slave


def _read(fd: int, size: int, timeout: float = 20) -> bytes:
    """`size` bytes from `fd`, or fewer if the deadline passes first. (poll, not select: in
    a whole test run descriptors numbered past select's 1024 are common.)"""
    data = b""
    deadline = time.monotonic() + timeout
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while len(data) < size and time.monotonic() < deadline:
        if poller.poll(100):
            try:
                chunk = os.read(fd, size - len(data))
            except OSError:  # EIO: every writer has closed the terminal
                break
            if not chunk:
                break
            data += chunk
    return data


def test_console_producer_prompts_at_a_terminal(tool, bootstrap, topic) -> None:
    # Kafka's LineMessageReader prints ">" before each line when System.console() exists.
    master, slave = _terminal()
    proc = _tool_process("console_producer", "--bootstrap-server", bootstrap, "--topic", topic,
                         stdin=slave, stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    try:
        assert _read(master, 1) == b">"  # before anything is typed
        os.write(master, b"first event\n")
        assert _read(master, 1) == b">"  # ready for the next line
        os.write(master, b"\x04")  # Ctrl-D at the start of a line: end of input
        _, err = proc.communicate(timeout=30)
        assert (proc.returncode, err) == (0, b"")
        assert _read(master, 1, timeout=0.5) == b""  # no prompt after the end of input
    finally:
        proc.kill()
        os.close(master)
    r = consume(tool, bootstrap, topic, "--max-messages", "1")
    assert r.out == "first event\n"


def test_console_producer_reading_a_pipe_shows_no_prompt(tool, bootstrap, topic) -> None:
    master, slave = _terminal()  # stdout is a terminal, stdin is not: no console, as in Java
    proc = _tool_process("console_producer", "--bootstrap-server", bootstrap, "--topic", topic,
                         stdin=subprocess.PIPE, stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    try:
        _, err = proc.communicate(b"piped\n", timeout=30)
        assert (proc.returncode, err) == (0, b"")
        assert _read(master, 1, timeout=0.5) == b""
    finally:
        proc.kill()
        os.close(master)
    assert consume(tool, bootstrap, topic, "--max-messages", "1").out == "piped\n"


UNREACHABLE = re.compile(r"WARN Connection to node \d+ \(127\.0\.0\.1:(\d+)\) could not be "
                         r"established\. Broker may not be available\.")


def _collect(stream, into: list[str]) -> None:  # type: ignore[no-untyped-def]
    threading.Thread(target=lambda: into.extend(stream), daemon=True).start()


def test_console_consumer_warns_once_per_outage(tool, tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "logs").start()
    assert tool(console_producer.main, "--bootstrap-server", broker.bootstrap, "--topic",
                "outage", stdin=b"before\n").rc == 0
    consumer = _tool_process("console_consumer", "--bootstrap-server", broker.bootstrap,
                             "--topic", "outage", "--from-beginning", stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    out: list[str] = []
    err: list[str] = []
    _collect(consumer.stdout, out)
    _collect(consumer.stderr, err)

    def warnings() -> list[str]:
        return [line.rstrip("\n") for line in list(err) if line.startswith("WARN")]

    try:
        wait_until(lambda: out == ["before\n"], 20, "the first record")
        for outage in (1, 2):
            broker.kill()
            wait_until(lambda: len(warnings()) == outage, 20, f"warning {outage}")
            time.sleep(3)  # the consumer retries every half second meanwhile: no more lines
            assert len(warnings()) == outage, err
            match = UNREACHABLE.fullmatch(warnings()[-1])
            assert match is not None and match.group(1) == str(broker.port), err
            if outage == 1:  # back on the same port and log dir: the consumer carries on
                broker = BrokerProcess(tmp_path / "logs", port=broker.port).start()
                assert tool(console_producer.main, "--bootstrap-server", broker.bootstrap,
                            "--topic", "outage", stdin=b"after\n").rc == 0
                wait_until(lambda: out == ["before\n", "after\n"], 20, "the record after")
        assert consumer.poll() is None, err  # still running: a warning, not an exit
    finally:
        consumer.kill()
        consumer.wait(10)
        if broker.proc is not None and broker.proc.poll() is None:
            broker.kill()


def _producer_ids(bootstrap: str, topic: str) -> list[tuple[int, int]]:
    from compat import wire
    return [(h.producer_id, h.base_sequence) for h, _ in wire.batches(bootstrap, topic, 0)]


def test_console_producer_is_idempotent_unless_acks_forbid_it(tool, bootstrap, topic) -> None:
    """As Kafka's: enable.idempotence defaults to true with acks=all (the console producer's
    default), is off with other acks, and asked for with acks=1 is a usage error."""
    run = ("--bootstrap-server", bootstrap, "--topic", topic, "--producer-property",
           "linger.ms=0")
    assert tool(console_producer.main, *run, stdin=b"a\nb\n").rc == 0
    assert tool(console_producer.main, *run, "--request-required-acks", "1",
                stdin=b"c\n").rc == 0
    assert tool(console_producer.main, *run, "--producer-property", "enable.idempotence=false",
                stdin=b"d\n").rc == 0
    stamped = _producer_ids(bootstrap, topic)
    assert len(stamped) == 3 and stamped[0][0] >= 0 and stamped[0][1] == 0, stamped
    assert stamped[1:] == [(-1, -1), (-1, -1)], stamped
    r = tool(console_producer.main, *run, "--request-required-acks", "1", "--producer-property",
             "enable.idempotence=true", stdin=b"e\n")
    assert r.rc == 1 and "Must set acks to all" in r.err


def test_console_consumer_refuses_an_assignor_it_does_not_run(tool, bootstrap, topic) -> None:
    tool(console_producer.main, "--bootstrap-server", bootstrap, "--topic", topic,
         stdin=b"one\n")
    r = consume(tool, bootstrap, topic, "--group", "refused", "--consumer-property",
                "partition.assignment.strategy="
                "org.apache.kafka.clients.consumer.RoundRobinAssignor")
    assert r.rc == 1 and "RoundRobinAssignor" in r.err and "not supported" in r.err, r.err
    for i, assignor in enumerate(("RangeAssignor", "CooperativeStickyAssignor")):
        r = consume(tool, bootstrap, topic, "--group", f"{topic}-{i}", "--consumer-property",
                    f"partition.assignment.strategy=org.apache.kafka.clients.consumer.{assignor}",
                    "--max-messages", "1")
        assert (r.rc, r.out) == (0, "one\n"), r.err


def test_client_properties_pybroker_does_not_use_are_named(tool, bootstrap, topic,
                                                             tmp_path) -> None:
    """Kafka's client keys the tools' client applies (linger.ms, batch.size, fetch.min.bytes,
    fetch.max.wait.ms, ...) take effect quietly; each one it does not use is named on
    stderr as ignored (as Kafka's clients log the configurations they did not use) rather
    than dropped silently — from --producer-property, --consumer-property and an admin
    tool's --command-config alike."""
    def warned(err: str) -> list[str]:
        return [line for line in err.splitlines() if line.startswith("WARN The configuration")]
    r = tool(console_producer.main, "--bootstrap-server", bootstrap, "--topic", topic,
             "--producer-property", "linger.ms=0", "--producer-property", "batch.size=16384",
             "--producer-property", "retries=5", "--producer-property", "send.buffer.bytes=1",
             stdin=b"a\n")
    assert r.rc == 0, r.err
    assert warned(r.err) == [
        f"WARN The configuration '{key}' was supplied but isn't used by pybroker's client: "
        "it is ignored" for key in ("retries", "send.buffer.bytes")]
    r = consume(tool, bootstrap, topic, "--max-messages", "1",
                "--consumer-property", "fetch.min.bytes=1",
                "--consumer-property", "fetch.max.wait.ms=100",
                "--consumer-property", "check.crcs=false")
    assert r.out == "a\n"
    assert [line.split("'")[1] for line in warned(r.err)] == ["check.crcs"]
    config = tmp_path / "admin.properties"
    config.write_text("client.id=admin\nrequest.timeout.ms=30000\nacks=all\n")
    r = tool(topics.main, "--bootstrap-server", bootstrap, "--list",
             "--command-config", str(config))
    assert r.rc == 0 and topic in r.out.split()
    assert [line.split("'")[1] for line in warned(r.err)] == ["acks"]
