"""The broker process keeps large buffers in the heap (pybroker.runtime.malloc_tuning.tune_malloc, applied by pybroker.__main__)."""
from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from tests.helpers import ROOT


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                    reason="mallopt is glibc's")
def test_tune_malloc_applies_unless_the_environment_says() -> None:
    code = "from pybroker.runtime.malloc_tuning import tune_malloc; print(tune_malloc())"
    run = lambda env: subprocess.run(  # noqa: E731
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
        check=True).stdout.strip()
    assert run({"PYTHONPATH": str(ROOT)}) == "True"
    assert run({"PYTHONPATH": str(ROOT), "MALLOC_MMAP_THRESHOLD_": "131072"}) == "False"
