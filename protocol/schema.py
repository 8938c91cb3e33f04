"""A small DSL to declare each Kafka message once, with a version range on every field.

Kafka's own JSON specs declare a message once and let a generator emit per-version code; we do
the same in Python. `Message` holds the declaration; `Message.struct(version)` builds a construct
for one version on first use (classic or compact encodings, tagged-field sections from the
API's first flexible version), compiles it and caches it.

Decoded values are construct `Container`s (dicts with attribute access) holding every declared
field: a field absent from the version gets its default, so handlers need not ask which
version they were sent. Building takes any mapping; missing keys take their defaults.

Under tests building is strict (`strict_encoding`): a key that no version of the message
declares at that place is refused with `UnknownField`, since a misspelt field would otherwise go
out as its default. A key that only other versions declare is still dropped silently, as Kafka
drops the fields a version lacks. The check is compiled into the builders only when strict, so
production pays nothing for it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field as dc_field
from io import BytesIO
from typing import Any, Iterable, Mapping, Union

from construct import Construct, Container

from protocol import primitives as P

__all__ = ["Versions", "Field", "ArrayOf", "StructOf", "Message", "f", "array", "struct",
           "snake", "camel", "strict_encoding", "UnknownField"]

# Whether builders compiled from now on refuse unknown keys: see `strict_encoding`.
STRICT = False


def strict_encoding() -> None:
    """Refuse, in every message built from now on, a key that no version declares there.

    For tests: the process turns it on before it encodes anything (pybroker does when
    PYBROKER_STRICT_ENCODE=1, which tests/conftest.py sets and the brokers it starts inherit;
    this package reads no environment). A message already compiled keeps its lax builders."""
    global STRICT
    STRICT = True


class UnknownField(ValueError):
    """A key that no version of the message declares where it was given: a misspelt field,
    refused while building under `STRICT`."""

    def __init__(self, message: str, path: str, key: object, known: Iterable[str]) -> None:
        super().__init__(f"{message}: no version declares {key!r} at {path} "
                         f"(fields there: {', '.join(sorted(known))})")
        self.message, self.path, self.key = message, path, key


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; `high` None means open-ended; empty when low > high."""

    low: int
    high: int | None

    @classmethod
    def parse(cls, text: str | None) -> "Versions":
        if text is None or text == "none":
            return NONE
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            lo, hi = text.split("-")
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, v: int) -> bool:
        return self.low <= v and (self.high is None or v <= self.high)

    def __str__(self) -> str:
        if self.high is not None and self.low > self.high:
            return "none"
        if self.high is None:
            return f"{self.low}+"
        return f"{self.low}-{self.high}" if self.low != self.high else str(self.low)


NONE = Versions(1, 0)
ALL = Versions(0, None)

PRIMITIVES = ("int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "bool",
              "string", "bytes", "uuid", "records")


@dataclass(frozen=True)
class StructOf:
    fields: tuple["Field", ...]


@dataclass(frozen=True)
class ArrayOf:
    item: Union[str, StructOf]


FieldType = Union[str, ArrayOf, StructOf]
_MISSING: Any = object()


@dataclass(frozen=True)
class Field:
    name: str
    type: FieldType
    versions: Versions = ALL
    nullable: Versions = NONE
    tag: int | None = None
    tagged: Versions = NONE
    default: Any = _MISSING
    # Versions in which this field uses compact encodings; None means the message's own.
    # Kafka keeps the request header's client id classic in every version.
    flexible: Versions | None = None

    def default_value(self, version: int) -> Any:
        if self.default is not _MISSING:
            return self.default
        t = self.type
        if isinstance(t, ArrayOf):
            return []
        if isinstance(t, StructOf):
            if version in self.tagged or version in self.nullable:
                return None
            return Container((f.name, f.default_value(version)) for f in t.fields)
        return _PRIMITIVE_DEFAULTS[t]


_PRIMITIVE_DEFAULTS: dict[str, Any] = {
    "int8": 0, "int16": 0, "int32": 0, "int64": 0, "uint16": 0, "uint32": 0, "float64": 0.0,
    "bool": False, "string": "", "bytes": b"", "records": None, "uuid": P.UUID.default,
}


def f(name: str, type: Union[str, list, ArrayOf, StructOf], versions: str = "0+", *,
      nullable: str | None = None, tag: int | None = None, tagged: str | None = None,
      default: Any = _MISSING, flexible: str | None = None) -> Field:
    """Declare a field. A list as `type` is an array of structs with those fields."""
    if isinstance(type, list):
        type = ArrayOf(StructOf(tuple(type)))
    elif isinstance(type, str) and type.startswith("[]"):
        type = ArrayOf(type[2:])
    elif isinstance(type, str) and type not in PRIMITIVES:
        raise ValueError(f"unknown type {type!r} for field {name}")
    if tag is not None and tagged is None:
        tagged = versions
    if tagged is not None and tag is None:
        raise ValueError(f"field {name} is tagged in {tagged} but has no tag number")
    return Field(name, type, Versions.parse(versions), Versions.parse(nullable), tag,
                 Versions.parse(tagged), default,
                 None if flexible is None else Versions.parse(flexible))


def array(item: Union[str, list]) -> ArrayOf:
    return ArrayOf(StructOf(tuple(item)) if isinstance(item, list) else item)


def struct(fields: list) -> StructOf:
    return StructOf(tuple(fields))


def snake(name: str) -> str:
    """Kafka's CamelCase field name to ours: `ThrottleTimeMs` -> `throttle_time_ms`."""
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s).lower()


def camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


# -- building constructs ----------------------------------------------------------------------

def _construct_for(fld: Field, version: int, flexible: bool) -> Construct:
    if fld.flexible is not None:
        flexible = flexible and version in fld.flexible
    t = fld.type
    nullable = version in fld.nullable
    if isinstance(t, ArrayOf):
        return P.Array(_type_construct(t.item, version, flexible), flexible, nullable)
    if isinstance(t, StructOf):
        return MessageStruct(t.fields, version, flexible, nullable_struct=nullable)
    return _primitive(t, flexible, nullable)


def _type_construct(t: Union[str, StructOf], version: int, flexible: bool) -> Construct:
    if isinstance(t, StructOf):
        return MessageStruct(t.fields, version, flexible)
    return _primitive(t, flexible, False)


def _primitive(t: str, flexible: bool, nullable: bool) -> Construct:
    if t == "string":
        return P.String(flexible, nullable)
    if t == "records":
        return P.Records(flexible, nullable)
    if t == "bytes":
        return P.Bytes(flexible, nullable)
    return {
        "int8": P.INT8, "int16": P.INT16, "int32": P.INT32, "int64": P.INT64,
        "uint16": P.UINT16, "uint32": P.UINT32, "float64": P.FLOAT64, "bool": P.BOOL,
        "uuid": P.UUID,
    }[t]


class MessageStruct(Construct):
    """The fields of one struct at one version: regular fields in order, then tagged fields.

    Unknown tags are kept, raw, under `_unknown_tags` so that a re-encode is byte-exact.
    A nullable (untagged) struct is preceded by an int8 marker, as Kafka writes it: -1 for
    null, 1 for present (any negative marker reads as null).
    """

    def __init__(self, fields: Iterable[Field], version: int, flexible: bool,
                 nullable_struct: bool = False) -> None:
        super().__init__()
        fields = [fl for fl in fields if version in fl.versions]
        self.flexible = flexible
        self.nullable_struct = nullable_struct
        self.regular = [(fl.name, _construct_for(fl, version, flexible), fl.default_value(version))
                        for fl in fields if not (flexible and version in fl.tagged)]
        # f() gives every tagged field its tag number.
        self.tagged: list[tuple[int, str, Any, Any]] = sorted(
            ((fl.tag, fl.name, _construct_for(fl, version, flexible), fl.default_value(version))
             for fl in fields if flexible and version in fl.tagged and fl.tag is not None),
            key=lambda x: x[0])
        # Declared fields this version lacks, with their defaults: see `with_absent`.
        self.absent: list[tuple[str, Any]] = []
        # Under STRICT, the keys a built value may have here (every version's fields), and
        # where this struct is, for UnknownField; None: nothing is checked.
        self.known: frozenset[str] | None = None
        self.where = ("", "")
        self.flagbuildnone = False

    def with_absent(self, all_fields: Iterable[Field], version: int,
                    where: tuple[str, str]) -> "MessageStruct":
        """Record the declared fields this version lacks; under STRICT also every key a
        built value may have, and `where` this struct is (the message, the path to it)."""
        all_fields = tuple(all_fields)
        present = {n for n, _, _ in self.regular} | {n for _, n, _, _ in self.tagged}
        self.absent = [(fl.name, fl.default_value(version)) for fl in all_fields
                       if fl.name not in present]
        if STRICT:
            self.known = frozenset(fl.name for fl in all_fields) | {"_unknown_tags"}
            self.where = where
        return self

    # plain path ------------------------------------------------------------------------------
    def _parse(self, stream: BytesIO, context: Any, path: str) -> Any:
        if self.nullable_struct and P.read_exact(stream, 1)[0] >= 0x80:
            return None
        obj = Container()
        for name, sub, _ in self.regular:
            try:
                obj[name] = sub._parsereport(stream, context, f"{path} -> {name}")
            except P.WireError as exc:
                if " (at " in str(exc):
                    raise
                raise P.WireError(f"{exc} (at {path} -> {name})") from None
        for name, default in self.absent:
            obj[name] = _fresh(default)
        if self.flexible:
            for _, name, _, default in self.tagged:
                obj[name] = _fresh(default)
            _parse_tags(self, stream, obj, context, path)
        return obj

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        if self.nullable_struct:
            stream.write(b"\xff" if obj is None else b"\x01")
            if obj is None:
                return obj
        if self.known is not None:
            _refuse_unknown(self, obj)
        get = obj.get
        for name, sub, default in self.regular:
            value = get(name, default)
            sub._build(value, stream, context, f"{path} -> {name}")
        if self.flexible:
            _build_tags(self, obj, stream, context, path)
        return obj

    # compiled path ---------------------------------------------------------------------------
    def _emitparse(self, code: Any) -> str:
        code.append("from protocol.primitives import *\nfrom protocol import primitives as P")
        code.append("from protocol import schema as S")
        fname = f"parse_struct_{code.allocateId()}"
        code.linkedinstances[id(self)] = self
        lines = [f"def {fname}(io, this):"]
        if self.nullable_struct:
            lines.append("    if P.read_exact(io, 1)[0] >= 0x80: return None")
        lines.append("    obj = Container()")
        for name, sub, _ in self.regular:
            lines.append(f"    obj[{name!r}] = {sub._compileparse(code)}")
        for i, (name, default) in enumerate(self.absent):
            lines.append(f"    obj[{name!r}] = S._fresh(linkedinstances[{id(self)}].absent[{i}][1])")
        if self.flexible:
            if self.tagged:
                for i, (_, name, _, _) in enumerate(self.tagged):
                    lines.append(
                        f"    obj[{name!r}] = S._fresh(linkedinstances[{id(self)}].tagged[{i}][3])")
                lines.append(f"    S._parse_tags(linkedinstances[{id(self)}], io, obj, this, '')")
            else:
                lines.append("    first = io.read(1)")
                lines.append("    if first != b'\\x00': S._skip_tags(io, obj, first)")
        lines.append("    return obj")
        code.append("\n".join(lines))
        return f"{fname}(io, this)"

    def _emitbuild(self, code: Any) -> str:
        fname = f"build_struct_{code.allocateId()}"
        code.linkedinstances[id(self)] = self
        lines = [f"def {fname}(obj, io, this):"]
        if self.nullable_struct:
            lines.append("    io.write(b'\\xff' if obj is None else b'\\x01')")
            lines.append("    if obj is None: return obj")
        if self.known is not None:
            lines.append(f"    S._refuse_unknown(linkedinstances[{id(self)}], obj)")
        lines += ["    get = obj.get", "    top = obj"]
        for i, (name, sub, default) in enumerate(self.regular):
            lines.append(f"    obj = get({name!r}, linkedinstances[{id(self)}].regular[{i}][2])")
            lines.append(f"    {sub._compilebuild(code)}")
        lines.append("    obj = top")
        if self.flexible:
            if self.tagged:
                lines.append(f"    S._build_tags(linkedinstances[{id(self)}], obj, io, this, '')")
            else:
                lines.append("    if '_unknown_tags' in obj: S._build_tags(None, obj, io, this, '')")
                lines.append("    else: io.write(b'\\x00')")
        lines.append("    return obj")
        code.append("\n".join(lines))
        return f"{fname}(obj, io, this)"


def _refuse_unknown(ms: MessageStruct, obj: Any) -> None:
    known = ms.known
    assert known is not None
    if not known.issuperset(obj):
        key = next(k for k in obj if k not in known)
        raise UnknownField(ms.where[0], ms.where[1], key, known - {"_unknown_tags"})


def _fresh(default: Any) -> Any:
    """A default that is safe to hand out: mutable defaults are copied."""
    if isinstance(default, list):
        return []
    if isinstance(default, Container):
        return Container((k, _fresh(v)) for k, v in default.items())
    return default


def _skip_tags(io: BytesIO | P.FrameReader, obj: Container, first: bytes) -> None:
    """A non-empty tag section whose first byte the fast path already read.

    `first` is empty at the end of the frame: that is a truncation, not a section to re-read.
    """
    if not first:
        raise P.WireError("tagged-field section runs past the end of the frame")
    io.seek(-1, 1)
    _read_unknown(io, obj, {})


def _read_unknown(io: BytesIO | P.FrameReader, obj: Container, known: dict) -> None:
    count = P.read_uvarint(io)
    if count > P.remaining(io):
        raise P.WireError(f"{count} tagged fields in {P.remaining(io)} bytes")
    last = -1
    for _ in range(count):
        tag = P.read_uvarint(io)
        if tag <= last:
            raise P.WireError(f"tagged field {tag} out of order")
        last = tag
        size = P.read_uvarint(io)
        data = P.read_exact(io, size)
        entry = known.get(tag)
        if entry is None:
            obj.setdefault("_unknown_tags", {})[tag] = data
            continue
        name, sub = entry
        inner = BytesIO(data)
        obj[name] = sub._parsereport(inner, Container(_params=None), f"tag {tag}")
        if inner.tell() != size:
            raise P.WireError(f"tagged field {tag} has {size - inner.tell()} trailing bytes")


def _parse_tags(ms: MessageStruct, io: BytesIO, obj: Container, context: Any, path: str) -> None:
    known = getattr(ms, "_known", None)
    if known is None:
        known = ms._known = {tag: (name, sub) for tag, name, sub, _ in ms.tagged}
    _read_unknown(io, obj, known)


def _build_tags(ms: MessageStruct | None, obj: Any, io: BytesIO, context: Any, path: str) -> None:
    entries: list[tuple[int, bytes]] = []
    if ms is not None:
        for tag, name, sub, default in ms.tagged:
            value = obj.get(name, default)
            if value is None or _equal(value, default):
                continue
            inner = BytesIO()
            sub._build(value, inner, context, f"{path} -> {name}")
            entries.append((tag, inner.getvalue()))
    unknown = obj.get("_unknown_tags") if hasattr(obj, "get") else None
    if unknown:
        entries.extend(unknown.items())
        entries.sort(key=lambda e: e[0])
    out = [P.uvarint_bytes(len(entries))]
    for tag, data in entries:
        out.append(P.uvarint_bytes(tag))
        out.append(P.uvarint_bytes(len(data)))
        out.append(data)
    io.write(b"".join(out))


def read_tag_section(io: BytesIO | P.FrameReader) -> dict[int, bytes]:
    """A tagged-field section none of whose tags we know: tag -> raw bytes."""
    holder = Container()
    _read_unknown(io, holder, {})
    return holder.get("_unknown_tags", {})


def write_tag_section(io: BytesIO, tags: Mapping[int, bytes]) -> None:
    _build_tags(None, {"_unknown_tags": tags}, io, None, "")


def _equal(value: Any, default: Any) -> bool:
    try:
        return bool(value == default)
    except Exception:
        return False


# -- messages ---------------------------------------------------------------------------------

@dataclass
class Message:
    """One request or response of one API, declared once for all its versions."""

    name: str
    api_key: int
    valid: Versions
    flexible: Versions
    fields: tuple[Field, ...]
    _cache: dict = dc_field(default_factory=dict, repr=False)

    def plain(self, version: int) -> MessageStruct:
        """The uncompiled construct: the reference, and the one that reports readable paths."""
        key = ("plain", version)
        if key not in self._cache:
            if version not in self.valid:
                raise KeyError(f"{self.name} has no version {version}")
            ms = MessageStruct(self.fields, version, version in self.flexible)
            self._cache[key] = _with_absent_deep(ms, self.fields, version,
                                                 f"{self.name} v{version}", self.name)
        return self._cache[key]

    def compiled(self, version: int) -> Construct:
        key = ("compiled", version)
        if key not in self._cache:
            self._cache[key] = self.plain(version).compile()
        return self._cache[key]

    def decode(self, data: bytes | BytesIO | P.FrameReader, version: int, *,
               allow_trailing: bool = False) -> Container:
        """Decode one whole body; trailing bytes are an error unless `allow_trailing` (then
        the caller sees them left unread in its BytesIO)."""
        io = data if isinstance(data, (BytesIO, P.FrameReader)) else BytesIO(data)
        obj = self.compiled(version).parsefunc(io, _CONTEXT)
        if not allow_trailing and io.read(1):
            raise P.WireError(f"trailing bytes after {self.name} v{version}")
        return obj

    def encode(self, obj: Any, version: int) -> bytes:
        io = BytesIO()
        self.compiled(version).buildfunc(obj, io, _CONTEXT)
        return io.getvalue()

    def encode_parts(self, obj: Any, version: int) -> list[Any]:
        """The same bytes as `encode`, as buffers: large byte values are not copied."""
        io = P.GatherIO()
        self.compiled(version).buildfunc(obj, io, _CONTEXT)
        return io.parts()

    def encode_plain(self, obj: Any, version: int) -> bytes:
        io = BytesIO()
        self.plain(version)._build(obj, io, _CONTEXT, self.name)
        return io.getvalue()

    def decode_plain(self, data: bytes, version: int) -> Container:
        io = BytesIO(data)
        obj = self.plain(version)._parsereport(io, _CONTEXT, self.name)
        if io.read(1):
            raise P.WireError(f"trailing bytes after {self.name} v{version}")
        return obj

    def default(self, version: int) -> Container:
        """Every field at its default, for building a message field by field."""
        return Container((fl.name, _fresh(fl.default_value(version))) for fl in self.fields)


_CONTEXT = Container(_params=None, _parsing=True, _building=False, _sizing=False)


def _with_absent_deep(ms: MessageStruct, fields: Iterable[Field], version: int,
                      message: str, path: str) -> MessageStruct:
    """Record, for this struct and every nested one, which declared fields the version lacks
    (and under STRICT which keys each may be given, and where it is: `path`)."""
    ms.with_absent(fields, version, (message, path))
    by_name = {fl.name: fl for fl in fields}
    for name, sub, _ in ms.regular:
        _nested(sub, by_name[name], version, message, f"{path} -> {name}")
    for _, name, sub, _ in ms.tagged:
        _nested(sub, by_name[name], version, message, f"{path} -> {name}")
    return ms


def _nested(sub: Construct, fl: Field, version: int, message: str, path: str) -> None:
    t = fl.type
    if isinstance(t, ArrayOf) and isinstance(t.item, StructOf):
        _with_absent_deep(sub.subcon, t.item.fields, version, message, path)
    elif isinstance(t, StructOf):
        _with_absent_deep(sub, t.fields, version, message, path)
