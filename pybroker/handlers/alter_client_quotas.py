"""AlterClientQuotas: set or remove user / client-id quotas (KIP-546).

Each entry is checked on its own, as Kafka's ZkAdminManager checks it: a bad entity type, an
empty name, an unknown key or a value of the wrong kind answers that entry INVALID_REQUEST
with Kafka's message, and the others still apply. The good entries are written to the
metadata store in one change (the local file, or ZooKeeper's /config/clients and
/config/users with change notifications), unless `validate_only`.
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.cluster.client_quotas import QuotaEntity, QuotaError, apply_ops, parse_entity
from pybroker.handlers._authz import CLUSTER, Op, require
from pybroker.handlers._base import Handler, RequestContext


async def handle(ctx: RequestContext, request: Container) -> dict:
    require(ctx, Op.ALTER_CONFIGS, CLUSTER)  # Kafka's check for the quota APIs
    current = ctx.image.client_quotas
    changes: dict[QuotaEntity, dict[str, float]] = {}
    results: list[tuple[Container, ErrorCode, str | None]] = []
    for entry in request.entries:
        try:
            entity = parse_entity((e.entity_type, e.entity_name) for e in entry.entity)
            before = changes.get(entity, current.get(entity, {}))
            changes[entity] = apply_ops(before, ((op.key, op.value, op.remove)
                                                 for op in entry.ops))
            results.append((entry, ErrorCode.NONE, None))
        except QuotaError as exc:
            results.append((entry, exc.code, exc.message))
    if changes and not request.validate_only:
        await ctx.services.metadata.set_client_quotas(changes)
    return {"entries": [
        {"error_code": int(code), "error_message": message,
         "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name}
                    for e in entry.entity]}
        for entry, code, message in results]}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"entries": [
        {"error_code": int(code), "error_message": None,
         "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name}
                    for e in entry.entity]} for entry in request.entries]}


HANDLER = Handler(ApiKey.ALTER_CLIENT_QUOTAS, 0, 1, handle, error_response)
