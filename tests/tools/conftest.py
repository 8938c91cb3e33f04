"""Fixtures for the tool tests: one broker per module, and a way to run a tool's main().

Tools are run in-process (`main(argv)` with captured stdout/stderr and a fake stdin), which
keeps the suite fast; a few tests also go through the bin/ shims in a subprocess. Each test
uses its own topic and group names, so sharing the module's broker is safe.
"""
from __future__ import annotations

import io
import itertools
import sys
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import pytest

from tests.helpers import broker_in_thread

_names = itertools.count()


@dataclass
class Result:
    rc: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """A broker without topic auto-creation, so that unknown topics stay unknown."""
    with broker_in_thread(tmp_path_factory.mktemp("logs"),
                          auto_create_topics_enable="false") as info:
        yield info


@pytest.fixture
def bootstrap(kafka) -> str:  # type: ignore[no-untyped-def]
    return kafka.bootstrap


@pytest.fixture
def name() -> Callable[[str], str]:
    """Unique topic or group names: name("orders") -> "orders-7"."""
    return lambda prefix="t": f"{prefix}-{next(_names)}"


@pytest.fixture
def tool(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
         ) -> Callable[..., Result]:
    """tool(main, *argv, stdin=b"...") -> Result(rc, out, err)."""
    def call(main: Callable[[Sequence[str]], int], *argv: str,
             stdin: bytes | None = None) -> Result:
        capsys.readouterr()
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        rc = main(list(argv))
        captured = capsys.readouterr()
        return Result(rc, captured.out, captured.err)
    return call
