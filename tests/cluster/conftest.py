"""Fixtures of the cluster tests: a real ZooKeeper server (pybroker/testing/zookeeper.py),
started through bin/zookeeper-server-start.sh, the way a person starts one."""
from __future__ import annotations

from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from typing import Any, Iterator

import pytest

from pybroker.testing.network import ZOOKEEPER, Network, leftovers, why_not
from pybroker.testing.zookeeper import ZooKeeperNotInstalled, ZooKeeperProcess, run_zookeeper
from tests.helpers import ROOT

START_SCRIPT = ROOT / "bin" / "zookeeper-server-start.sh"


@contextmanager
def _zookeeper_or_skip(work_dir: Path, **where: Any) -> Iterator[ZooKeeperProcess]:
    with ExitStack() as stack:
        try:
            server = stack.enter_context(run_zookeeper(work_dir, command=[START_SCRIPT],
                                                       **where))
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


@pytest.fixture
def network() -> Iterator[Network]:
    """A private network for ZooKeeper and brokers 1-3 (pybroker/testing/network.py), so the
    test can partition them; skipped without root or iproute2. Teardown checks that nothing
    of it is left."""
    problem = why_not()
    if problem is not None:
        pytest.skip(problem)
    with Network([ZOOKEEPER, 1, 2, 3]) as net:
        yield net
    assert not leftovers(net.tag), f"the test network left {leftovers(net.tag)}"


@pytest.fixture
def zookeeper_on_network(tmp_path: Path, network: Network) -> Iterator[ZooKeeperProcess]:
    """A ZooKeeper server of the test's own in `network`'s ZOOKEEPER namespace."""
    with _zookeeper_or_skip(tmp_path / "zookeeper", host=network.address(ZOOKEEPER),
                            wrap=partial(network.command, ZOOKEEPER)) as server:
        yield server
