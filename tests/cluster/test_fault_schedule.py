"""The short version of the randomized fault schedule (tests/cluster/fault_schedule.py runs
the long one as a script): every kind of fault once, under load, then the Jepsen-style check.
It runs in a private network (tests/cluster/conftest.py's `network`) for the partitions."""
from __future__ import annotations

import io
from pathlib import Path

from tests.cluster.fault_schedule import FAULTS, run


def test_every_fault_once_loses_nothing(tmp_path: Path, network,  # type: ignore[no-untyped-def]
                                        zookeeper_on_network) -> None:
    out = io.StringIO()
    summary = run(tmp_path, zookeeper_on_network, rounds=len(FAULTS), seed=11, faults=FAULTS,
                  out=out, network=network)
    assert not summary["problems"], out.getvalue()
    assert summary["replicas_identical"], out.getvalue()
    assert summary["acknowledged"] >= 300, out.getvalue()
