"""Every skipped test says why in the run's summary (issue #18).

A run that reports "3 skipped" and nothing else leaves a reader guessing whether a suite that
matters (the spec-conformance suite when ../shared/reference/ is absent, the shims before the
venv exists) ran. pytest prints a skip's reason with `-rs`, which the project's addopts carry;
this test holds every skip in tests/ to having a reason to print.
"""
from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from tests.helpers import ROOT

TESTS = ROOT / "tests"


def _dotted(node: ast.AST) -> str:
    """`pytest.mark.skipif` for the attribute chain of a call or decorator, else ''."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _skips_without_reason(path: Path) -> list[str]:
    """`file:line what` for each skip in `path` that gives pytest no reason to print."""
    tree = ast.parse(path.read_text(), str(path))
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            keywords = {k.arg for k in node.keywords}
            if name == "pytest.skip" and not node.args and "reason" not in keywords:
                found.append(f"{where}:{node.lineno} pytest.skip()")
            if name == "pytest.mark.skipif" and "reason" not in keywords:
                found.append(f"{where}:{node.lineno} skipif without reason=")
            if name == "pytest.importorskip" and "reason" not in keywords:
                found.append(f"{where}:{node.lineno} importorskip")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for deco in node.decorator_list:
                if _dotted(deco) == "pytest.mark.skip":  # bare decorator: no reason possible
                    found.append(f"{where}:{deco.lineno} bare pytest.mark.skip")
    return found


def test_every_skip_in_the_suite_has_a_reason() -> None:
    missing = [m for path in sorted(TESTS.rglob("*.py")) for m in _skips_without_reason(path)]
    assert missing == []


def test_the_run_prints_skip_reasons() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    addopts = config["tool"]["pytest"]["ini_options"]["addopts"].split()
    assert "-rs" in addopts


def test_the_check_finds_a_skip_without_reason(tmp_path: Path) -> None:
    sample = tmp_path / "test_sample.py"
    sample.write_text("import pytest\n\n"
                      "@pytest.mark.skip\ndef test_a(): pass\n\n"
                      "@pytest.mark.skipif(True)\ndef test_b(): pytest.skip()\n\n"
                      "def test_c(): pytest.skip('has one')\n")
    found = sorted(f.split(" ", 1)[1] for f in _skips_without_reason(sample))
    assert found == ["bare pytest.mark.skip", "pytest.skip()", "skipif without reason="]
