"""The compatibility matrix as a regression test (issue #5).

Reruns every cell of the committed `compat/matrix.json` (one broker, the cells in worker
processes, four at a time: about half a minute) and fails for each cell that the committed
matrix marks PASS and that does not pass now. Cells committed as N/A or FAIL are run but not
judged: a FAIL that starts passing, or a newly expressible N/A, is for `python -m compat.run
--write` to record. Another test keeps `compat/MATRIX.md` the rendering of `matrix.json`.
The ecosystem rows are not rerun here: their tests are in the run already (tests/compat,
tests/reference); here only the rows' names and the rendering are checked.
"""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

from compat import ecosystem
from compat.clients import all_adapters
from compat.run import MATRIX_MD, load_committed, render_markdown, run_matrix
from compat.all_scenarios import SCENARIOS


COMMITTED = load_committed()
PASSING = [] if COMMITTED is None else [
    (client, scenario) for client, row in COMMITTED["results"].items()
    for scenario, result in row.items() if result["status"] == "PASS"]


@pytest.fixture(scope="module")
def current() -> dict[str, Any]:
    """The matrix now, for every client and scenario of the committed one that still exists."""
    if COMMITTED is None:
        pytest.skip("no compat/matrix.json: run `python -m compat.run --write` first")
    clients = [c for c in COMMITTED["results"] if c in all_adapters()]
    scenarios = [s for s in COMMITTED["scenarios"] if s in SCENARIOS]
    return run_matrix(clients, scenarios, jobs=4)


def _versions(matrix: dict[str, Any], client: str) -> str:
    versions = matrix.get("clients", {}).get(client, {}).get("versions", {})
    return ", ".join(f"{k} {v}" for k, v in versions.items()) or "?"


@pytest.mark.parametrize("client,scenario", PASSING, ids=[f"{c}:{s}" for c, s in PASSING])
def test_cell_still_passes(current: dict[str, Any], client: str, scenario: str) -> None:
    now = current["results"].get(client, {}).get(scenario)
    assert now is not None, f"{client} × {scenario} passed in compat/matrix.json but is no " \
        "longer run (its adapter or scenario is gone)"
    assert COMMITTED is not None
    assert now["status"] == "PASS", (
        f"{client} × {scenario} regressed: {now['status']}: {now.get('reason')} "
        f"(committed PASS with {_versions(COMMITTED, client)}; now {_versions(current, client)})")


def test_matrix_md_is_rendered_from_matrix_json() -> None:
    if COMMITTED is None:
        pytest.skip("no compat/matrix.json")
    assert MATRIX_MD.read_text() == render_markdown(COMMITTED), \
        "compat/MATRIX.md and compat/matrix.json disagree: rerun `python -m compat.run --write`"


# -- the ecosystem rows: their suites run once, as tests of their own modules; here only
# what the rows say about them is checked (nothing is run twice).

@pytest.mark.parametrize("name", list(ecosystem.ROWS))
def test_ecosystem_row_names_tests_that_exist(name: str) -> None:
    """A renamed or removed test would leave its row never run ("not run" FAIL at the next
    `--write`): caught here instead, without running it."""
    row = ecosystem.ROWS[name]
    module = importlib.import_module(row.module)
    for test in row.tests:
        assert callable(getattr(module, test, None)), f"{row.module} has no {test}"
    assert row.tests or any(n.startswith("test_") for n in vars(module))


def test_committed_ecosystem_rows_are_the_current_rows() -> None:
    if COMMITTED is None:
        pytest.skip("no compat/matrix.json")
    assert list(COMMITTED.get("ecosystem", {})) == list(ecosystem.ROWS), \
        "compat/matrix.json's ecosystem rows are not compat/ecosystem.py's: rerun " \
        "`python -m compat.run --write --only-ecosystem`"


def test_ecosystem_row_judged_from_a_junit_report(tmp_path: Path) -> None:
    """A row passes only when each of its tests ran and passed; a failure's first line, a
    skip, or a test missing from the report makes it FAIL."""
    report = tmp_path / "report.xml"
    report.write_text(
        '<testsuites><testsuite>'
        '<testcase classname="tests.compat.test_connect" '
        'name="test_standalone_file_source_to_file_sink" time="12.5"/>'
        '<testcase classname="tests.compat.test_connect" '
        'name="test_distributed_worker_rest_connector_and_restart" time="30">'
        '<failure message="AssertionError: lines has [one]&#10;more">trace</failure></testcase>'
        '<testcase classname="tests.compat.test_python_streams" '
        'name="test_faust_table_recovers_from_its_changelog" time="3">'
        '<skipped message="no faust"/></testcase>'
        '</testsuite></testsuites>')
    outcomes = ecosystem.parse_junit(report)
    rows = ecosystem.ROWS
    assert ecosystem.judge(rows["connect-standalone"], outcomes, "") == {
        "status": "PASS", "reason": None, "seconds": 12.5, "tests": 1}
    failed = ecosystem.judge(rows["connect-distributed"], outcomes, "")
    assert failed["status"] == "FAIL"
    assert failed["reason"] == "test_distributed_worker_rest_connector_and_restart: failed: " \
        "AssertionError: lines has [one]"
    assert ecosystem.judge(rows["faust-table"], outcomes, "")["status"] == "FAIL"
    missing = ecosystem.judge(rows["quix-streams"], outcomes, "1 passed\n")
    assert missing["status"] == "FAIL" and missing["reason"].startswith("not run (")
