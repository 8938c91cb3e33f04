"""Fixtures shared by the integration tests: a real broker on an ephemeral port."""
from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pytest

# Hypothesis loads third-party plugins by entry point, trio's among them; the protocol tests
# must run with trio absent, so none are loaded (the suite needs none).
os.environ.setdefault("HYPOTHESIS_NO_PLUGINS", "1")


@pytest.fixture
def broker(tmp_path: Path) -> Iterator:
    """A broker in a background thread; `broker.bootstrap` is its host:port."""
    # Imported here so the protocol tests can run with trio absent (they must not need it).
    from tests.helpers import broker_in_thread

    with broker_in_thread(tmp_path / "logs") as info:
        yield info


_PERF_SUMMARY = pytest.StashKey[list]()


@pytest.fixture
def perf_summary(request: pytest.FixtureRequest) -> list[str]:
    """Lines a test wants printed in the terminal summary, even under output capture."""
    return request.config.stash.setdefault(_PERF_SUMMARY, [])


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # type: ignore[no-untyped-def]
    lines = config.stash.get(_PERF_SUMMARY, None)
    if lines:
        terminalreporter.section("performance figures")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture
def tool(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
         ) -> Callable[..., Any]:
    """tool(main, *argv, stdin=b"...") -> Result(rc, out, err): a tool run in-process."""
    from tests.helpers import Result

    def call(main: Callable[[Sequence[str]], int], *argv: str,
             stdin: bytes | None = None) -> Result:
        capsys.readouterr()
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        rc = main(list(argv))
        captured = capsys.readouterr()
        return Result(rc, captured.out, captured.err)
    return call
