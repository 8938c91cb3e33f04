"""Python stream processors keep state on pybroker and recover it after a restart (issue #14):
a Quix Streams application and a faust-streaming agent, each counting records per key in a
store backed by a changelog topic it creates itself. Each runs unmodified in a subprocess,
twice: the second time after its local state directory was deleted, so the counts it
continues from can only have come back from the changelog on pybroker."""
from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from pybroker.testing import Broker
from tests.compat.eco_helpers import (committed_and_end_offsets, consume_until, produce,
                                      topic_config, topic_names)
from tests.python_envs import pip_target, quixstreams_dir

HERE = Path(__file__).resolve().parent

FIRST = ["a", "b", "a", "c", "a", "b"]
SECOND = ["a", "c", "c", "d"]


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    # A process, so that the suite's PYBROKER_NUM_CORES=2 runs this against a node of two
    # brokers, as the default of all cores will (issue #29 item 3); one broker otherwise.
    with Broker(process=True, num_partitions=1, group_initial_rebalance_delay_ms=0,
                offsets_topic_num_partitions=3, transaction_state_log_num_partitions=3) as b:
        yield b


def running_counts(keys: list[str], start: dict[str, int] | None = None
                   ) -> list[tuple[str, int]]:
    """What a per-key counter outputs for `keys`, in order, continuing from `start`."""
    seen = collections.Counter(start or {})
    out = []
    for key in keys:
        seen[key] += 1
        out.append((key, seen[key]))
    return out


def by_key(pairs: list[tuple[str, int]]) -> dict[str, list[int]]:
    """Counts per key in order: partitions interleave, a key's own order is kept."""
    grouped: dict[str, list[int]] = collections.defaultdict(list)
    for key, value in pairs:
        grouped[key].append(value)
    return dict(grouped)


def run_quix(broker: Broker, source: str, state_dir: Path, expected: int) -> list[tuple[str, int]]:
    env = dict(os.environ, PYTHONPATH=str(quixstreams_dir()))
    app = subprocess.run([sys.executable, str(HERE / "quix_counter_app.py"), broker.bootstrap,
                          source, f"{source}-counts", str(state_dir), str(expected)],
                         env=env, capture_output=True, text=True, timeout=120)
    assert app.returncode == 0, app.stderr[-4000:]
    return [(key, value) for key, value in json.loads(app.stdout.splitlines()[-1])]


def test_quix_streams_count_recovers_from_its_changelog(broker: Broker, tmp_path: Path) -> None:
    source = "quix-words"
    broker.create_topic(source, partitions=2)
    state_dir = tmp_path / "state"
    produce(broker.bootstrap, source, FIRST, keys=FIRST)
    first = run_quix(broker, source, state_dir, len(FIRST))
    assert by_key(first) == by_key(running_counts(FIRST))

    changelogs = {t for t in topic_names(broker.bootstrap)
                  if t.startswith("changelog__quix-counter--") and source in t}
    assert len(changelogs) == 1, topic_names(broker.bootstrap)
    assert topic_config(broker.bootstrap, changelogs.pop())["cleanup.policy"] == "compact"
    assert any(state_dir.rglob("*")), "Quix kept no local state"

    shutil.rmtree(state_dir)
    produce(broker.bootstrap, source, SECOND, keys=SECOND)
    second = run_quix(broker, source, state_dir, len(SECOND))
    assert by_key(second) == by_key(running_counts(SECOND, collections.Counter(FIRST)))


# faust's RocksDB store through its `rocksdict` extra (faust-streaming[rocksdict]); the test
# extras keep faust without it, so the worker gets it on its path the way Quix does.
ROCKSDICT = "rocksdict==0.3.29"


class FaustWorker:
    """`python faust_counter_app.py worker` in a subprocess, its output in a log file."""

    def __init__(self, broker: Broker, source: str, datadir: Path, log: Path) -> None:
        env = dict(os.environ, COUNTER_BOOTSTRAP=broker.bootstrap, COUNTER_SOURCE=source,
                   COUNTER_DATADIR=str(datadir),
                   PYTHONPATH=os.pathsep.join([str(pip_target(ROCKSDICT)), str(HERE)]))
        self.log = log
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                # --without-web: the `worker` command turns faust's web server on whatever
                # the app's web_enabled says, on port 6066, which another faust worker on the
                # machine may hold (a run failed so: "address already in use").
                [sys.executable, str(HERE / "faust_counter_app.py"), "worker", "-l", "info",
                 "--without-web"],
                env=env, stdout=out, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 90) -> None:
        """Until faust logs its worker Ready: recovery is over and the source partitions are
        seeked to their committed offsets (Recovery.on_recovery_completed)."""
        deadline = time.monotonic() + timeout
        while "[^Worker]: Ready" not in self.log.read_text(errors="replace"):
            assert self.process.poll() is None, f"faust exited:\n{self.tail()}"
            assert time.monotonic() < deadline, f"faust not Ready in {timeout} s:\n{self.tail()}"
            time.sleep(0.1)

    def stop(self) -> None:
        """SIGTERM, as a supervisor stops it: faust commits its offsets and leaves."""
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"faust did not stop on SIGTERM:\n{self.tail()}")

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


def faust_counts(broker: Broker, source: str, want: int, worker: FaustWorker
                 ) -> list[tuple[str, int]]:
    records = consume_until(broker.bootstrap, f"{source}-counts",
                            lambda got: len(got) >= want, timeout=90, partitions=2)
    # In full, not pytest's shortened repr, with every worker's log of this test (the
    # first worker's too): a run that got 9 of 10 left no more than a tail to read.
    logs = "".join(f"--- {log.name}:\n" + log.read_text(errors="replace")
                   for log in sorted(worker.log.parent.glob("worker-*.log")))
    assert len(records) >= want, f"{len(records)} of {want} counts: {records}\n{logs}"
    return [(key.decode(), json.loads(value)) for key, value in records]


def test_faust_table_recovers_from_its_changelog(broker: Broker, tmp_path: Path) -> None:
    source = "faust-words"
    broker.create_topic(source, partitions=2)
    broker.create_topic(f"{source}-counts", partitions=2)
    datadir = tmp_path / "data"
    produce(broker.bootstrap, source, FIRST, keys=FIRST)
    worker = FaustWorker(broker, source, datadir, tmp_path / "worker-1.log")
    try:
        first = faust_counts(broker, source, len(FIRST), worker)
    finally:
        worker.stop()
    assert by_key(first) == by_key(running_counts(FIRST))
    # On SIGTERM faust committed all it counted; partition 0 has no record (every key of FIRST
    # hashes to 1) and so no commit.
    offsets = committed_and_end_offsets(broker.bootstrap, "faust-counter", source, 2)
    assert all(committed == end if end else committed < 0
               for committed, end in offsets.values()), offsets
    changelog = "faust-counter-counts-changelog"
    assert changelog in topic_names(broker.bootstrap)
    assert topic_config(broker.bootstrap, changelog)["cleanup.policy"] == "compact"
    assert any(p.suffix == ".db" or p.name == "CURRENT" for p in datadir.rglob("*")), \
        "faust kept no RocksDB table under its data dir"

    shutil.rmtree(datadir)
    worker = FaustWorker(broker, source, datadir, tmp_path / "worker-2.log")
    try:
        # The second batch goes in once the worker has restored its table: faust 0.15.3 resumes
        # its source partitions while its fetcher runs and only then seeks them to their
        # committed offsets, and records it reads in between are lost (where the partition
        # has no committed offset, as partition 0 here: "d" went missing in 3 of 80 runs) or
        # counted twice, whatever the broker. A user's records that arrive during recovery meet
        # the same; what this test checks is that pybroker gave the table back.
        worker.wait_ready()
        produce(broker.bootstrap, source, SECOND, keys=SECOND)
        both = faust_counts(broker, source, len(FIRST) + len(SECOND), worker)
    finally:
        worker.stop()
    # A key's counts stay in order on its partition: the first run's, then the second's.
    assert by_key(both) == by_key(running_counts(FIRST)
                                  + running_counts(SECOND, collections.Counter(FIRST)))
