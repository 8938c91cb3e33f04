"""ApiVersions: what we serve, computed from the handler registry.

From v3 the client names its software; Kafka answers INVALID_REQUEST when the name or
version is not made of letters, digits, dots and dashes (librdkafka then retries with v0).

From v3 the response also carries the features (KIP-584, cluster/features.py): the levels this
broker supports, the finalized ones and their epoch. An API gated by a feature that is not
finalized is left out, so a client never tries it (the Java consumer checks for
ConsumerGroupHeartbeat before it picks `group.protocol=consumer`).
"""
from __future__ import annotations

import re
from collections.abc import Mapping

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.cluster.features import SUPPORTED, FeatureStore
from pybroker.handlers._base import Handler, RequestContext

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def advertised(registry: Mapping[int, Handler], features: FeatureStore) -> list[dict]:
    """Every API of the registry the request was dispatched with, as served, less those
    whose feature is off."""
    return [{"api_key": key,
             "min_version": h.advertised_min if h.advertised_min is not None else h.min_version,
             "max_version": h.max_version}
            for key, h in registry.items() if h.enabled(features)]


def feature_fields(features: FeatureStore, version: int) -> dict:
    """The v3+ feature fields. As Kafka, up to v3 a supported feature whose minimum is 0 is
    left out (older clients reject a 0 minimum)."""
    finalized = features.current
    return {
        "supported_features": [
            {"name": name, "min_version": s.min_level, "max_version": s.max_level}
            for name, s in sorted(SUPPORTED.items()) if version >= 4 or s.min_level > 0],
        "finalized_features_epoch": finalized.epoch,
        "finalized_features": [
            {"name": name, "max_version_level": level, "min_version_level": level}
            for name, level in finalized.listed()],
    }


async def handle(ctx: RequestContext, request: Container) -> dict:
    features = ctx.services.features
    body = {"error_code": 0, "api_keys": advertised(ctx.registry, features)}
    if ctx.version >= 3:
        if not (_SOFTWARE.match(request.client_software_name or "")
                and _SOFTWARE.match(request.client_software_version or "")):
            body["error_code"] = int(ErrorCode.INVALID_REQUEST)
        else:
            body.update(feature_fields(features, ctx.version))
    return body


HANDLER = Handler(ApiKey.API_VERSIONS, 0, 4, handle)
