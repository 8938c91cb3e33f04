"""Fixtures of the cluster tests: a real ZooKeeper server (tests/cluster/zookeeper.py)."""
from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Iterator

import pytest

from tests.cluster.zookeeper import ZooKeeperNotInstalled, ZooKeeperProcess, run_zookeeper


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[ZooKeeperProcess]:
    """A ZooKeeper server of the test's own (a test may stop, kill or restart it), killed at
    teardown. Skipped where ZooKeeper is not installed; bin/test installs it, so CI runs these."""
    with ExitStack() as stack:
        try:
            server = stack.enter_context(run_zookeeper(tmp_path / "zookeeper"))
        except ZooKeeperNotInstalled as exc:
            pytest.skip(f"{exc} (bin/test installs it)")
        yield server
