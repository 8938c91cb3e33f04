"""Running real brokers for integration tests: `pybroker.testing`'s, re-exported, and the
repository's root."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pybroker.testing import BrokerProcess, broker_config, broker_in_thread

__all__ = ["ROOT", "BrokerProcess", "broker_config", "broker_in_thread"]

ROOT = Path(__file__).resolve().parents[1]


def venv_not_ready() -> str | None:
    """Why bin/ scripts would install a virtual environment before running (so a test that
    runs them without a network, or timed, cannot), or None when they run at once. bin/test
    installs it with the test extras first, so under bin/test this is None."""
    import os
    venv = Path(os.environ.get("PYBROKER_VENV", ROOT / ".venv"))
    stamps = [s for s in (venv / ".installed-test", venv / ".installed") if s.exists()]
    if not (venv / "bin" / "python").exists() or not stamps:
        return f"bin/_bootstrap would create {venv} first (no {venv / '.installed'})"
    # As bin/_bootstrap: a plain command is served by either stamp that is newer than
    # pyproject.toml (an install with the test extras serves the plain commands too).
    built = (ROOT / "pyproject.toml").stat().st_mtime
    if all(built > s.stat().st_mtime for s in stamps):
        return "bin/_bootstrap would reinstall: pyproject.toml is newer than the venv stamp"
    return None


@dataclass
class Result:
    """What a command-line tool's main() did: its exit code and captured output."""

    rc: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()
