"""kafka-console-producer: one record per line of standard input.

Kafka's ConsoleProducer with its LineMessageReader: `--property parse.key=true` splits each
line at `key.separator` (a tab by default), `parse.headers=true` reads `k1:v1,k2:v2` before the
key, `null.marker` turns a matching key, value or header value into null, `ignore.error=true`
sends a line without a separator as a keyless record instead of stopping. Lines are bytes as
read (a trailing CR is dropped, as Java's readLine does). Producer settings come from
`--producer-property`, `--producer.config` and the dedicated flags (`--request-required-acks`,
`--compression-codec`, `--timeout` = linger.ms, `--batch-size`), explicit flags winning.

At a terminal (stdin and stdout both ttys) a `>` prompt is printed before each line, as
Kafka's; none when input is piped, so scripted output stays clean.

At end of input the tool waits until every record is acknowledged and exits 0; a record the
broker refused is reported on stderr in Kafka's words and the exit code becomes 1. Ctrl-C stops
reading, still flushes what was read, and exits 130.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, AsyncIterator, BinaryIO, Sequence, cast

import trio

from protocol.errors import ErrorCode, KafkaError
from pybroker.client.errors import KafkaConnectionError, KafkaTimeoutError, error_message
from pybroker.client.producer import DeliveryFuture, Producer, parse_acks, parse_compression
from pybroker.tools.client_config import idempotence, producer_options
from pybroker.tools.common import (
    INTERRUPTED, ArgumentParser, ClientProperties, ToolError, UsageError, connect, err,
    load_properties, parse_key_values, stop_on_signals, tool_main,
)

PROG = "kafka-console-producer"
_FATAL = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_TOPIC_EXCEPTION,
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.UNSUPPORTED_VERSION})


def build_parser() -> ArgumentParser:
    p = ArgumentParser(PROG, "This tool helps to read data from standard input and publish "
                       "it to Kafka.")
    p.add_argument("--bootstrap-server", help="REQUIRED unless --broker-list(deprecated) is "
                   "specified. The server(s) to connect to.")
    p.add_argument("--broker-list", help="DEPRECATED, use --bootstrap-server instead.")
    p.add_argument("--topic", help="REQUIRED: The topic id to produce messages to.")
    p.add_argument("--sync", action="store_true", help="If set message send requests to the "
                   "brokers are synchronously, one at a time as they arrive.")
    p.add_argument("--compression-codec", nargs="?", const="gzip", metavar="codec",
                   help="The compression codec: either 'none', 'gzip', 'snappy', 'lz4', or "
                   "'zstd'. If specified without value, then it defaults to 'gzip'")
    p.add_argument("--batch-size", type=int, help="Number of bytes to send in a single batch.")
    p.add_argument("--timeout", type=int, metavar="timeout_ms", help="If set and the producer "
                   "is running in asynchronous mode, this gives the maximum amount of time a "
                   "message will queue awaiting sufficient batch size (linger.ms). Default 1000.")
    p.add_argument("--request-required-acks", metavar="acks",
                   help="The required acks of the producer requests (default: -1).")
    p.add_argument("--request-timeout-ms", type=int, help="The ack timeout of the producer "
                   "requests (default: 1500).")
    p.add_argument("--message-send-max-retries", type=int, help=argparse.SUPPRESS)
    p.add_argument("--retry-backoff-ms", type=int, help=argparse.SUPPRESS)
    p.add_argument("--max-block-ms", type=int, help=argparse.SUPPRESS)
    p.add_argument("--max-memory-bytes", type=int, help="The total memory used by the "
                   "producer to buffer records waiting to be sent (buffer.memory).")
    p.add_argument("--max-partition-memory-bytes", type=int, help=argparse.SUPPRESS)
    p.add_argument("--metadata-expiry-ms", type=int, help=argparse.SUPPRESS)
    p.add_argument("--socket-buffer-size", type=int, help=argparse.SUPPRESS)
    p.add_argument("--producer-property", "--command-property", action="append",
                   dest="producer_property", metavar="prop=value",
                   help="A mechanism to pass user-defined properties to the producer.")
    p.add_argument("--producer.config", "--command-config", dest="producer_config",
                   help="Producer config properties file.")
    p.add_argument("--property", "--reader-property", action="append", dest="property",
                   metavar="prop=value", help="Properties of the line reader: parse.key, "
                   "key.separator, parse.headers, headers.delimiter, headers.separator, "
                   "headers.key.separator, null.marker, ignore.error.")
    p.add_argument("--reader-config", help="Config properties file for the line reader.")
    p.add_argument("--line-reader", help=argparse.SUPPRESS)
    return p


class LineReader:
    """Kafka's LineMessageReader over byte lines."""

    def __init__(self, props: dict[str, str]) -> None:
        def flag(name: str) -> bool:
            return props.get(name, "false").strip().lower() == "true"

        def sep(name: str, default: str) -> bytes:
            return props.get(name, default).encode("utf-8")

        self.parse_key = flag("parse.key")
        self.parse_headers = flag("parse.headers")
        self.ignore_error = flag("ignore.error")
        self.key_separator = sep("key.separator", "\t")
        self.headers_delimiter = sep("headers.delimiter", "\t")
        self.headers_separator = sep("headers.separator", ",")
        self.headers_key_separator = sep("headers.key.separator", ":")
        marker = props.get("null.marker")
        self.null_marker = None if marker is None else marker.encode("utf-8")
        for name, value in (("key.separator", self.key_separator),
                            ("headers.delimiter", self.headers_delimiter),
                            ("headers.separator", self.headers_separator),
                            ("headers.key.separator", self.headers_key_separator)):
            if not value:
                raise UsageError(f"{name} must not be empty")
            if self.null_marker is not None and value == self.null_marker:
                raise UsageError(f"null.marker and {name} may not be equal")
        self.line_number = 0

    def _split(self, enabled: bool, line: bytes, start: int, sep: bytes, what: str
               ) -> bytes | None:
        if not enabled:
            return None
        index = line.find(sep, start)
        if index < 0:
            if self.ignore_error:
                return None
            raise ToolError(f"No {what} found on line number {self.line_number}: "
                            f"'{line.decode('utf-8', 'replace')}'")
        return line[start:index]

    def parse(self, line: bytes) -> tuple[bytes | None, bytes | None,
                                           list[tuple[str, bytes | None]]]:
        """(key, value, headers) of one line."""
        self.line_number += 1
        raw_headers = self._split(self.parse_headers, line, 0, self.headers_delimiter,
                                  "headers delimiter")
        offset = 0 if raw_headers is None else len(raw_headers) + len(self.headers_delimiter)
        key = self._split(self.parse_key, line, offset, self.key_separator, "key separator")
        offset += 0 if key is None else len(key) + len(self.key_separator)
        value: bytes | None = line[offset:]
        headers: list[tuple[str, bytes | None]] = []
        if raw_headers:
            for pair in raw_headers.split(self.headers_separator):
                hkey, found, hvalue = pair.partition(self.headers_key_separator)
                if not found:
                    raise ToolError(f"No header key separator found in pair "
                                    f"'{pair.decode('utf-8', 'replace')}' on line number "
                                    f"{self.line_number}")
                if self.null_marker is not None and hkey == self.null_marker:
                    raise ToolError(f"Header keys should not be equal to the null marker "
                                    f"'{self.null_marker.decode()}' as they can't be null")
                headers.append((hkey.decode("utf-8", "replace"),
                                None if hvalue == self.null_marker else hvalue))
        if self.null_marker is not None:
            key = None if key == self.null_marker else key
            value = None if value == self.null_marker else value
        return key, value, headers


def _interactive() -> bool:
    """Whether a person is typing: stdin and stdout both terminals, the condition under which
    Java's System.console() exists and Kafka's LineMessageReader prints its `>` prompt."""
    try:
        return sys.stdin.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced or closed streams
        return False


def _show_prompt() -> None:
    sys.stdout.write(">")
    sys.stdout.flush()


async def read_lines(stream: BinaryIO, prompt: bool = False) -> AsyncIterator[list[bytes]]:
    """Chunks of complete lines from a blocking binary stream, read in a worker thread.

    A real file descriptor is read with os.read, not through its BufferedReader: on Ctrl-C
    the reading thread is abandoned mid-read, and a thread holding the reader's lock at
    interpreter shutdown makes CPython abort. With `prompt`, `>` is written to stdout before
    each read; a terminal hands over one line per read, so that is one prompt per line typed.
    """
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        read = getattr(stream, "read1", stream.read)
    else:
        def read(size: int) -> bytes:
            return os.read(fd, size)
    buffer = b""
    while True:
        if prompt:
            _show_prompt()
        chunk = await trio.to_thread.run_sync(read, 65536, abandon_on_cancel=True)
        if not chunk:
            break
        buffer += chunk
        lines = buffer.split(b"\n")
        buffer = lines.pop()
        if lines:
            yield [ln[:-1] if ln.endswith(b"\r") else ln for ln in lines]
    if buffer:
        yield [buffer[:-1] if buffer.endswith(b"\r") else buffer]


def settings(args: argparse.Namespace) -> tuple[dict[str, str], dict[str, Any]]:
    """Producer properties (for the client) and Producer options, explicit flags winning."""
    props = load_properties(args.producer_config) if args.producer_config else ClientProperties()
    props.update(parse_key_values(args.producer_property, "producer property"))
    options: dict[str, Any] = {"acks": -1, "linger_ms": 1000, "request_timeout_ms": 1500}
    options.update(producer_options(props))
    try:
        if args.request_required_acks is not None:
            options["acks"] = parse_acks(args.request_required_acks)
        if args.compression_codec is not None:
            options["compression"] = parse_compression(args.compression_codec)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    options["enable_idempotence"] = idempotence(props, options["acks"])
    for flag, option in (("timeout", "linger_ms"), ("batch_size", "batch_size"),
                         ("request_timeout_ms", "request_timeout_ms"),
                         ("max_memory_bytes", "buffer_memory")):
        if getattr(args, flag) is not None:
            options[option] = getattr(args, flag)
    return props, options


class _Reporter:
    """Reports failed sends in Kafka's words; remembers that one failed."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.failed = False

    async def settle(self, fut: DeliveryFuture, key: bytes | None, value: bytes | None) -> None:
        try:
            await fut.wait()
        except (KafkaError, KafkaConnectionError, KafkaTimeoutError) as exc:
            self.report(key, value, exc)

    def report(self, key: bytes | None, value: bytes | None, exc: BaseException) -> None:
        self.failed = True
        key_text = "null" if key is None else f"{len(key)} bytes"
        value_text = "null" if value is None else f"{len(value)} bytes"
        err(f"ERROR Error when sending message to topic {self.topic} with key: {key_text}, "
            f"value: {value_text} with error: {error_message(exc)}")


async def _main(args: argparse.Namespace) -> int:
    reader_props = load_properties(args.reader_config) if args.reader_config else {}
    reader_props.update(parse_key_values(args.property))
    reader = LineReader(reader_props)
    props, options = settings(args)
    bootstrap = args.bootstrap_server or args.broker_list
    # A test's stdin is a bytes stream of its own, with no .buffer.
    stdin = cast(BinaryIO, getattr(sys.stdin, "buffer", sys.stdin))
    reporter = _Reporter(args.topic)
    stopped = [False]
    async with connect(bootstrap, props, default_client_id="console-producer") as client:
        async with Producer(client, **options) as producer:
            with trio.CancelScope() as reading:
                await client.nursery.start(stop_on_signals, reading, stopped)
                pending: list[tuple[DeliveryFuture, bytes | None, bytes | None]] = []
                async for lines in read_lines(stdin, prompt=_interactive()):
                    for line in lines:
                        key, value, headers = reader.parse(line)
                        try:
                            fut = await producer.send(args.topic, value, key, headers)
                        except KafkaError as exc:
                            if exc.code in _FATAL:
                                raise
                            reporter.report(key, value, exc)
                            continue
                        if args.sync:
                            await producer.flush()
                            await reporter.settle(fut, key, value)
                        else:
                            pending.append((fut, key, value))
                    still = []
                    for item in pending:
                        if item[0].done():
                            await reporter.settle(*item)
                        else:
                            still.append(item)
                    pending = still
        for item in pending:  # the producer has flushed: all settled now
            await reporter.settle(*item)
    if stopped[0]:
        return INTERRUPTED
    return 1 if reporter.failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    return tool_main(build_parser(), argv, _main,
                     required=(("bootstrap_server", "broker_list"), "topic"))


if __name__ == "__main__":
    sys.exit(main())
