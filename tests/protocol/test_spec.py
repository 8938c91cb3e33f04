"""Our declarations agree with Kafka's JSON message specs, field by field and version by version.

The specs in `../shared/reference/kafka-message-specs/` are read at test time and never copied
into the project. Two views are compared:

* the wire view: for every version we declare, the fields present at that version in order,
  with their type (array element types and nested structs, `commonStructs` resolved), whether
  they are nullable and, from the flexible version on, whether and under which tag they are
  tagged. Any difference here is a wire incompatibility.
* the declaration view: the same comparison over every version the spec knows, so a field left
  out or mis-ranged beyond our declared range is caught before somebody widens the range.
  Fields wholly outside our range may be left out; a field we do declare must be declared
  for exactly the spec's versions.
"""
from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Any, Iterator

import pytest

from protocol.headers import REQUEST_HEADER, RESPONSE_HEADER
from protocol.messages import APIS
from protocol.schema import ArrayOf, Field, Message, StructOf, Versions, snake
from compat.apache_kafka import cache_dir, kafka_version

SPEC_DIR = Path(__file__).parents[2].parent / "shared/reference/kafka-message-specs"
if not SPEC_DIR.is_dir():
    pytest.skip(f"spec-conformance suite: Kafka's JSON message specs are not at {SPEC_DIR} "
                "(../shared/reference/ beside the clone is absent)", allow_module_level=True)

PRIMITIVES = {"int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "bool",
              "string", "bytes", "records", "uuid"}


def _load(path: Path) -> dict[str, Any]:
    return _parse(path.read_text())


def _parse(text: str) -> dict[str, Any]:
    """A spec: JSON with `//` comment lines (Kafka's own files carry them)."""
    return json.loads("\n".join(line for line in text.splitlines()
                                if not line.lstrip().startswith("//")))


# Kafka's client jar carries the specs of the Kafka it is (common/message/*.json): read there,
# at test time, for the APIs the local specs predate (the share coordinator APIs, 83-87, whose
# 4.1 fields differ, and the share-group offsets APIs, 90-92).
CLIENT_JAR = cache_dir() / "lib" / f"kafka-clients-{kafka_version()}.jar"
FROM_JAR = {83, 84, 85, 86, 87, 90, 91, 92}


def _specs() -> dict[tuple[int, str], dict[str, Any]]:
    specs = {}
    for path in SPEC_DIR.glob("*.json"):
        spec = _load(path)
        if spec.get("type") in ("request", "response") and "apiKey" in spec:
            specs[(spec["apiKey"], spec["type"])] = spec
    if CLIENT_JAR.is_file():
        with zipfile.ZipFile(CLIENT_JAR) as jar:
            for name in jar.namelist():
                if name.startswith("common/message/") and name.endswith(".json"):
                    spec = _parse(jar.read(name).decode())
                    if spec.get("apiKey") in FROM_JAR and spec.get("type") in (
                            "request", "response"):
                        specs[(spec["apiKey"], spec["type"])] = spec
    for (key, direction), delta in KAFKA_4_1_DELTAS.items():
        if (key, direction) in specs:
            delta(specs[(key, direction)])
    return specs


def _field(spec: dict[str, Any], *path: str) -> dict[str, Any]:
    fields = spec["fields"]
    found: dict[str, Any] = {}
    for name in path:
        found = next(sf for sf in fields if sf["name"] == name)
        fields = found.get("fields", [])
    return found


def _share_v1(spec: dict[str, Any]) -> None:
    """KIP-932 as released in 4.1: version 1 replaces the incompatible early-access 0."""
    spec["validVersions"] = "1"


def _share_fetch_request_v1(spec: dict[str, Any]) -> None:
    _share_v1(spec)
    at = spec["fields"].index(_field(spec, "MaxBytes")) + 1
    spec["fields"][at:at] = [{"name": "MaxRecords", "type": "int32", "versions": "1+"},
                             {"name": "BatchSize", "type": "int32", "versions": "1+"}]
    _field(spec, "Topics", "Partitions", "PartitionMaxBytes")["versions"] = "0"


def _share_fetch_response_v1(spec: dict[str, Any]) -> None:
    _share_v1(spec)
    at = spec["fields"].index(_field(spec, "ErrorMessage")) + 1
    spec["fields"].insert(at, {"name": "AcquisitionLockTimeoutMs", "type": "int32",
                               "versions": "0+"})


def _consumer_group_describe_v1(spec: dict[str, Any]) -> None:
    """KIP-1099 (4.1): v1 adds each member's MemberType (the request is unchanged)."""
    spec["validVersions"] = "0-1"
    if spec["type"] == "response":
        _field(spec, "Groups", "Members")["fields"].append(
            {"name": "MemberType", "type": "int8", "versions": "1+", "default": "-1"})


def _list_config_resources(spec: dict[str, Any]) -> None:
    """KIP-1142 (4.1): ListClientMetricsResources becomes ListConfigResources; v1 asks for
    resource types and names each resource's."""
    spec["validVersions"] = "0-1"
    spec["name"] = spec["name"].replace("ListClientMetricsResources", "ListConfigResources")
    if spec["type"] == "request":
        spec["fields"] = [{"name": "ResourceTypes", "type": "[]int8", "versions": "1+"}]
    else:
        spec["fields"][-1] = {"name": "ConfigResources", "type": "[]ConfigResource",
                              "versions": "0+", "fields": [
                                  {"name": "ResourceName", "type": "string", "versions": "0+"},
                                  {"name": "ResourceType", "type": "int8", "versions": "1+",
                                   "default": 16}]}


# The local specs predate Kafka 4.1 for the share-group APIs and ConsumerGroupDescribe
# (../shared/reference/KAFKA4_GROUPS.md, section 0): these are the 4.1 changes, applied to them
# at load time (ConsumerGroupDescribe's as Kafka 4.1.1's kafka-clients jar encodes it:
# tests/test_consumer_group_heartbeat.py holds its bytes).
KAFKA_4_1_DELTAS = {
    (74, "request"): _list_config_resources, (74, "response"): _list_config_resources,
    (69, "request"): _consumer_group_describe_v1, (69, "response"): _consumer_group_describe_v1,
    (76, "request"): _share_v1, (76, "response"): _share_v1,
    (77, "request"): _share_v1, (77, "response"): _share_v1,
    (78, "request"): _share_fetch_request_v1, (78, "response"): _share_fetch_response_v1,
    (79, "request"): _share_v1, (79, "response"): _share_v1,
}


SPECS = _specs()


# -- a version-by-version view of both sides -------------------------------------------------

def _spec_type(spec_field: dict[str, Any], common: dict[str, Any]) -> Any:
    """The spec field's type as a comparable value; struct fields are resolved later."""
    t = spec_field["type"]
    is_array = t.startswith("[]")
    base = t[2:] if is_array else t
    if base in PRIMITIVES:
        item: Any = base
    else:
        fields = spec_field.get("fields")
        if fields is None:
            fields = common[base]["fields"]
        item = ("struct", fields)
    return ("array", item) if is_array else item


def spec_view(fields: list[dict[str, Any]], version: int, flexible: bool,
              common: dict[str, Any]) -> list[tuple]:
    out = []
    for sf in fields:
        if version not in Versions.parse(sf["versions"]):
            continue
        tagged = flexible and version in Versions.parse(sf.get("taggedVersions"))
        out.append((snake(sf["name"]), _resolve(_spec_type(sf, common), version, flexible, common),
                    version in Versions.parse(sf.get("nullableVersions")),
                    sf.get("tag") if tagged else None))
    return out


def _resolve(t: Any, version: int, flexible: bool, common: dict[str, Any]) -> Any:
    if isinstance(t, tuple) and t[0] == "array":
        return ("array", _resolve(t[1], version, flexible, common))
    if isinstance(t, tuple) and t[0] == "struct":
        return ("struct", spec_view(t[1], version, flexible, common))
    return t


def our_view(fields: tuple[Field, ...], version: int, flexible: bool) -> list[tuple]:
    out = []
    for fl in fields:
        if version not in fl.versions:
            continue
        tagged = flexible and version in fl.tagged
        out.append((fl.name, _our_type(fl.type, version, flexible), version in fl.nullable,
                    fl.tag if tagged else None))
    return out


def _our_type(t: Any, version: int, flexible: bool) -> Any:
    if isinstance(t, ArrayOf):
        return ("array", _our_type(t.item, version, flexible))
    if isinstance(t, StructOf):
        return ("struct", our_view(t.fields, version, flexible))
    return t


def differences(ours: list[tuple], theirs: list[tuple], path: str) -> Iterator[str]:
    """Readable differences between two views, naming the field path."""
    our_names = [o[0] for o in ours]
    their_names = [t[0] for t in theirs]
    if our_names != their_names:
        yield f"{path}: fields {our_names} but the spec has {their_names}"
        return
    for o, t in zip(ours, theirs):
        where = f"{path}.{o[0]}"
        if o[2] != t[2]:
            yield f"{where}: nullable {o[2]}, spec {t[2]}"
        if o[3] != t[3]:
            yield f"{where}: tag {o[3]}, spec {t[3]}"
        yield from _type_differences(o[1], t[1], where)


def _type_differences(o: Any, t: Any, where: str) -> Iterator[str]:
    if isinstance(o, tuple) and isinstance(t, tuple) and o[0] == t[0]:
        if o[0] == "array":
            yield from _type_differences(o[1], t[1], where + "[]")
        else:
            yield from differences(o[1], t[1], where)
    elif o != t:
        yield f"{where}: type {_short(o)}, spec {_short(t)}"


def _short(t: Any) -> str:
    if isinstance(t, tuple):
        return "[]" + _short(t[1]) if t[0] == "array" else "struct"
    return str(t)


def _versions(v: Versions, upto: int) -> set[int]:
    return {x for x in range(0, upto + 1) if x in v}


def _common(spec: dict[str, Any]) -> dict[str, Any]:
    return {cs["name"]: cs for cs in spec.get("commonStructs", [])}


# -- the tests -------------------------------------------------------------------------------

def _cases() -> list[Any]:
    unread = pytest.mark.skip(reason=f"{CLIENT_JAR} (compat/apache_kafka.py fetches it) is "
                                     "absent: the spec of this API is read from there")
    return [pytest.param(api.key, direction, id=f"{api.name}-{direction}",
                         marks=[unread] if api.key in FROM_JAR and not CLIENT_JAR.is_file()
                         else [])
            for api in APIS.values() for direction in ("request", "response")]


@pytest.mark.parametrize("key,direction", _cases())
def test_api_header_facts(key: int, direction: str) -> None:
    """API key, name, flexible versions, and our range inside the spec's validVersions."""
    api = APIS[key]
    message: Message = getattr(api, direction)
    spec = SPECS.get((key, direction))
    assert spec is not None, f"no spec for API key {key} {direction}"
    assert message.api_key == spec["apiKey"]
    assert message.name == spec["name"]
    valid = Versions.parse(spec["validVersions"])
    assert valid.high is not None and api.versions.high is not None
    assert valid.low <= api.versions.low and api.versions.high <= valid.high, \
        f"we declare {api.versions}, the spec knows {valid}"
    spec_flex = Versions.parse(spec.get("flexibleVersions"))
    assert _versions(message.flexible, valid.high) == _versions(spec_flex, valid.high), \
        f"flexible {message.flexible}, spec {spec_flex}"


@pytest.mark.parametrize("key,direction", _cases())
def test_wire_view_matches_spec(key: int, direction: str) -> None:
    """Every version we serve has the spec's fields, order, types, nullability and tags."""
    api = APIS[key]
    message: Message = getattr(api, direction)
    spec = SPECS[(key, direction)]
    assert api.versions.high is not None
    problems = []
    for version in range(api.versions.low, api.versions.high + 1):
        flexible = version in message.flexible
        ours = our_view(message.fields, version, flexible)
        theirs = spec_view(spec["fields"], version, flexible, _common(spec))
        problems += [f"v{version} {p}" for p in differences(ours, theirs, message.name)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("key,direction", _cases())
def test_declared_ranges_match_spec(key: int, direction: str) -> None:
    """Each declared field's versions, nullable and tagged versions equal the spec's, over
    all the spec's versions, so widening our range later needs no field edits."""
    message: Message = getattr(APIS[key], direction)
    spec = SPECS[(key, direction)]
    top = Versions.parse(spec["validVersions"]).high
    assert top is not None
    problems = list(_range_differences(message.fields, spec["fields"], _common(spec), top,
                                       message.name))
    assert not problems, "\n".join(problems)


def _range_differences(ours: tuple[Field, ...], theirs: list[dict[str, Any]],
                       common: dict[str, Any], top: int, path: str) -> Iterator[str]:
    by_name = {snake(sf["name"]): sf for sf in theirs}
    for fl in ours:
        where = f"{path}.{fl.name}"
        sf = by_name.get(fl.name)
        if sf is None:
            yield f"{where}: not in the spec"
            continue
        for what, mine, spec_text in (("versions", fl.versions, sf["versions"]),
                                      ("nullable", fl.nullable, sf.get("nullableVersions")),
                                      ("tagged", fl.tagged, sf.get("taggedVersions"))):
            spec_versions = Versions.parse(spec_text)
            if _versions(mine, top) != _versions(spec_versions, top):
                yield f"{where}: {what} {mine}, spec {spec_versions}"
        if fl.tag != sf.get("tag"):
            yield f"{where}: tag {fl.tag}, spec {sf.get('tag')}"
        t = fl.type.item if isinstance(fl.type, ArrayOf) else fl.type
        if isinstance(t, StructOf):
            spec_t = _spec_type(sf, common)
            spec_t = spec_t[1] if isinstance(spec_t, tuple) and spec_t[0] == "array" else spec_t
            if isinstance(spec_t, tuple):
                yield from _range_differences(t.fields, spec_t[1], common, top, where)


# -- defaults: an absent tagged field means the spec's default -------------------------------

def _spec_default(sf: dict[str, Any], field_type: str) -> Any:
    raw = sf.get("default")
    if raw is None:
        return {"bool": False, "string": "", "float64": 0.0}.get(field_type, 0)
    if isinstance(raw, bool):
        return raw
    text = str(raw)
    if text == "null":
        return None
    if field_type == "bool":
        return text == "true"
    if field_type == "string":
        return text
    if field_type == "float64":
        return float(text)
    return int(text, 16) if re.fullmatch(r"-?0x[0-9a-fA-F]+", text) else int(text)


def _default_differences(ours: tuple[Field, ...], theirs: list[dict[str, Any]],
                         common: dict[str, Any], path: str, tagged_only: bool) -> Iterator[str]:
    by_name = {snake(sf["name"]): sf for sf in theirs}
    for fl in ours:
        sf = by_name.get(fl.name)
        if sf is None:
            continue
        where = f"{path}.{fl.name}"
        t = fl.type
        if isinstance(t, str) and t in PRIMITIVES - {"bytes", "records", "uuid"}:
            if tagged_only and fl.tag is None:
                continue
            mine = fl.default_value(fl.versions.low)
            theirs_default = _spec_default(sf, t)
            if mine != theirs_default or type(mine) is not type(theirs_default):
                yield f"{where}: default {mine!r}, spec {theirs_default!r}"
        inner = t.item if isinstance(t, ArrayOf) else t
        if isinstance(inner, StructOf):
            spec_t = _spec_type(sf, common)
            spec_t = spec_t[1] if isinstance(spec_t, tuple) and spec_t[0] == "array" else spec_t
            if isinstance(spec_t, tuple):
                yield from _default_differences(inner.fields, spec_t[1], common, where,
                                                tagged_only)


@pytest.mark.parametrize("key,direction", _cases())
def test_tagged_defaults_match_spec(key: int, direction: str) -> None:
    """A tagged field equal to its default is left off the wire, and a reader fills in the
    spec's default, so our default must be the spec's or values silently change."""
    message: Message = getattr(APIS[key], direction)
    spec = SPECS[(key, direction)]
    problems = list(_default_differences(message.fields, spec["fields"], _common(spec),
                                         message.name, tagged_only=True))
    assert not problems, "\n".join(problems)


# -- headers ---------------------------------------------------------------------------------

@pytest.mark.parametrize("message,spec_name", [(REQUEST_HEADER, "RequestHeader"),
                                               (RESPONSE_HEADER, "ResponseHeader")])
def test_headers_match_spec(message: Message, spec_name: str) -> None:
    spec = _load(SPEC_DIR / f"{spec_name}.json")
    valid = Versions.parse(spec["validVersions"])
    assert (message.valid.low, message.valid.high) == (valid.low, valid.high)
    for version in range(valid.low, (valid.high or 0) + 1):
        flexible = version in Versions.parse(spec["flexibleVersions"])
        assert (version in message.flexible) == flexible
        ours = our_view(message.fields, version, flexible)
        theirs = spec_view(spec["fields"], version, flexible, {})
        assert not list(differences(ours, theirs, spec_name))
