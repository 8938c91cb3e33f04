"""Fixtures of the cluster tests: a real ZooKeeper server (pybroker/testing/zookeeper.py),
started through bin/zookeeper-server-start.sh, the way a person starts one."""
from __future__ import annotations

from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from pybroker.testing.zookeeper import ZooKeeperNotInstalled, ZooKeeperProcess, run_zookeeper
from tests.helpers import ROOT

START_SCRIPT = ROOT / "bin" / "zookeeper-server-start.sh"


@contextmanager
def _zookeeper_or_skip(work_dir: Path) -> Iterator[ZooKeeperProcess]:
    with ExitStack() as stack:
        try:
            server = stack.enter_context(run_zookeeper(work_dir, command=[START_SCRIPT]))
        except ZooKeeperNotInstalled as exc:
            pytest.skip(f"{exc} (bin/test installs it)")
        yield server


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[ZooKeeperProcess]:
    """A ZooKeeper server of the test's own (a test may stop, kill or restart it), killed at
    teardown. Skipped where ZooKeeper is not installed; bin/test installs it, so CI runs these."""
    with _zookeeper_or_skip(tmp_path / "zookeeper") as server:
        yield server


@pytest.fixture(scope="module")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    """One ZooKeeper server for a module whose tests share a cluster (and never stop it)."""
    with _zookeeper_or_skip(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server
