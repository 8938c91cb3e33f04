"""Bindings as Kafka writes them in ZooKeeper: one JSON value per resource pattern,
`{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read",
"host":"*"}]}`, under `/kafka-acl/<Type>/<name>` (LITERAL) or
`/kafka-acl-extended/prefixed/<Type>/<name>` (PREFIXED); the single broker's file keeps the
same values keyed by those paths, so one reader serves both.
"""
from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable

from pybroker.security.acl.model import (
    RESOURCE_BY_NAME, RESOURCE_NAMES, AclBinding, AclPermission, PatternType, ResourceType,
    operation_from_name, operation_name, permission_name,
)

LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"

Pattern = tuple[ResourceType, str, PatternType]


def root_of(pattern_type: PatternType) -> str:
    return PREFIXED_ROOT if pattern_type == PatternType.PREFIXED else LITERAL_ROOT


def path_of(pattern: Pattern) -> str:
    rtype, name, ptype = pattern
    return f"{root_of(PatternType(ptype))}/{RESOURCE_NAMES[rtype]}/{name}"


def by_pattern(bindings: Iterable[AclBinding]) -> dict[Pattern, list[AclBinding]]:
    grouped: dict[Pattern, list[AclBinding]] = defaultdict(list)
    for b in bindings:
        grouped[(b.resource_type, b.resource_name, b.pattern_type)].append(b)
    return grouped


def encode(bindings: Iterable[AclBinding]) -> bytes:
    acls = sorted(({"principal": b.principal, "permissionType": permission_name(b.permission),
                    "operation": operation_name(b.operation), "host": b.host}
                   for b in bindings), key=lambda a: tuple(a.values()))
    return json.dumps({"version": 1, "acls": acls}).encode()


def decode(pattern: Pattern, data: bytes) -> list[AclBinding]:
    """The bindings of one znode value; an empty or unreadable value holds none."""
    if not data:
        return []
    rtype, name, ptype = pattern
    out = []
    for acl in json.loads(data).get("acls", ()):
        out.append(AclBinding(rtype, name, ptype, acl["principal"], acl["host"],
                              operation_from_name(acl["operation"]),
                              AclPermission[acl["permissionType"].upper()]))
    return out


def type_of(type_name: str) -> ResourceType | None:
    return RESOURCE_BY_NAME.get(type_name)


def change_literal(pattern: Pattern) -> bytes:
    """What Kafka writes in a `/kafka-acl-changes` notification: `Topic:name`."""
    return f"{RESOURCE_NAMES[pattern[0]]}:{pattern[1]}".encode()


def change_extended(pattern: Pattern) -> bytes:
    """What Kafka writes in a `/kafka-acl-extended-changes` notification."""
    return json.dumps({"version": 1, "resourceType": RESOURCE_NAMES[pattern[0]],
                       "name": pattern[1],
                       "patternType": PatternType(pattern[2]).name}).encode()


