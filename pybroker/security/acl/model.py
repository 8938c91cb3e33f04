"""Kafka's ACL vocabulary: what a binding is, what a filter matches, what may be created.

A binding is a resource pattern (type, name, LITERAL or PREFIXED) and an entry (principal,
host, operation, ALLOW or DENY) — Kafka's `AclBinding`. Filters (DescribeAcls, DeleteAcls,
kafka-acls --list/--remove) add the wildcards ANY (type, operation, permission, pattern type:
any pattern, same name) and MATCH (the patterns that would apply to that name: the literal
name, the literal `*`, and every prefix of it), Kafka's `AclBindingFilter.matches`. The wire
numbering is Kafka's; the names are those Kafka writes in ZooKeeper and prints in its tools.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from protocol.acl_operations import (
    CLUSTER_OPERATIONS, GROUP_OPERATIONS, TOPIC_OPERATIONS, AclOperation,
)

WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_O = AclOperation
# Kafka's AclEntry.supportedOperations, ALL being valid everywhere.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: TOPIC_OPERATIONS,
    ResourceType.GROUP: GROUP_OPERATIONS,
    ResourceType.CLUSTER: CLUSTER_OPERATIONS,
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
    ResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS}),
}

# Kafka's names, as ZooKeeper's JSON and the tools spell them (`Topic`, `IdempotentWrite`).
RESOURCE_NAMES = {ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group",
                  ResourceType.CLUSTER: "Cluster", ResourceType.TRANSACTIONAL_ID: "TransactionalId",
                  ResourceType.DELEGATION_TOKEN: "DelegationToken", ResourceType.USER: "User"}
RESOURCE_BY_NAME = {v: k for k, v in RESOURCE_NAMES.items()}


def operation_name(op: AclOperation) -> str:
    """`IDEMPOTENT_WRITE` -> `IdempotentWrite` (Kafka's SecurityUtils.operationName)."""
    return "".join(part.capitalize() for part in op.name.split("_"))


def operation_from_name(name: str) -> AclOperation:
    """Case- and separator-insensitive, as kafka-acls --operation accepts `Read`, `read`,
    `IdempotentWrite`, `idempotent_write`. ValueError for anything else."""
    wanted = name.replace("_", "").replace("-", "").lower()
    for op in AclOperation:
        if op.name.replace("_", "").lower() == wanted:
            return op
    raise ValueError(f"unknown operation {name!r}")


def permission_name(permission: AclPermission) -> str:
    return permission.name.capitalize()


@dataclass(frozen=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermission

    def applies_to(self, name: str) -> bool:
        """Whether this binding's resource pattern covers the resource `name`."""
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name == name or self.resource_name == WILDCARD_RESOURCE
        return name.startswith(self.resource_name)


@dataclass(frozen=True)
class AclFilter:
    """None for a name, principal or host matches any; ANY for the enums."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermission = AclPermission.ANY

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, b.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, b.pattern_type):
            return False
        if self.resource_name is not None:
            if self.pattern_type == PatternType.MATCH:
                if not b.applies_to(self.resource_name):
                    return False
            elif self.resource_name != b.resource_name:
                return False
        return ((self.principal is None or self.principal == b.principal)
                and (self.host is None or self.host == b.host)
                and self.operation in (AclOperation.ANY, b.operation)
                and self.permission in (AclPermission.ANY, b.permission))

    def invalid(self) -> str | None:
        """Why a filter can match nothing Kafka would store (DeleteAcls/DescribeAcls refuse
        UNKNOWN values with INVALID_REQUEST), or None."""
        if (self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN
                or self.operation == AclOperation.UNKNOWN
                or self.permission == AclPermission.UNKNOWN):
            return "The filter contains an UNKNOWN element."
        return None


def invalid_binding(b: AclBinding) -> str | None:
    """Why a binding cannot be created (CreateAcls answers INVALID_REQUEST with it), or None:
    Kafka's AclControlManager.validateNewAcl and the ZooKeeper authorizer's operation check."""
    if b.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {b.resource_type.name}"
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {b.pattern_type.name}"
    if b.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {b.operation.name}"
    if b.permission not in (AclPermission.ALLOW, AclPermission.DENY):
        return f"Invalid permissionType {b.permission.name}"
    if not b.resource_name:
        return "Resource name should not be empty"
    if b.resource_type == ResourceType.CLUSTER and b.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    kind, sep, name = b.principal.partition(":")
    if not sep or not kind or not name:
        return f"Could not parse principal from `{b.principal}` (no colon is present " \
               f"separating the principal type from the principal name)"
    if not b.host:
        return "Invalid host"
    if (b.operation != AclOperation.ALL
            and b.operation not in SUPPORTED_OPERATIONS[b.resource_type]):
        return (f"ACL operation {operation_name(b.operation)} is not valid for resource type "
                f"{RESOURCE_NAMES[b.resource_type]}")
    return None
