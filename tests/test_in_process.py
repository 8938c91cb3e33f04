"""The integration tests that hold their broker in this process (tests/in_process.py): each
says why, docs/TESTING.md lists them as the marks do, and a test without the mark sees its
broker over the wire only, at every core count."""
from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import in_process
from tests.helpers import ROOT, WireBroker, _node_listeners, broker_in_thread

INTEGRATION = ROOT / "tests" / "integration"
TABLE_START = "<!-- in_process: generated from the marks; tests/test_in_process.py -->"


def _reason(call: ast.expr) -> str | None:
    """The reason of a `pytest.mark.in_process("...")` expression, else None."""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and call.func.attr == in_process.MARK):
        return None
    (arg,) = call.args
    assert isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.strip()
    return arg.value


def marks() -> dict[str, tuple[str, list[str]]]:
    """file -> (how many of its tests: a count, or "all" for a module's pytestmark, and the
    reasons in the order they first appear)."""
    found: dict[str, tuple[str, list[str]]] = {}
    for path in sorted(INTEGRATION.glob("test_*.py")):
        tree = ast.parse(path.read_text())
        module = [r for node in tree.body if isinstance(node, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
                  if (r := _reason(node.value))]
        tests = [r for node in tree.body
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                 for r in map(_reason, node.decorator_list) if r]
        if module or tests:
            reasons = list(dict.fromkeys(module + tests))
            found[path.name] = ("all" if module else str(len(tests)), reasons)
    return found


def table() -> list[str]:
    """docs/TESTING.md's list of the in-process tests, as the marks say it."""
    rows = [TABLE_START, "", "| file | tests | why in this process |", "|---|---|---|"]
    for name, (count, reasons) in marks().items():
        rows.append(f"| {name} | {count} | {'; '.join(reasons)} |")
    return rows


def test_testing_md_lists_every_in_process_test_with_its_reason() -> None:
    text = (ROOT / "docs" / "TESTING.md").read_text().splitlines()
    start = text.index(TABLE_START)
    listed = text[start:start + len(table())]
    assert listed == table(), "docs/TESTING.md's list differs from the marks; it should be:\n" \
        + "\n".join(table())


def _item(tier: str | None, reason: str | None) -> SimpleNamespace:
    marks = {}
    if tier is not None:
        marks[tier] = pytest.mark.integration.mark
    if reason is not None:
        marks[in_process.MARK] = pytest.mark.in_process(reason).mark
    return SimpleNamespace(get_closest_marker=marks.get)


@pytest.mark.parametrize(("tier", "reason", "wire"), [
    ("integration", None, True), ("integration", "request hooks", False), (None, None, False)],
    ids=["integration", "marked", "other-tier"])
def test_only_unmarked_integration_tests_are_held_to_the_wire(
        tier: str | None, reason: str | None, wire: bool) -> None:
    in_process.track(_item(tier, reason))  # type: ignore[arg-type]
    try:
        assert in_process.over_the_wire() is wire
        if wire:
            with pytest.raises(RuntimeError, match=r"in_process\(\"reason\"\)"):
                with broker_in_thread(Path("unused")):
                    pass
    finally:
        in_process.track(None)


def test_a_mark_without_its_reason_is_refused() -> None:
    with pytest.raises(ValueError, match="needs its reason"):
        in_process.mark_reason(pytest.mark.in_process().mark)
    with pytest.raises(ValueError, match="needs its reason"):
        in_process.mark_reason(pytest.mark.in_process(" ").mark)


@pytest.mark.parametrize("name", ["broker", "token", "hooks", "server_info", "control",
                                  "advance_time"])
def test_a_wire_broker_refuses_what_only_a_broker_in_this_process_has(name: str) -> None:
    wire = WireBroker("127.0.0.1", 9092, {"PLAINTEXT": 9092}, None, Path("logs"), None,
                      [Path("logs")])
    with pytest.raises(RuntimeError, match="in_process"):
        getattr(wire, name)
    with pytest.raises(AttributeError):
        wire.no_such_thing  # noqa: B018 - any other name is an ordinary AttributeError
    assert wire.brokers == [(0, 9092)]


def test_a_nodes_listeners_each_get_a_block_of_ports(tmp_path: Path) -> None:
    """Worker K listens on each listener's port + K (pybroker.node.worker): a port-0 listener
    gets a block of free ports, one a worker, that no two listeners share."""
    overrides, ports, http = _node_listeners(
        {"listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
         "listener_security_protocol_map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
         "http_listeners": "http://127.0.0.1:0"}, tmp_path, 2)
    assert set(ports) == {"PLAINTEXT", "INTERNAL"} and http is not None
    taken = [p + k for p in (*ports.values(), http) for k in range(2)]
    assert len(set(taken)) == 6 and all(p > 0 for p in taken)
    assert overrides == {
        "listeners": f"PLAINTEXT://127.0.0.1:{ports['PLAINTEXT']},"
                     f"INTERNAL://127.0.0.1:{ports['INTERNAL']}",
        "http_listeners": f"http://127.0.0.1:{http}"}
