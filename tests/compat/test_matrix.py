"""The compatibility matrix as a regression test (issue #5).

Reruns every cell of the committed `compat/matrix.json` (one broker, the cells in worker
processes, four at a time: about half a minute) and fails for each cell that the committed
matrix marks PASS and that does not pass now. Cells committed as N/A or FAIL are run but not
judged: a FAIL that starts passing, or a newly expressible N/A, is for `python -m compat.run
--write` to record. Another test keeps `compat/MATRIX.md` the rendering of `matrix.json`.
"""
from __future__ import annotations

from typing import Any

import pytest

from compat.clients import all_adapters
from compat.run import MATRIX_MD, load_committed, render_markdown, run_matrix
from compat.scenarios import SCENARIOS


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
