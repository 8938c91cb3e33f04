"""Hypothesis strategies built by walking a `Message` declaration at one version.

The strategies generate only what the wire can carry at that version: fields absent from the
version are left out (decoding fills their defaults), nullable fields sometimes get None,
tagged fields are sometimes left at their default (which is then omitted from the wire), and
flexible structs sometimes carry unknown tags, which a re-encode must reproduce byte for byte.
"""
from __future__ import annotations

import uuid
from typing import Any

from hypothesis import strategies as st

from protocol.schema import ArrayOf, Field, Message, StructOf

_INT_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}

# Non-ASCII included; surrogates excluded because they cannot be UTF-8 encoded at all.
_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
_BYTES = st.binary(max_size=24)
_UUIDS = st.one_of(st.just(uuid.UUID(int=0)),
                   st.binary(min_size=16, max_size=16).map(lambda b: uuid.UUID(bytes=b)))
# Unknown tags are drawn from this range, minus the tags the struct declares at that version.
_UNKNOWN_TAG_RANGE = (0, 40)


def primitive(t: str) -> st.SearchStrategy[Any]:
    if t in _INT_RANGES:
        lo, hi = _INT_RANGES[t]
        return st.integers(lo, hi)
    if t == "float64":
        return st.floats(allow_nan=False, allow_infinity=False)
    if t == "bool":
        return st.booleans()
    if t == "string":
        return _TEXT
    if t in ("bytes", "records"):
        return _BYTES
    if t == "uuid":
        return _UUIDS
    raise ValueError(f"no strategy for type {t!r}")


def struct_strategy(fields: tuple[Field, ...], version: int,
                    flexible: bool) -> st.SearchStrategy[dict[str, Any]]:
    """A dict holding every field present at `version`, plus sometimes unknown tags."""
    present = [fl for fl in fields if version in fl.versions]
    parts = {fl.name: field_strategy(fl, version, flexible) for fl in present}
    base = st.fixed_dictionaries(parts)
    if not flexible:
        return base
    known = {fl.tag for fl in present if version in fl.tagged}
    free = [t for t in range(*_UNKNOWN_TAG_RANGE) if t not in known]
    unknown = st.dictionaries(st.sampled_from(free), st.binary(max_size=6), min_size=1, max_size=2)
    return st.tuples(base, st.one_of(st.none(), unknown)).map(_with_unknown)


def _with_unknown(pair: tuple[dict[str, Any], dict[int, bytes] | None]) -> dict[str, Any]:
    value, unknown = pair
    if unknown is not None:
        value["_unknown_tags"] = unknown
    return value


def field_strategy(fl: Field, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    t = fl.type
    if isinstance(t, ArrayOf):
        item = (struct_strategy(t.item.fields, version, flexible) if isinstance(t.item, StructOf)
                else primitive(t.item))
        strategy: st.SearchStrategy[Any] = st.lists(item, max_size=3)
    elif isinstance(t, StructOf):
        strategy = struct_strategy(t.fields, version, flexible)
    else:
        strategy = primitive(t)
    if version in fl.nullable:
        strategy = st.one_of(st.none(), strategy)
    if flexible and version in fl.tagged:
        strategy = st.one_of(st.just(fl.default_value(version)), strategy)
    return strategy


def message_strategy(message: Message, version: int) -> st.SearchStrategy[dict[str, Any]]:
    return struct_strategy(message.fields, version, version in message.flexible)


def plain(value: Any) -> Any:
    """Containers to plain dicts, recursively, keeping `_unknown_tags` (which `==` ignores)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def assert_carries(expected: Any, actual: Any, path: str = "") -> None:
    """Every value the generator put in is in the decoded message (which may hold more)."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: {actual!r} is not a struct"
        for key, value in expected.items():
            assert key in actual, f"{path}.{key} missing after decode"
            assert_carries(value, actual[key], f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), f"{path}: {actual!r}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_carries(e, a, f"{path}[{i}]")
    else:
        # Record sets decode into a bytearray (the broker patches them in place).
        same_type = type(expected) is type(actual) or (
            isinstance(expected, bytes) and isinstance(actual, bytearray))
        assert same_type and expected == actual, \
            f"{path}: sent {expected!r}, decoded {actual!r}"


__all__ = ["message_strategy", "field_strategy", "struct_strategy", "primitive", "plain",
           "assert_carries"]
