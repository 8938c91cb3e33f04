"""How pybroker-server writes its log: stderr, as text or as one JSON object per line.

`log.format=text` keeps the layout pybroker has always had (`[time] LEVEL message (logger)`,
close to Kafka's log4j pattern `[%d] %p %m (%c)%n`); `log.format=json` is for log shippers
(Fluent Bit, Vector, Loki's promtail) that would otherwise have to parse that pattern and
guess where a multi-line traceback ends. Both come from the standard library's `logging`: the
JSON layout is a small Formatter of ours rather than a dependency, since it needs nothing but
`json.dumps` and a fixed list of fields.

The format is a broker key, but the config file is read after logging must already work (a
bad key is reported through a logger). So the start is buffered: `buffer_startup_logs()`
holds records in memory, and `configure_logging()` installs the chosen format and replays
them in it, so even the config's own warnings come out as JSON when JSON was asked for.

This is the process's logging: an in-process test broker (pybroker.testing, thread mode)
never calls it, and leaves the test runner's logging alone.
"""
from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone
from logging.handlers import MemoryHandler
from typing import Any, TextIO

__all__ = ["TEXT_FORMAT", "JsonFormatter", "buffer_startup_logs", "configure_logging"]

TEXT_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"

# Attributes every LogRecord has; anything else on a record came from `extra=` and is
# written as a field of its own (the request log's `request`, for one).
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line: `timestamp` (ISO-8601, UTC, milliseconds),
    `level`, `logger`, `message`, `thread`; `exception` (the traceback text) when there is
    one, `stack` with stack_info; and the record's `extra` fields. Values json cannot encode
    are written as their str(), so a log call never fails for its arguments."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "timestamp": datetime.fromtimestamp(record.created, timezone.utc)
            .isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "thread": record.threadName,
        }
        if record.exc_info:
            if not record.exc_text:
                record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            out["exception"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in out:
                out[key] = value
        return json.dumps(out, default=str, ensure_ascii=False)


def formatter_for(log_format: str) -> logging.Formatter:
    """The Formatter of a `log.format` value (text or json; ValueError otherwise)."""
    if log_format == "json":
        return JsonFormatter()
    if log_format == "text":
        return logging.Formatter(TEXT_FORMAT)
    raise ValueError(f"unknown log.format {log_format!r} (text or json)")


def buffer_startup_logs(level: int = logging.INFO) -> MemoryHandler:
    """Hold the root logger's records in memory until `configure_logging` knows the format.

    Bounded so that a start that never reaches configure_logging cannot grow without limit:
    past 10,000 records the buffer is written out as text (flushLevel is never reached
    otherwise: nothing is written before the format is known, not even errors)."""
    root = logging.getLogger()
    fallback = logging.StreamHandler(sys.stderr)
    fallback.setFormatter(logging.Formatter(TEXT_FORMAT))
    early = MemoryHandler(10_000, flushLevel=logging.CRITICAL + 1, target=fallback,
                          flushOnClose=True)
    root.addHandler(early)
    root.setLevel(level)
    return early


def configure_logging(log_format: str, *, stream: TextIO | None = None,
                      early: MemoryHandler | None = None,
                      level: int = logging.INFO) -> logging.Handler:
    """Log the root logger's records to `stream` (stderr) in `log_format`, replacing a
    handler an earlier call installed; records `early` held are written first, in the same
    format. Returns the handler (tests read what it writes)."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(formatter_for(log_format))
    handler.set_name("pybroker")
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == "pybroker"]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    if early is not None:
        root.removeHandler(early)
        early.setTarget(handler)
        early.close()  # flushes what it held into `handler`
    return handler
