"""The authorizer's decision: may this principal, from this host, do this to this resource?

Kafka's AclAuthorizer / StandardAuthorizer, in order:
1. a super user (`super.users`, `User:a;User:b`) may do anything;
2. the bindings that apply to the resource are those of its type whose pattern covers its
   name: the literal name, the literal `*`, any prefix (PREFIXED);
3. none apply at all (for anyone): `allow.everyone.if.no.acl.found` decides (default: deny);
4. a DENY for the principal (or `User:*`), the host (or `*`), the operation (or ALL) denies —
   DENY over ALLOW, and DENY implies nothing;
5. an ALLOW for the principal and host allows the operation, ALL, and what implies it:
   READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS;
6. otherwise deny.

Pure: no trio, no I/O. The bindings are replaced as a whole (`replace`) by whoever stores
them, so a decision always reads one consistent set.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from protocol.acl_operations import AclOperation
from pybroker.security.acl.model import (
    WILDCARD_HOST, WILDCARD_PRINCIPAL, WILDCARD_RESOURCE, AclBinding, AclFilter, AclPermission,
    PatternType, ResourceType,
)

# Kafka's class names that turn authorization on; empty means none.
AUTHORIZER_CLASS_NAMES = ("kafka.security.authorizer.AclAuthorizer",
                          "org.apache.kafka.metadata.authorizer.StandardAuthorizer")

_O = AclOperation
# The operations whose ALLOW also allows the key (besides itself and ALL).
_IMPLIED_BY = {
    _O.DESCRIBE: frozenset({_O.DESCRIBE, _O.READ, _O.WRITE, _O.DELETE, _O.ALTER, _O.ALL}),
    _O.DESCRIBE_CONFIGS: frozenset({_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.ALL}),
}


def parse_super_users(value: str | None) -> frozenset[str]:
    """`super.users`: principals separated by semicolons (Kafka's format; commas would be
    part of a TLS distinguished name)."""
    return frozenset(p.strip() for p in (value or "").split(";") if p.strip())


class _TypeIndex:
    """The bindings of one resource type, literal and prefixed ones each by their name. A
    name's prefixes are looked up only at the lengths some prefix binding has: with 1,000
    PREFIXED bindings a decision costs a few dictionary lookups, not 1,000 `startswith`
    (Kafka keeps them in a sorted map for the same reason)."""

    def __init__(self) -> None:
        self.literal: dict[str, list[AclBinding]] = defaultdict(list)
        self.prefixed: dict[str, list[AclBinding]] = defaultdict(list)
        self.prefix_lengths: list[int] = []

    def applying_to(self, name: str) -> list[AclBinding]:
        found = list(self.literal.get(name, ()))
        if name != WILDCARD_RESOURCE:
            found.extend(self.literal.get(WILDCARD_RESOURCE, ()))
        for length in self.prefix_lengths:
            if length > len(name):
                break
            found.extend(self.prefixed.get(name[:length], ()))
        return found

    def all(self) -> list[AclBinding]:
        return [b for table in (self.literal, self.prefixed) for bs in table.values()
                for b in bs]


class Authorizer:
    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acl: bool = False,
                 bindings: Iterable[AclBinding] = ()) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._bindings: frozenset[AclBinding] = frozenset()
        self._index: dict[ResourceType, _TypeIndex] = {}
        self.replace(bindings)

    @property
    def bindings(self) -> frozenset[AclBinding]:
        return self._bindings

    def replace(self, bindings: Iterable[AclBinding]) -> None:
        """Take a new set of bindings (the store's, after a change)."""
        frozen = frozenset(bindings)
        index: dict[ResourceType, _TypeIndex] = defaultdict(_TypeIndex)
        for b in frozen:
            entry = index[b.resource_type]
            if b.pattern_type == PatternType.PREFIXED:
                entry.prefixed[b.resource_name].append(b)
            else:
                entry.literal[b.resource_name].append(b)
        for entry in index.values():
            entry.prefix_lengths = sorted({len(p) for p in entry.prefixed})
        self._bindings, self._index = frozen, dict(index)

    def matching(self, acl_filter: AclFilter) -> list[AclBinding]:
        return sorted((b for b in self._bindings if acl_filter.matches(b)), key=_sort_key)

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        index = self._index.get(resource_type)
        applying = index.applying_to(name) if index is not None else []
        if not applying:
            return self.allow_if_no_acl
        ours = [b for b in applying
                if b.principal in (principal, WILDCARD_PRINCIPAL)
                and b.host in (host, WILDCARD_HOST)]
        if any(b.permission == AclPermission.DENY and b.operation in (operation, _O.ALL)
               for b in ours):
            return False
        allowing = _IMPLIED_BY.get(operation) or frozenset({operation, _O.ALL})
        return any(b.permission == AclPermission.ALLOW and b.operation in allowing
                   for b in ours)

    def authorize_any(self, principal: str, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """Whether the principal may do `operation` on some resource of the type (Kafka's
        authorizeByResourceType, which InitProducerId asks for WRITE on any topic): an ALLOW
        binding of the type whose own resource is not denied to it."""
        if principal in self.super_users:
            return True
        index = self._index.get(resource_type)
        if index is None:
            return self.allow_if_no_acl
        candidates = index.all()
        return any(b.permission == AclPermission.ALLOW
                   and b.principal in (principal, WILDCARD_PRINCIPAL)
                   and b.host in (host, WILDCARD_HOST)
                   and self.authorize(principal, host, operation, resource_type,
                                      b.resource_name)
                   for b in candidates)


def _sort_key(b: AclBinding) -> tuple:
    return (b.resource_type, b.pattern_type, b.resource_name, b.principal, b.host,
            b.operation, b.permission)
