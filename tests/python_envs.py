"""Python packages that cannot be test extras, installed apart into the user's cache: Quix
Streams caps confluent-kafka (3.28.1: `<2.13`) below the test extras' pin (2.16.1), so a test
that runs it puts what `pip install quixstreams==…` brings first on a subprocess's path, as a
Quix project would have it."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

QUIXSTREAMS = "quixstreams==3.28.1"
# Read at import: pytester points HOME at its temporary directory while a test runs.
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pybroker-tests"


def pip_target(requirement: str) -> Path:
    """What `pip install <requirement>` brings, installed once into the cache directory
    (a directory to put first on PYTHONPATH). Installed beside its final name and renamed, so
    a run never sees half an install; fails, saying so, without the package registry."""
    final = CACHE / requirement
    if final.is_dir():
        return final
    CACHE.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=requirement + ".", dir=CACHE))
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                          "--disable-pip-version-check", "--target", str(staging), requirement],
                         capture_output=True, text=True, timeout=300)
    if pip.returncode != 0:
        shutil.rmtree(staging)
        raise AssertionError(f"pip install {requirement}:\n{pip.stdout[-2000:]}{pip.stderr}")
    try:
        staging.rename(final)
    except OSError:                                     # another run got there first
        shutil.rmtree(staging)
    return final


def quixstreams_dir() -> Path:
    """Quix Streams with its own confluent-kafka (2.12.2) among ~90 packages: ~15 s of pip
    the first time, none after."""
    return pip_target(QUIXSTREAMS)
