"""Fixtures shared by the integration tests: a real broker on an ephemeral port."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.helpers import broker_in_thread


@pytest.fixture
def broker(tmp_path: Path) -> Iterator:
    """A broker in a background thread; `broker.bootstrap` is its host:port."""
    with broker_in_thread(tmp_path / "logs") as info:
        yield info
