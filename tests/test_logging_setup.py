"""log.format: the JSON formatter's fields, and the start-up records replayed in the format
the config chose (pybroker/runtime/logging_setup.py)."""
from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from pybroker.runtime.logging_setup import (
    JsonFormatter, buffer_startup_logs, configure_logging, formatter_for,
)


@pytest.fixture
def root_handlers() -> Iterator[None]:
    """configure_logging changes the root logger: put back pytest's handlers and level."""
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    yield
    root.handlers[:] = saved
    root.setLevel(level)


def test_json_lines_carry_kafka_ish_fields_exceptions_and_extras() -> None:
    record = logging.LogRecord("pybroker.server", logging.ERROR, __file__, 1,
                               "broker %d failed\nat %s", (3, "start"), None)
    try:
        raise ValueError("disk gone")
    except ValueError:
        import sys
        record.exc_info = sys.exc_info()
    record.request = {"api": "Produce", "error_code": 0}
    record.odd = object()  # not JSON: written as its str()
    line = JsonFormatter().format(record)
    assert "\n" not in line
    out = json.loads(line)
    assert out["level"] == "ERROR" and out["logger"] == "pybroker.server"
    assert out["message"] == "broker 3 failed\nat start"
    assert out["timestamp"].endswith("+00:00") and len(out["timestamp"]) == 29
    assert out["exception"].startswith("Traceback") and "ValueError: disk gone" in out["exception"]
    assert out["request"] == {"api": "Produce", "error_code": 0}
    assert out["odd"].startswith("<object object")
    assert "args" not in out and "msg" not in out


def test_startup_records_come_out_in_the_chosen_format(root_handlers: None) -> None:
    early = buffer_startup_logs()
    logging.getLogger("pybroker.config").warning("unknown key %s", "typo")
    stream = io.StringIO()
    assert stream.getvalue() == ""
    configure_logging("json", stream=stream, early=early)
    logging.getLogger("pybroker").info("listening on %s", "127.0.0.1:9092")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(r["logger"], r["message"]) for r in lines] == [
        ("pybroker.config", "unknown key typo"), ("pybroker", "listening on 127.0.0.1:9092")]
    # Configured again (text), the JSON handler is replaced, not doubled.
    text = io.StringIO()
    configure_logging("text", stream=text)
    logging.getLogger("pybroker").info("again")
    assert text.getvalue().endswith("INFO again (pybroker)\n")
    assert len(stream.getvalue().splitlines()) == 2


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError):
        formatter_for("xml")
