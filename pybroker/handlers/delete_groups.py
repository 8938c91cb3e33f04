"""DeleteGroups: remove Empty groups with their committed offsets (NON_EMPTY_GROUP while
members remain; GROUP_ID_NOT_FOUND for a group that does not exist)."""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers.base import Handler, RequestContext


async def handle(ctx: RequestContext, request: Container) -> dict:
    results = await ctx.groups.delete_groups(list(request.groups_names))
    return {"throttle_time_ms": 0, "results": [
        {"group_id": g, "error_code": int(results.get(g, ErrorCode.NONE))}
        for g in request.groups_names]}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "results": [
        {"group_id": g, "error_code": int(code)} for g in request.groups_names]}


HANDLER = Handler(ApiKey.DELETE_GROUPS, 0, 2, handle, error_response)
