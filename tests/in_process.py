"""Which integration tests hold their broker in this process, and why (issue #29 item 3).

The suite runs its integration tier with PYBROKER_NUM_CORES=1 (the default) and =2, so that
what a node of two brokers answers is tested as much as one broker. A test whose broker is a
thread of the test's own process (`broker_in_thread`) reaches no node at any setting, so an
integration test's broker (the `broker` fixture, `tests.helpers.serving_broker`,
`tests.helpers.Broker`) is a process of PYBROKER_NUM_CORES brokers when that is above 1, and
at every setting is seen only as a client sees it (`tests.helpers.WireBroker`: host, ports,
log dirs), so that a test that reads the broker's objects fails at the default too, where CI
runs, and not only in the run at 2.

A test that needs the broker in this process (its request hooks, `control()`, its clock,
its server objects) says why: `@pytest.mark.in_process("reason")`, on the test or on its
module (`pytestmark`). Its broker is then the thread broker, as before. tests/test_in_process.py
holds docs/TESTING.md's list of them to the marks. The current test is tracked here, not
in tests.helpers, so that the conftest (which must not import trio: the protocol tests run
without it) can set it.
"""
from __future__ import annotations

import pytest

MARK = "in_process"
_current: pytest.Item | None = None


def track(item: pytest.Item | None) -> None:
    """The test whose fixtures and body run now (conftest's pytest_runtest_setup)."""
    global _current
    _current = item


def reason() -> str | None:
    """The current test's `in_process` reason, or None when it has none (or no test runs)."""
    if _current is None:
        return None
    mark = _current.get_closest_marker(MARK)
    return None if mark is None else mark_reason(mark)


def mark_reason(mark: pytest.Mark) -> str:
    """The reason an `in_process` mark gives; ValueError when it gives none, so that the list
    in docs/TESTING.md can say why for every test."""
    given = mark.args[0] if mark.args else mark.kwargs.get("reason")
    if not isinstance(given, str) or not given.strip():
        raise ValueError("@pytest.mark.in_process needs its reason: "
                         "@pytest.mark.in_process(\"request hooks\")")
    return given


def over_the_wire() -> bool:
    """Whether the current test's broker is seen over the wire only: an integration test
    without an `in_process` reason. The other tiers' tests keep their thread brokers (the
    fast tier is single brokers in-process by definition)."""
    return (_current is not None and _current.get_closest_marker("integration") is not None
            and reason() is None)
