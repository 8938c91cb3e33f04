"""Fixtures for the tool tests: one broker per module, and a way to run a tool's main().

Tools are run in-process by the `tool` fixture (tests/conftest.py: `main(argv)` with captured
stdout/stderr and a fake stdin), which keeps the suite fast; a few tests also go through the bin/ shims in a subprocess. Each test
uses its own topic and group names, so sharing the module's broker is safe.
"""
from __future__ import annotations

import itertools
from typing import Callable, Iterator

import pytest

from pybroker.server import ServerInfo
from tests.helpers import broker_in_thread

_names = itertools.count()


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    """A broker without topic auto-creation, so that unknown topics stay unknown."""
    with broker_in_thread(tmp_path_factory.mktemp("logs"),
                          auto_create_topics_enable="false") as info:
        yield info


@pytest.fixture
def bootstrap(kafka: ServerInfo) -> str:
    return kafka.bootstrap


@pytest.fixture
def name() -> Callable[[str], str]:
    """Unique topic or group names: name("orders") -> "orders-7"."""
    def unique(prefix: str = "t") -> str:
        return f"{prefix}-{next(_names)}"
    return unique
