"""The type checker: mypy over the packages named in pyproject.toml's [tool.mypy] `files`.

In-process through `mypy.api`, with its cache in the checkout's .mypy_cache (gitignored), so a
second run reads only what changed: about 1 s warm, 10 to 20 s on a fresh clone.
"""
from __future__ import annotations

import tomllib

from mypy import api

from tests.helpers import ROOT

# The packages issue #30 asks to be checked; `files` may name more, never fewer.
REQUIRED = {"protocol", "pybroker/storage", "pybroker/replica", "pybroker/coordinator"}


def _files() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return list(config["tool"]["mypy"]["files"])


def test_the_required_packages_are_checked() -> None:
    files = _files()
    assert all(any(required == f or required.startswith(f + "/") for f in files)
               for required in REQUIRED), files


def test_mypy_passes() -> None:
    # Paths relative to the config file's directory: mypy reads `files` from there.
    stdout, stderr, status = api.run([
        "--config-file", str(ROOT / "pyproject.toml"),
        "--cache-dir", str(ROOT / ".mypy_cache"),
        *(str(ROOT / f) for f in _files()),
    ])
    assert status == 0, stdout + stderr
