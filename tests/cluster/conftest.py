"""Fixtures of the cluster tests: a real ZooKeeper server (pybroker/testing/zookeeper.py),
started through bin/zookeeper-server-start.sh, the way a person starts one.

One server serves the whole session (each pytest-xdist worker its own), and each test, or
each module that shares a cluster, gets a chroot of its own on it (`host:port/c3-test_name`,
Kafka's zookeeper.connect form), so no test sees another's znodes while the ~1-3 s JVM start
is paid once. A test that stops, kills or restarts ZooKeeper, or needs its root, takes a
server of its own (`own_zookeeper`, `own_zk_server`)."""
from __future__ import annotations

import itertools
import re
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Iterator

import pytest

from pybroker.testing.network import ZOOKEEPER, Network, leftovers, why_not
from pybroker.testing.zookeeper import ZooKeeperNotInstalled, ZooKeeperProcess, run_zookeeper
from tests.helpers import ROOT

START_SCRIPT = ROOT / "bin" / "zookeeper-server-start.sh"
_chroots = itertools.count(1)


@contextmanager
def _zookeeper_or_skip(work_dir: Path, **where: Any) -> Iterator[ZooKeeperProcess]:
    with ExitStack() as stack:
        try:
            server = stack.enter_context(run_zookeeper(work_dir, command=[START_SCRIPT],
                                                       **where))
        except ZooKeeperNotInstalled as exc:
            pytest.skip(f"{exc} (bin/test installs it)")
        yield server


@dataclass(frozen=True)
class ZooKeeperChroot:
    """A chroot of the session's server: `connect` is what brokers and kazoo take."""
    server: ZooKeeperProcess
    chroot: str

    @property
    def connect(self) -> str:
        return self.server.connect + self.chroot


def _chroot_for(server: ZooKeeperProcess, name: str) -> ZooKeeperChroot:
    """A fresh chroot (numbered, so a parametrized test's cases differ; named for the
    reader of a znode dump). The brokers create it, as Kafka's do."""
    readable = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:60]
    return ZooKeeperChroot(server, f"/c{next(_chroots)}-{readable}")


@pytest.fixture(scope="session")
def shared_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    """The session's ZooKeeper server. Skipped where ZooKeeper is not installed; bin/test
    installs it, so CI runs these."""
    with _zookeeper_or_skip(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@pytest.fixture
def zookeeper(shared_zookeeper: ZooKeeperProcess,
              request: pytest.FixtureRequest) -> ZooKeeperChroot:
    """A chroot of the test's own on the session's server."""
    return _chroot_for(shared_zookeeper, request.node.name)


@pytest.fixture(scope="module")
def zk_server(shared_zookeeper: ZooKeeperProcess,
              request: pytest.FixtureRequest) -> ZooKeeperChroot:
    """A chroot for a module whose tests share a cluster."""
    return _chroot_for(shared_zookeeper, request.module.__name__.rpartition(".")[2])


@pytest.fixture
def own_zookeeper(tmp_path: Path) -> Iterator[ZooKeeperProcess]:
    """A ZooKeeper server of the test's own (a test may stop, kill or restart it), killed at
    teardown."""
    with _zookeeper_or_skip(tmp_path / "zookeeper") as server:
        yield server


@pytest.fixture(scope="module")
def own_zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    """A ZooKeeper server for a module whose tests share a cluster and need the server's root
    to themselves (and never stop it)."""
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
