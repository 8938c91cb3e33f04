"""UpdateFeatures (API 57): `kafka-features.sh upgrade|downgrade|disable`.

ALTER on the cluster is required (CLUSTER_AUTHORIZATION_FAILED otherwise). The updates apply
all together or not at all (cluster/features.py `plan_updates`); a refusal is the top-level
error, and v0-1 repeat it for each feature as their per-feature results, which the admin
client reads when the top level is NONE.
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.cluster.features import UpdateError, UpgradeType, plan_updates
from pybroker.handlers._authz import CLUSTER, Op, allowed
from pybroker.handlers._base import Handler, RequestContext


def _upgrade_type(ctx: RequestContext, update: Container) -> UpgradeType | None:
    if ctx.version == 0:
        return UpgradeType.SAFE_DOWNGRADE if update.allow_downgrade else UpgradeType.UPGRADE
    try:
        return UpgradeType(update.upgrade_type)
    except ValueError:
        return None


def _response(ctx: RequestContext, request: Container, code: ErrorCode,
              message: str | None) -> dict:
    body: dict = {"error_code": int(code), "error_message": message}
    if ctx.version <= 1:
        body["results"] = [{"feature": u.feature, "error_code": int(code),
                            "error_message": message} for u in request.feature_updates]
    return body


async def handle(ctx: RequestContext, request: Container) -> dict:
    if not allowed(ctx, Op.ALTER, CLUSTER):
        return _response(ctx, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    updates = []
    for update in request.feature_updates:
        kind = _upgrade_type(ctx, update)
        if kind is None:
            return _response(ctx, request, ErrorCode.INVALID_REQUEST,
                             f"Unknown upgrade type {update.upgrade_type} for feature "
                             f"{update.feature}.")
        updates.append((update.feature, update.max_version_level, kind))
    store = ctx.services.features
    if ctx.version >= 1 and request.validate_only:
        result = plan_updates(store.current, updates)
    else:
        result = await store.update(lambda current: plan_updates(current, updates))
    if isinstance(result, UpdateError):
        return _response(ctx, request, result.code, result.message)
    return _response(ctx, request, ErrorCode.NONE, None)


def _error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return _response(ctx, request, code, None)


HANDLER = Handler(ApiKey.UPDATE_FEATURES, 0, 2, handle, _error_response)
