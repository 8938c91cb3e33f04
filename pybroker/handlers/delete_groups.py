"""DeleteGroups: remove Empty groups with their committed offsets (NON_EMPTY_GROUP while
members remain; GROUP_ID_NOT_FOUND for a group that does not exist). A share group's
share-partition state goes with it (KIP-932)."""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers._authz import GROUP, Op, denied_names
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._group_kind import group_kind


async def handle(ctx: RequestContext, request: Container) -> dict:
    denied = denied_names(ctx, Op.DELETE, GROUP, request.groups_names)
    shares = ctx.services.shares
    share_groups = {g for g in request.groups_names
                    if g not in denied and group_kind(ctx, g) == "share"}
    results = await ctx.groups.delete_groups([g for g in request.groups_names
                                              if g not in denied and g not in share_groups])
    results.update((g, ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in denied)
    if shares is not None:
        for g in sorted(share_groups):
            code = await ctx.groups.coordinates(g)
            results[g] = code if code else await shares.delete_group(g)
    return {"results": [
        {"group_id": g, "error_code": int(results.get(g, ErrorCode.NONE))}
        for g in request.groups_names]}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"results": [
        {"group_id": g, "error_code": int(code)} for g in request.groups_names]}


HANDLER = Handler(ApiKey.DELETE_GROUPS, 0, 2, handle, error_response)
