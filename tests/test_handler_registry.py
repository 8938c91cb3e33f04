"""The handler registry holds handlers only: every module of pybroker/handlers/ without a
leading underscore serves an API and is registered, every one with it is a helper the
handlers share and is not; the builder refuses what is not a handler."""
from __future__ import annotations

import importlib
import sys
import types

import pytest

from pybroker import handlers
from pybroker.handlers import REGISTRY, build_registry
from pybroker.handlers._base import Handler
from tests.helpers import ROOT


def _modules() -> set[str]:
    return {p.stem for p in (ROOT / "pybroker" / "handlers").glob("*.py")
            if p.stem != "__init__"}


def _registered_by(name: str) -> tuple[Handler, ...]:
    module = importlib.import_module(f"pybroker.handlers.{name}")
    return tuple(getattr(module, "HANDLERS", None) or (module.HANDLER,))


def test_every_module_without_an_underscore_is_a_registered_handler() -> None:
    public = {name for name in _modules() if not name.startswith("_")}
    assert public == set(handlers._MODULES), "a handler not in _MODULES, or a helper " \
        "without its leading underscore"
    for name in public:
        for handler in _registered_by(name):
            assert REGISTRY[handler.api_key] is handler, name


def test_no_helper_is_a_handler() -> None:
    helpers = {name for name in _modules() if name.startswith("_")}
    assert {"_base", "_authz"} <= helpers
    for name in helpers:
        module = importlib.import_module(f"pybroker.handlers.{name}")
        assert not hasattr(module, "HANDLER") and not hasattr(module, "HANDLERS"), name
    assert {h.handle.__module__.rsplit(".", 1)[1] for h in REGISTRY.values()} & helpers \
        == set()


def test_the_builder_refuses_a_helper() -> None:
    with pytest.raises(RuntimeError, match="_authz is a helper"):
        build_registry(["heartbeat", "_authz"])


def test_the_builder_refuses_what_is_not_a_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("pybroker.handlers.not_a_handler")
    fake.HANDLER = object()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, fake.__name__, fake)
    with pytest.raises(TypeError, match="not_a_handler registers .* not a Handler"):
        build_registry(["not_a_handler"])


def test_the_builder_refuses_a_key_registered_twice() -> None:
    assert set(build_registry(["heartbeat"])) == {_registered_by("heartbeat")[0].api_key}
    with pytest.raises(RuntimeError, match="registered twice"):
        build_registry(["heartbeat", "heartbeat"])
