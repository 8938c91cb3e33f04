"""No test file is a library of others: what two test files share lives in a module that is
not a test file (tests/cluster/brokers.py, tests/integration/raw.py, tests/integration/
txn_clients.py, ...), which mypy checks (pyproject.toml's [tool.mypy] leaves test_*.py out).

A name taken from a test_*.py module is read by mypy for its type and never checked itself
(docs/CONTRIBUTING.md, Types); a fixture two packages' files share belongs in their
conftest.py, where pytest finds it without an import.
"""
from __future__ import annotations

import ast

from tests.helpers import ROOT

# (importer, test module) pairs that stay, each with its reason. Empty is the goal.
ALLOWED: dict[tuple[str, str], str] = {}


def _is_test_module(module: str) -> bool:
    return module.split(".")[0] == "tests" and module.split(".")[-1].startswith("test_")


def imports_of_test_modules(source: str) -> list[str]:
    """The test_*.py modules under tests/ that `source` imports from, at any depth."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if _is_test_module(node.module):
                found.append(node.module)
            else:
                found += [f"{node.module}.{a.name}" for a in node.names
                          if _is_test_module(f"{node.module}.{a.name}")]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if _is_test_module(a.name)]
    return found


def test_the_scan_finds_each_form_of_import() -> None:
    source = """
from tests.cluster.test_failover import create_topic
import tests.integration.test_acls
from tests.integration import test_tls
def f():
    from tests.test_quickstart import quickstart_steps
from tests.cluster.brokers import running_cluster
from tests.integration.raw import create_topic
from pybroker.test_thing import x
"""
    assert imports_of_test_modules(source) == [
        "tests.cluster.test_failover", "tests.integration.test_acls",
        "tests.integration.test_tls", "tests.test_quickstart"]


def test_no_file_imports_from_a_test_file() -> None:
    found = {}
    for path in sorted([*ROOT.glob("tests/**/*.py"), *ROOT.glob("compat/**/*.py")]):
        importer = str(path.relative_to(ROOT))
        for module in imports_of_test_modules(path.read_text()):
            if (importer, module) not in ALLOWED:
                found.setdefault(importer, []).append(module)
    assert not found, (
        "move what these take from test files into a shared module beside them "
        f"(docs/CONTRIBUTING.md, Types): {found}")
    stale = [pair for pair in ALLOWED
             if pair[1] not in imports_of_test_modules((ROOT / pair[0]).read_text())]
    assert not stale, f"ALLOWED rows no longer needed: {stale}"
