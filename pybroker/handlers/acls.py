"""DescribeAcls, CreateAcls, DeleteAcls: the ACLs the authorizer decides by.

As Kafka: without an authorizer every one answers SECURITY_DISABLED; describing needs
DESCRIBE on the cluster, creating and deleting ALTER (else CLUSTER_AUTHORIZATION_FAILED); a
binding that could never be stored (an UNKNOWN or ANY element, a MATCH pattern, an operation
its resource type has not) is refused with INVALID_REQUEST, each creation on its own. A
change is answered once it is stored (pybroker/security/acl/store.py).
"""
from __future__ import annotations

from enum import IntEnum
from itertools import groupby
from typing import Any, TypeVar

from construct import Container

from protocol.acl_operations import AclOperation
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.security.acl.model import (
    AclBinding, AclFilter, AclPermission, PatternType, ResourceType, invalid_binding,
)
from pybroker.handlers._authz import CLUSTER, Op, allowed
from pybroker.handlers._base import Handler, RequestContext

NO_AUTHORIZER = "No Authorizer is configured."
E = TypeVar("E", bound=IntEnum)


def _refusal(ctx: RequestContext, operation: AclOperation) -> tuple[int, str | None] | None:
    """The (code, message) every part of the answer carries when the request cannot be
    served at all, or None."""
    if ctx.services.authorizer is None or ctx.services.acls is None:
        return int(ErrorCode.SECURITY_DISABLED), NO_AUTHORIZER
    if not allowed(ctx, operation, CLUSTER):
        return int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), None
    return None


def _enum(kind: type[E], value: int) -> E:
    try:
        return kind(value)
    except ValueError:
        return kind(0)  # UNKNOWN


def _filter(r: Container, version: int) -> AclFilter:
    return AclFilter(_enum(ResourceType, r.resource_type_filter), r.resource_name_filter,
                     _enum(PatternType, r.pattern_type_filter),
                     r.principal_filter, r.host_filter, _enum(AclOperation, r.operation),
                     _enum(AclPermission, r.permission_type))


def _binding_fields(b: AclBinding) -> dict:
    return {"principal": b.principal, "host": b.host, "operation": int(b.operation),
            "permission_type": int(b.permission)}


async def describe(ctx: RequestContext, request: Container) -> dict:
    refused = _refusal(ctx, Op.DESCRIBE)
    acl_filter = _filter(request, ctx.version)
    if refused is None and acl_filter.invalid():
        refused = int(ErrorCode.INVALID_REQUEST), acl_filter.invalid()
    if refused is not None:
        return {"error_code": refused[0], "error_message": refused[1],
                "resources": []}
    assert ctx.services.authorizer is not None
    matching = ctx.services.authorizer.matching(acl_filter)
    resources = []
    for (rtype, name, ptype), group in groupby(
            matching, key=lambda b: (b.resource_type, b.resource_name, b.pattern_type)):
        resources.append({"resource_type": int(rtype), "resource_name": name,
                          "pattern_type": int(ptype),
                          "acls": [_binding_fields(b) for b in group]})
    return {"error_code": 0, "error_message": None,
            "resources": resources}


async def create(ctx: RequestContext, request: Container) -> dict:
    refused = _refusal(ctx, Op.ALTER)
    if refused is not None:
        return {"results": [
            {"error_code": refused[0], "error_message": refused[1]} for _ in request.creations]}
    results: list[dict[str, Any]] = []
    valid = []
    for c in request.creations:
        binding = AclBinding(_enum(ResourceType, c.resource_type), c.resource_name,
                             _enum(PatternType, c.resource_pattern_type), c.principal, c.host,
                             _enum(AclOperation, c.operation),
                             _enum(AclPermission, c.permission_type))
        problem = invalid_binding(binding)
        if problem is None:
            valid.append(binding)
            results.append({"error_code": 0, "error_message": None})
        else:
            results.append({"error_code": int(ErrorCode.INVALID_REQUEST),
                            "error_message": problem})
    if valid:
        assert ctx.services.acls is not None
        await ctx.services.acls.change(add=valid)
    return {"results": results}


async def delete(ctx: RequestContext, request: Container) -> dict:
    refused = _refusal(ctx, Op.ALTER)
    if refused is not None:
        return {"filter_results": [
            {"error_code": refused[0], "error_message": refused[1], "matching_acls": []}
            for _ in request.filters]}
    assert ctx.services.authorizer is not None and ctx.services.acls is not None
    results, doomed = [], set()
    for r in request.filters:
        acl_filter = _filter(r, ctx.version)
        problem = acl_filter.invalid()
        if problem is not None:
            results.append({"error_code": int(ErrorCode.INVALID_REQUEST),
                            "error_message": problem, "matching_acls": []})
            continue
        matching = ctx.services.authorizer.matching(acl_filter)
        doomed.update(matching)
        results.append({"error_code": 0, "error_message": None, "matching_acls": [
            {"error_code": 0, "error_message": None, "resource_type": int(b.resource_type),
             "resource_name": b.resource_name, "pattern_type": int(b.pattern_type),
             **_binding_fields(b)} for b in matching]})
    if doomed:
        await ctx.services.acls.change(remove=doomed)
    return {"filter_results": results}


def _create_failed(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"results": [
        {"error_code": int(code), "error_message": None} for _ in request.creations]}


def _delete_failed(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"filter_results": [
        {"error_code": int(code), "error_message": None, "matching_acls": []}
        for _ in request.filters]}


HANDLERS = (
    Handler(ApiKey.DESCRIBE_ACLS, 1, 3, describe),
    Handler(ApiKey.CREATE_ACLS, 1, 3, create, _create_failed),
    Handler(ApiKey.DELETE_ACLS, 1, 3, delete, _delete_failed),
)
