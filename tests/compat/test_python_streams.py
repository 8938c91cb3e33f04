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
from pathlib import Path
from typing import Iterator

import pytest

from pybroker.testing import Broker
from tests.compat.eco_helpers import produce, topic_config, topic_names
from tests.python_envs import quixstreams_dir

HERE = Path(__file__).resolve().parent

FIRST = ["a", "b", "a", "c", "a", "b"]
SECOND = ["a", "c", "c", "d"]


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(num_partitions=1, group_initial_rebalance_delay_ms=0,
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
