"""The import structure of docs/DESIGN.md, as declared in pyproject.toml's import-linter
contracts: protocol is sans-I/O, storage and the group state machine never import trio or the
layers above them, the broker's wings point down only, and no sibling modules import each
other in a circle. lint-imports sees only what it can import; the tests below read the
filesystem, so a module lint-imports would miss (a folder without `__init__.py`) is caught too."""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.helpers import ROOT

PACKAGE = ROOT / "pybroker"
# The package root is a table of contents: the composition root and nothing else.
ROOT_MODULES = {"__init__", "__main__", "server", "broker"}


def test_import_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(lint_imports), "--no-cache"], capture_output=True, text=True,
                            cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout, result.stdout


def _children(package: Path) -> set[str]:
    """What Python could import under `package`: its modules and every folder holding Python
    files, with or without an `__init__.py` (a namespace package imports too)."""
    names = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    names |= {p.name for p in package.iterdir()
              if p.is_dir() and p.name != "__pycache__" and any(p.rglob("*.py"))}
    return names


def _exhaustive_layers(container: str) -> set[str]:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text()
                              )["tool"]["importlinter"]["contracts"]
    [contract] = [c for c in contracts if c["type"] == "layers"
                  and c.get("containers") == [container] and c.get("exhaustive")]
    return {name for layer in contract["layers"]
            for name in re.split(r"\s*[|:]\s*", layer.strip())}


def test_every_child_of_pybroker_has_a_layer() -> None:
    children, named = _children(PACKAGE), _exhaustive_layers("pybroker")
    assert children - named == set(), "not in the exhaustive layers contract (pyproject.toml)"
    assert named - children == set(), "named in the layers contract, but not in pybroker/"


def test_the_package_root_holds_only_the_composition_root() -> None:
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert modules == ROOT_MODULES, "a module at the root belongs in one of the wings"
