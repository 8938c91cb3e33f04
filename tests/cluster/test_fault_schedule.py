"""The short version of the randomized fault schedule (tests/cluster/fault_schedule.py runs
the long one as a script): twelve kinds of fault once each, in a shuffled order, under load,
then the Jepsen-style check. It runs in a private network (tests/cluster/conftest.py's
`network`) for the partitions, and on small ext4 disks for the disk faults.

Twelve rounds, not all sixteen kinds, to stay within the cluster tier's time: the four left
out wait out a ZooKeeper session or the replica lag time, and each has its own test
(test_failover.py: a leader paused past its session, a paused follower; test_partitions.py:
an isolated leader, an isolated follower). The script draws from all of them."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

from pybroker.testing.disk_faults import DiskFaults, available
from tests.cluster.fault_schedule import DISK_FAULTS, FAULTS, run

SHORT = DISK_FAULTS + ("kill-leader", "kill-controller", "kill-any", "term-leader",
                       "restart-zookeeper", "zk-cut-leader", "zk-cut-controller",
                       "cut-leader-follower")
assert set(SHORT) <= set(FAULTS)


def test_every_fault_once_loses_nothing(tmp_path: Path, network,  # type: ignore[no-untyped-def]
                                        zookeeper_on_network) -> None:
    why = available("ext4")
    if why:
        pytest.skip(why)
    out = io.StringIO()
    with DiskFaults() as disks:
        try:
            summary = run(tmp_path, zookeeper_on_network, rounds=len(SHORT), seed=11,
                          faults=SHORT, out=out, network=network, disks=disks)
        except AssertionError as exc:  # with the rounds so far
            raise AssertionError(f"{out.getvalue()}{exc}") from None
    assert summary["faults"] == dict.fromkeys(SHORT, 1), out.getvalue()
    assert not summary["problems"], out.getvalue()
    assert summary["replicas_identical"], out.getvalue()
    assert summary["acknowledged"] >= 300, out.getvalue()
