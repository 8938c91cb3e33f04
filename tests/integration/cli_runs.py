"""`python -m pybroker` run as an operator runs it, for the command-line tests
(tests/integration/test_cli.py) and the log-dir lock's: the environment it needs, its log
lines' shape, and a refused start's one-line reason."""
from __future__ import annotations

import os
import re
import subprocess

from tests.helpers import ROOT

LOG_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] (DEBUG|INFO|WARNING|ERROR|CRITICAL) ")


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def _run_failing(args: list[str]) -> subprocess.CompletedProcess:
    result = subprocess.run(args, capture_output=True, text=True, env=_env(), cwd=ROOT,
                            timeout=30)
    assert result.returncode != 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    # Log lines (timestamped) may precede it; the reason itself is one line, the last.
    lines = [ln for ln in result.stderr.splitlines() if ln.strip() and not LOG_LINE.match(ln)]
    assert len(lines) == 1, f"expected a one-line reason, got:\n{result.stderr}"
    assert result.stderr.rstrip().splitlines()[-1] == lines[0]
    return result
