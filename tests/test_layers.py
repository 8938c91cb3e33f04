"""The import structure of ../shared/DESIGN.md, as declared in pyproject.toml's import-linter
contracts: protocol is sans-I/O, storage and the group state machine never import trio or the
layers above them, the broker's layers point down only, and no sibling modules import each
other in a circle."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT


def test_import_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(lint_imports), "--no-cache"], capture_output=True, text=True,
                            cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout, result.stdout
