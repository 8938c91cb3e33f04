"""Fixtures shared by the integration tests: a real broker on an ephemeral port."""
from __future__ import annotations

import io
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pytest

from protocol.schema import UnknownField, strict_encoding
from tests import in_process
from tests.tiers import TIERS, tier_of

# Hypothesis loads third-party plugins by entry point, trio's among them; the protocol tests
# must run with trio absent, so none are loaded (the suite needs none).
os.environ.setdefault("HYPOTHESIS_NO_PLUGINS", "1")
# Strict encoding (protocol/schema.py): a response or request built with a key its schema
# declares in no version fails instead of going out with that field at its default. On here,
# before anything is encoded, for the in-process brokers and the protocol tests; the brokers
# and tools tests start as processes inherit the variable (tests/protocol/
# test_strict_encoding.py checks both).
os.environ["PYBROKER_STRICT_ENCODE"] = "1"
strict_encoding()


class _RefusedEncodings(logging.Handler):
    """Refusals logged by a broker in this process: it closes the connection, which a client
    may retry past, so each fails the test it happened in (`_no_refused_encodings`)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and isinstance(record.exc_info[1], UnknownField):
            self.seen.append(f"{record.name}: {record.exc_info[1]}")


_REFUSED = _RefusedEncodings()
logging.getLogger().addHandler(_REFUSED)


@pytest.fixture(autouse=True)
def _no_refused_encodings() -> Iterator[None]:
    _REFUSED.seen.clear()
    yield
    if _REFUSED.seen:
        pytest.fail("a broker built a message with a key its schema does not declare:\n"
                    + "\n".join(_REFUSED.seen), pytrace=False)


@pytest.fixture(autouse=True)
def _bench_brokers_as_in_production(request: pytest.FixtureRequest,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench tier times brokers it starts as processes, so they run as in production:
    strict encoding decodes every Produce and Fetch a second time through the schema to check
    the hand codecs (protocol/produce_codec.py), which made a guard's 1 KB produce ten times
    slower than a user's broker (CI, 38 against 515 MB/s)."""
    if request.node.get_closest_marker("bench") is not None:
        monkeypatch.delenv("PYBROKER_STRICT_ENCODE", raising=False)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator:
    """The test's broker; `broker.bootstrap` is its host:port. A thread broker, but for an
    integration test that is not marked in_process: a `WireBroker`, at PYBROKER_NUM_CORES > 1
    a node (tests.helpers.serving_broker, tests/in_process.py)."""
    # Imported here so the protocol tests can run with trio absent (they must not need it).
    from tests.helpers import serving_broker

    with serving_broker(tmp_path / "logs") as info:
        yield info


_PERF_SUMMARY = pytest.StashKey[list]()


@pytest.fixture
def perf_summary(request: pytest.FixtureRequest) -> list[str]:
    """Lines a test wants printed in the terminal summary, even under output capture."""
    return request.config.stash.setdefault(_PERF_SUMMARY, [])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            exitstatus: int | pytest.ExitCode, config: pytest.Config) -> None:
    lines = config.stash.get(_PERF_SUMMARY, None)
    if lines:
        terminalreporter.section("performance figures")
        for line in lines:
            terminalreporter.write_line(line)
    spent = _TIER_TIME
    if spent:
        terminalreporter.section("time per tier (setup, call and teardown of its tests, "
                                 "summed over the workers)")
        for tier in TIERS:
            if tier in spent:
                seconds, count = spent[tier]
                terminalreporter.write_line(
                    f"{tier:<12} {int(seconds // 60):3d} min {seconds % 60:4.1f} s  "
                    f"{count} tests")


@pytest.fixture
def tool(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
         ) -> Callable[..., Any]:
    """tool(main, *argv, stdin=b"...") -> Result(rc, out, err): a tool run in-process."""
    from tests.helpers import Result

    def call(main: Callable[[Sequence[str]], int], *argv: str,
             stdin: bytes | None = None) -> Result:
        capsys.readouterr()
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        rc = main(list(argv))
        captured = capsys.readouterr()
        return Result(rc, captured.out, captured.err)
    return call


# --- tiers (tests/tiers.py) ------------------------------------------------------------------

_TESTS_DIR = Path(__file__).parent
# tier -> (seconds, tests): summed where the reports arrive, the process that prints the
# summary (pytest-xdist's workers send theirs there).
_TIER_TIME: dict[str, tuple[float, int]] = {}


@pytest.fixture
def ext4_disk() -> Iterator[Any]:
    """A 16 MB ext4 file system on a loop device, mounted for the test and removed after it
    (`pybroker.testing.disk_faults`: `fail()` takes it read-only as a disk error does);
    skipped where it cannot be mounted (not root)."""
    from pybroker.testing.disk_faults import MountedDisk, available

    why = available("ext4")
    if why:
        pytest.skip(why)
    with MountedDisk.ext4(16) as disk:
        yield disk


@pytest.fixture
def tmpfs_disk() -> Iterator[Any]:
    """A 2 MB tmpfs mounted for the test (`fill()` fills it to ENOSPC); skipped where it
    cannot be mounted (not root)."""
    from pybroker.testing.disk_faults import MountedDisk, available

    why = available("tmpfs")
    if why:
        pytest.skip(why)
    with MountedDisk.tmpfs(2) as disk:
        yield disk


def pytest_configure(config: pytest.Config) -> None:
    for tier in TIERS:
        config.addinivalue_line("markers", f"{tier}: the {tier} tier (tests/tiers.py)")
    config.addinivalue_line(
        "markers", f"{in_process.MARK}(reason): an integration test that holds its broker in "
                   "this process, and why (tests/in_process.py)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = tier_of(item.path.relative_to(_TESTS_DIR).as_posix())
        item.add_marker(getattr(pytest.mark, tier))
        mark = item.get_closest_marker(in_process.MARK)
        if mark is not None:
            try:
                in_process.mark_reason(mark)
            except ValueError as exc:
                raise pytest.UsageError(f"{item.nodeid}: {exc}") from None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """The test whose fixtures set up now: its brokers follow its in_process mark."""
    in_process.track(item)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    in_process.track(None)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each test's setup, call and teardown time, added to its tier's, found from the
    report's node id, so this works where the reports arrive from elsewhere too (pytest-xdist's
    workers send theirs to the process that prints the summary)."""
    path = report.nodeid.split("::", 1)[0]
    if not path.startswith("tests/"):
        return
    tier = tier_of(path.removeprefix("tests/"))
    seconds, count = _TIER_TIME.get(tier, (0.0, 0))
    _TIER_TIME[tier] = (seconds + report.duration, count + (report.when == "call"))
