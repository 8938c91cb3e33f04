"""The broker reads its configuration through BrokerConfig's typed attributes, never by key.

A string key (`config["replica.fetch.wait.max.ms"]`) is an `object` to a type checker and a
misspelling that only fails when the line runs; an attribute is typed (tests/test_types.py
checks its uses) and misspelt only in one place, pybroker/config/broker.py, where the test
below holds each attribute to its key's declared type.
"""
from __future__ import annotations

import ast
import types
import typing
from pathlib import Path

from pybroker.config import broker as broker_config
from pybroker.config.broker import BrokerConfig
from pybroker.config.broker_keys import BROKER_CONFIG_DEFS
from pybroker.config.definitions import ConfigType
from tests.helpers import ROOT

PACKAGE = ROOT / "pybroker"

# (module, key) reads by string that stay, each with its reason. Empty is the goal: add a row
# only for a read at start or reload time that no attribute can serve.
ALLOWED: dict[tuple[str, str], str] = {
    # The testing kit's `config` is the dict of overrides it starts each broker with (it sets
    # zookeeper.connect there itself), not a BrokerConfig.
    ("pybroker/testing/cluster.py", "zookeeper.connect"): "the kit's overrides dict",
}


def _receiver_name(node: ast.expr) -> str:
    """`config` for `config`, `self.config`, `self._config`, `new_config`; '' otherwise."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _is_config(node: ast.expr) -> bool:
    return _receiver_name(node).lower().rstrip("_").endswith("config")


def string_key_reads(source: str) -> list[tuple[int, str]]:
    """(line, key) of each `<...config>["key"]` or `<...config>.get("key")` in `source`."""
    reads = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Subscript) and _is_config(node.value)
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
            reads.append((node.lineno, node.slice.value))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "get" and _is_config(node.func.value) and node.args
              and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            reads.append((node.lineno, node.args[0].value))
    return reads


def test_the_scan_finds_each_form_of_read() -> None:
    source = ('a = config["x.y"]\nb = self.config["x.z"]\nc = self._config.get("x.w", 1)\n'
              'd = new_config["x.v"]\ne = props["x.u"]\nf = config.log_dirs\n'
              'g = config[name]\n')
    assert string_key_reads(source) == [(1, "x.y"), (2, "x.z"), (3, "x.w"), (4, "x.v")]


def test_no_string_key_reads_outside_config() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith("pybroker/config/"):
            continue
        for line, key in string_key_reads(path.read_text()):
            if (relative, key) not in ALLOWED:
                found.append(f"{relative}:{line}: config[{key!r}]")
    assert not found, ("read these through BrokerConfig's typed attributes "
                       "(pybroker/config/broker.py):\n" + "\n".join(found))


def test_every_allowed_read_is_still_there() -> None:
    """A row left behind after its read went would let a new read of that key in."""
    for module, key in ALLOWED:
        assert key in [k for _, k in string_key_reads((ROOT / module).read_text())], module


_PYTHON_TYPE = {
    ConfigType.BOOLEAN: bool, ConfigType.STRING: str, ConfigType.PASSWORD: str,
    ConfigType.CLASS: str, ConfigType.INT: int, ConfigType.SHORT: int, ConfigType.LONG: int,
    ConfigType.DOUBLE: float, ConfigType.LIST: tuple,
}


def test_each_typed_attribute_has_its_keys_type() -> None:
    """`_Key[int]("x")` promises an int: x must parse to one, and be None only if the
    attribute says `| None` (a key with no default)."""
    checked = 0
    namespace = vars(broker_config)
    for attribute, key in vars(BrokerConfig).items():
        if not isinstance(key, broker_config._Key):
            continue
        declared = typing.get_args(key.__orig_class__)[0]  # what _Key[T](...) was given
        if isinstance(declared, typing.ForwardRef):
            declared = declared.__forward_arg__
        if isinstance(declared, str):
            declared = eval(declared, namespace)  # "str | None", "tuple[str, ...]"
        options = set(typing.get_args(declared)) if isinstance(declared, types.UnionType) \
            else {declared}
        options = {typing.get_origin(option) or option for option in options}
        definition = BROKER_CONFIG_DEFS[key.name]
        assert attribute == key.name.replace(".", "_"), (attribute, key.name)
        assert options - {type(None)} == {_PYTHON_TYPE[definition.type]}, (attribute, declared)
        assert (type(None) in options) == (definition.default is None), (attribute, declared)
        checked += 1
    assert checked >= 90
