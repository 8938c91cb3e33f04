"""kill -9 of the import (pybroker/node/metadata_import.py) before each of its file-system
steps, in a real process, then a start that imports again: the same tree, every file kept,
nothing left over, whichever step the kill came before."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from pybroker.node.metadata_import import IMPORTING_DIR, KEPT_SUFFIX, METADATA_DIR, SOURCES, \
    import_single_broker
from pybroker.node.metadata_service import _DurableTree, _Journal
from tests.node.single_broker_dir import node_config, single_broker

# Runs the import in a process of its own and SIGKILLs that process just before its
# KILL_AT-th call of a file-system step (0: never); prints the number of steps taken.
IMPORT_AND_DIE = """
import os, signal, sys
from pathlib import Path
from pybroker.config import load_broker_config
from pybroker.node import metadata_import, metadata_service
log_dir, node, kill_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
config = load_broker_config(None, {"log.dirs": log_dir, "node.id": node, "num.cores": "2"})
steps = 0
def wrap(name):
    real = getattr(os, name)
    def step(*args, **kwargs):
        global steps
        steps += 1
        if steps == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)
    setattr(os, name, step)
for name in ("mkdir", "rename", "replace", "unlink", "rmdir", "fsync", "write", "truncate"):
    wrap(name)
metadata_import.import_single_broker(config)
print(steps)
"""


def run_import(log_dir: Path, kill_at: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", IMPORT_AND_DIE, str(log_dir), "7",
                           str(kill_at)], capture_output=True, text=True, timeout=120)


def tree_of(log_dir: Path) -> dict[str, tuple[bytes, int]]:
    tree = _DurableTree(_Journal(log_dir / METADATA_DIR))
    try:
        return tree.persistent()
    finally:
        tree.journal.close()


def test_a_kill_before_any_step_of_the_import_imports_cleanly_on_the_next_start(
        tmp_path: Path) -> None:
    template = tmp_path / "template"
    single_broker(template)
    clean = tmp_path / "clean"
    shutil.copytree(template, clean)
    done = run_import(clean, 0)
    assert done.returncode == 0, done.stderr
    steps = int(done.stdout)
    expected = tree_of(clean)
    assert "/brokers/topics/orders/partitions/2/state" in expected
    committed_but_not_kept = 0
    for kill_at in range(1, steps + 1):
        log_dir = tmp_path / f"killed-{kill_at}"
        shutil.copytree(template, log_dir)
        killed = run_import(log_dir, kill_at)
        assert killed.returncode == -9, (kill_at, killed.stdout, killed.stderr)
        if (log_dir / METADATA_DIR).exists() and (log_dir / SOURCES[0]).exists():
            committed_but_not_kept += 1  # the worst point: between the commit and step 3
        import_single_broker(node_config(log_dir))  # the next start
        assert tree_of(log_dir) == expected, kill_at
        assert not (log_dir / IMPORTING_DIR).exists(), kill_at
        for name in SOURCES:
            assert not (log_dir / name).exists(), (kill_at, name)
            assert (log_dir / (name + KEPT_SUFFIX)).read_bytes() == \
                (template / name).read_bytes(), (kill_at, name)
    assert committed_but_not_kept >= 1  # the kills reached the window between commit and keep
