"""What every tool shares: Kafka-style flags, properties files, running, and error reporting.

A tool is `main(argv) -> int`, written as `tool_main(parser, argv, body, ...)`: parse flags
with `ArgumentParser` (Kafka's flag names; a bad flag is one line on stderr and exit code 1, as
Kafka's tools exit), refuse missing or conflicting flags before connecting, then `run()` its
async body under trio. `run()` is where failures become sentences: an unreachable broker, a
timeout, a Kafka error code or a `ToolError` print one line (with the tool's own prefix, e.g.
kafka-topics' "Error while executing topic command : ") and return 1 -- never a traceback.
Ctrl-C and SIGTERM end a tool through `stop_on_signals`, so it can clean up and report before
exiting 130.
"""
from __future__ import annotations

import argparse
import inspect
import re
import signal
import sys
import threading
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable, NoReturn, Sequence, Union, cast

import trio

from protocol.errors import KafkaError
from pybroker import VERSION_LINE
from pybroker.client.client import KafkaClient, collapse_exception_group, open_client, \
    parse_bootstrap
from pybroker.client.cluster import TopicPartition
from pybroker.client.consumer import Consumer
from pybroker.client.errors import KafkaConnectionError, KafkaTimeoutError, error_message
from pybroker.client.security import SecurityConfigError, client_security

__all__ = ["ToolError", "UsageError", "ArgumentParser", "run", "out", "err",
           "ClientProperties", "load_properties", "parse_key_values", "connect", "stop_on_signals",
           "INTERRUPTED", "split_list", "parse_argv", "include_list", "pretty_table",
           "tool_main", "require"]

INTERRUPTED = 130  # what a shell reports for a command ended by SIGINT


class ToolError(Exception):
    """A failure to report in one line, with `exit_code`; `plain` ones without the tool's
    error prefix (Kafka prints its IllegalArgumentException messages bare)."""

    def __init__(self, message: str, exit_code: int = 1, *, plain: bool = False) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.plain = plain


class UsageError(ToolError):
    """A bad command line (unknown flag, missing or conflicting options)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message, exit_code, plain=True)


class ArgumentParser(argparse.ArgumentParser):
    """argparse that reports a bad command line in one line and exit code 1 (not 2), and
    answers `--version` as every Kafka tool does."""

    def __init__(self, prog: str, description: str, **kwargs: Any) -> None:
        super().__init__(prog=prog, description=description,
                         formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs)
        self.add_argument("--version", action="version", version=VERSION_LINE,
                          help="Display the pybroker version.")

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see --help)")

    def parse(self, argv: Sequence[str] | None) -> argparse.Namespace:
        """Parse; an empty command line prints the help and is a usage error, as in Kafka."""
        args = list(sys.argv[1:] if argv is None else argv)
        if not args:
            self.print_help(sys.stderr)
            raise UsageError(f"{self.prog}: no options given (see --help)")
        return self.parse_args(args)


def out(text: str = "", end: str = "\n") -> None:
    sys.stdout.write(text + end)


def err(text: str = "", end: str = "\n") -> None:
    sys.stderr.write(text + end)
    sys.stderr.flush()


def pretty_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Kafka's ToolsUtils.prettyPrintTable: every column padded to its widest cell and
    followed by a tab, the last one too (scripts that split Kafka's output on tabs expect it)."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    return ["".join(cell.ljust(w) + "\t" for cell, w in zip(row, widths))
            for row in [list(headers), *rows]]


def split_list(values: Sequence[str] | None) -> list[str]:
    """Repeatable, comma-separated flag values (`--topic a,b --topic c`) as one list."""
    items: list[str] = []
    for value in values or ():
        items.extend(v.strip() for v in value.split(",") if v.strip())
    return items


class ClientProperties(dict[str, str]):
    """Client properties that remember which keys the tool and the client read, so that
    `connect` can name each one supplied and never used (Kafka's clients log theirs:
    AbstractConfig.logUnused) rather than ignore it silently. A key is used when something
    looked it up (`[]`, `get`, `in`), whatever it found."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> str:
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.read.add(key)
        return super().__contains__(key)

    def unused(self) -> list[str]:
        return [key for key in self if key not in self.read]


def load_properties(path: str) -> ClientProperties:
    """A Java .properties file (key=value or key: value, # and ! comments, \\ continuation)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ToolError(f"Cannot read properties file {path}: {exc.strerror or exc}") from None
    props = ClientProperties()
    logical = ""
    for raw in text.splitlines():
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        line, logical = logical + line, ""
        for i, ch in enumerate(line):
            if ch in "=:":
                props[line[:i].strip()] = line[i + 1:].strip()
                break
        else:
            props[line.strip()] = ""
    return props


def parse_key_values(items: Sequence[str] | None, what: str = "property") -> ClientProperties:
    """`key=value` flag values (Kafka's CommandLineUtils.parseKeyValueArgs)."""
    props = ClientProperties()
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"Invalid {what} '{item}': expected key=value")
        props[key.strip()] = value.strip()
    return props


def client_settings(props: dict[str, str], *, default_client_id: str,
                    request_timeout: float | None = None) -> dict[str, Any]:
    """KafkaClient options from client properties, security (TLS, SASL) included."""
    options: dict[str, Any] = {"client_id": props.get("client.id", default_client_id)}
    try:
        options["security"] = client_security(props)
    except SecurityConfigError as exc:
        raise ToolError(str(exc)) from None
    try:
        if "request.timeout.ms" in props:
            options["request_timeout"] = int(props["request.timeout.ms"]) / 1000
        elif request_timeout is not None:
            options["request_timeout"] = request_timeout
        if "socket.connection.setup.timeout.ms" in props:
            options["connect_timeout"] = int(props["socket.connection.setup.timeout.ms"]) / 1000
    except ValueError as exc:
        raise ToolError(f"Invalid client property value: {exc}") from None
    return options


@asynccontextmanager
async def connect(bootstrap: str | None, props: dict[str, str] | None = None, *,
                  default_client_id: str, request_timeout: float | None = None,
                  warn_when_unreachable: bool = False) -> AsyncIterator[KafkaClient]:
    """A connected client for `--bootstrap-server` (or bootstrap.servers in `props`).

    With `warn_when_unreachable`, a broker lost after connecting is reported on stderr once
    per outage, as Kafka's clients log it: for tools that keep retrying, not for those whose
    failure is reported as their error anyway.
    """
    props = props or {}
    from_props = props.get("bootstrap.servers")  # read either way: --bootstrap-server wins
    servers = bootstrap or from_props
    if not servers:
        raise UsageError("Missing required argument \"[bootstrap-server]\"")
    try:
        parse_bootstrap(servers)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    options = client_settings(props, default_client_id=default_client_id,
                              request_timeout=request_timeout)
    if isinstance(props, ClientProperties):  # everything the tool reads is read by now
        for key in props.unused():
            err(f"WARN The configuration '{key}' was supplied but isn't used by pybroker's "
                f"client: it is ignored")
    if warn_when_unreachable:
        options["on_unreachable"] = lambda text: err(f"WARN {text}")
    async with open_client(servers, **options) as client:
        yield client


async def stop_on_signals(cancel_scope: trio.CancelScope, stopped: list[bool],
                          task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """Cancel `cancel_scope` on SIGINT or SIGTERM (setting stopped[0]); in the main thread
    only, since signal handlers can be installed nowhere else."""
    if threading.current_thread() is not threading.main_thread():
        task_status.started()
        await trio.sleep_forever()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for _ in signals:
            stopped[0] = True
            cancel_scope.cancel()
            return


def run(body: Callable[..., Awaitable[int | None]], *args: Any,
        error_prefix: str = "Error: ") -> int:
    """Run `body(*args)` under trio and turn every failure into one line and an exit code."""
    try:
        result = trio.run(body, *args)
    except KeyboardInterrupt:
        return INTERRUPTED
    except BaseException as exc:  # noqa: BLE001 - the one place failures become sentences
        exc = collapse_exception_group(exc)
        if isinstance(exc, KeyboardInterrupt):
            return INTERRUPTED
        if isinstance(exc, ToolError):
            err(str(exc) if exc.plain else f"{error_prefix}{exc}")
            return exc.exit_code
        if isinstance(exc, (KafkaConnectionError, KafkaTimeoutError, KafkaError)):
            err(f"{error_prefix}{_sentence(error_message(exc))}")
            return 1
        if isinstance(exc, (SystemExit, GeneratorExit)):
            raise
        if isinstance(exc, BrokenPipeError):
            return 1
        err(f"{error_prefix}unexpected {type(exc).__name__}: {exc}")
        return 1
    return int(result or 0)


def include_list(pattern: str) -> "re.Pattern[str]":
    """Kafka's IncludeList: a Java regex where ',' separates alternatives, matched whole."""
    text = pattern.strip().replace(",", "|").replace(" ", "").strip("\"'")
    try:
        return re.compile(text)
    except re.error as exc:
        raise UsageError(f"Invalid regular expression '{pattern}': {exc}") from None


async def subscribe_or_assign(consumer: Consumer, topic: str | None, include: str | None, *,
                              allow_auto_create: bool = False) -> None:
    """What the consumer tools read: `topic`, or every non-internal topic matching the
    `include` list; joined through the consumer's group if it has one, else all partitions
    assigned directly."""
    client = consumer.client
    if topic:
        await client.topic(topic, refresh=True, allow_auto_create=allow_auto_create)
        topics = [topic]
    else:
        pattern = include_list(include or "")
        meta = await client.refresh_metadata(None)
        topics = sorted(n for n, t in meta.topics.items()
                        if not t.internal and pattern.fullmatch(n))
    if consumer.group_id is not None:
        await consumer.subscribe(topics)
    else:
        consumer.assign([TopicPartition(t, p) for t in topics
                         for p in sorted(client.topics[t].partitions)])


def _sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] if text else text


def parse_argv(parser: ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace | int:
    """Parse, or the exit code after reporting a usage error (help exits 0 via SystemExit)."""
    try:
        return parser.parse(argv)
    except UsageError as exc:
        err(str(exc))
        return exc.exit_code
    except SystemExit as exc:  # --help
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1


Flag = Union[str, Sequence[str]]
"""A required flag by its argparse dest (`bootstrap_server`), or a tuple of alternatives any one
of which will do (`("bootstrap_server", "broker_list")`, named after the first)."""


def _given(value: Any) -> bool:
    # Numbers count even when 0 (`--messages 0`); an empty string or list does not.
    return value is not None and value is not False and value != "" and value != []


def require(args: argparse.Namespace, *flags: Flag) -> None:
    """Kafka's 'Missing required argument' for the first of `flags` not given, in order."""
    for flag in flags:
        names = (flag,) if isinstance(flag, str) else tuple(flag)
        if not any(_given(getattr(args, name)) for name in names):
            raise UsageError(f'Missing required argument "[{names[0].replace("_", "-")}]"')


def tool_main(parser: ArgumentParser, argv: Sequence[str] | None,
              body: Callable[..., Awaitable[int | None] | int], *,
              required: Sequence[Flag] = (),
              check: Callable[[argparse.Namespace], Any] | None = None,
              error_prefix: str = "Error: ") -> int:
    """Every tool's `main`: parse, refuse a bad command line before connecting, run `body`.

    `required` flags are refused first, then the tool's own `check(args)` (a tool whose order
    of refusals interleaves the two calls `require` inside its check); either reports its
    `ToolError` bare and exits with its code, as Kafka prints usage errors. What `check`
    returns, unless None, is passed to `body` after `args` (the action it chose). An async
    `body` runs under `run()` with `error_prefix`; a plain function (a tool that reads files,
    not brokers, and reports its own errors) is called as it is.
    """
    args = parse_argv(parser, argv)
    if isinstance(args, int):
        return args
    try:
        require(args, *required)
        chosen = check(args) if check is not None else None
    except ToolError as exc:
        err(str(exc))
        return exc.exit_code
    extra = () if chosen is None else (chosen,)
    if not inspect.iscoroutinefunction(body):  # so it returns an int or None
        return int(cast("int | None", body(args, *extra)) or 0)
    return run(body, args, *extra, error_prefix=error_prefix)
