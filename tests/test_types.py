"""The type checker: mypy over the packages named in pyproject.toml's [tool.mypy] `files`, but
the test files its `exclude` leaves out.

In-process through `mypy.api`, with its cache in the checkout's .mypy_cache (gitignored), so a
second run reads only what changed: about 1 s warm, 10 to 25 s on a fresh clone (462 modules,
2026-12-07, load average 12 on 2 cores: 0.5 s warm, 16.5 to 23 s cold, 8.7 s of CPU, where
the 372 before compat/ and the tests' shared modules took 0.4 s, 12 to 17 s and 6.4 s).
"""
from __future__ import annotations

import re
import tomllib

from mypy import api

from tests.helpers import ROOT

# The packages issue #30 asks to be checked, then the compatibility suite and the tests' shared
# modules; `files` may name more, never fewer.
REQUIRED = {"protocol", "pybroker/storage", "pybroker/replica", "pybroker/coordinator",
            "compat", "tests/helpers.py", "tests/conftest.py", "tests/cluster/brokers.py",
            "tests/integration/raw.py", "tests/bench/test_cpu_gate.py"}


def _mypy() -> dict:
    return dict(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"])


def _files() -> list[str]:
    return list(_mypy()["files"])


def _excluded(path: str) -> bool:
    exclude = _mypy().get("exclude", [])
    return any(re.search(pattern, path) for pattern in
               ([exclude] if isinstance(exclude, str) else exclude))


def test_the_required_packages_are_checked() -> None:
    files = _files()
    assert all(any(required == f or required.startswith(f + "/") for f in files)
               and not _excluded(required) for required in REQUIRED), files


def test_only_test_files_are_left_out() -> None:
    # Outside tests/bench/: the benchmarks' test files have been checked from the start.
    assert _excluded("tests/integration/test_groups.py")
    assert _excluded("tests/test_types.py")
    assert not _excluded("tests/integration/group_member.py")
    assert not _excluded("tests/storage/util.py")


def test_mypy_passes() -> None:
    # Paths relative to the config file's directory: mypy reads `files` from there.
    stdout, stderr, status = api.run([
        "--config-file", str(ROOT / "pyproject.toml"),
        "--cache-dir", str(ROOT / ".mypy_cache"),
        *(str(ROOT / f) for f in _files()),
    ])
    assert status == 0, stdout + stderr
