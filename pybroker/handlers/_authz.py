"""The one question every handler asks before acting: may the request's principal, from its
host, do this operation on this resource? (Kafka's `AuthHelper.authorize`.)

With no authorizer configured (`authorizer.class.name` empty) every answer is yes, and the
only cost on the produce and fetch paths is the `services.authorizer is None` check.
"""
from __future__ import annotations

from collections.abc import Iterable

from protocol.acl_operations import AclOperation, OPERATIONS_NOT_REQUESTED, to_bit_field
from protocol.errors import ErrorCode, KafkaError
from pybroker.security.acl.model import CLUSTER_NAME, ResourceType
from pybroker.handlers._base import RequestContext

Op = AclOperation
TOPIC, GROUP, CLUSTER, TXN = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                              ResourceType.TRANSACTIONAL_ID)


def allowed(ctx: RequestContext, operation: AclOperation, resource_type: ResourceType,
            name: str = CLUSTER_NAME) -> bool:
    authorizer = ctx.services.authorizer
    return authorizer is None or authorizer.authorize(ctx.principal, ctx.client_host,
                                                      operation, resource_type, name)


def allowed_any(ctx: RequestContext, operation: AclOperation,
                resource_type: ResourceType) -> bool:
    """Allowed on some resource of the type (InitProducerId: WRITE on any topic)."""
    authorizer = ctx.services.authorizer
    return authorizer is None or authorizer.authorize_any(ctx.principal, ctx.client_host,
                                                          operation, resource_type)


def denied_names(ctx: RequestContext, operation: AclOperation, resource_type: ResourceType,
                 names: Iterable[str]) -> set[str]:
    """The names among `names` the principal may not `operation` (empty without an
    authorizer, at once)."""
    if ctx.services.authorizer is None:
        return set()
    return {n for n in names if not allowed(ctx, operation, resource_type, n)}


def require(ctx: RequestContext, operation: AclOperation, resource_type: ResourceType,
            name: str = CLUSTER_NAME) -> None:
    """Raise the API's whole-request error (Kafka's per-type code) when not allowed; dispatch
    answers it through the handler's error response."""
    if not allowed(ctx, operation, resource_type, name):
        raise KafkaError(FAILED[resource_type])


FAILED = {
    TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    TXN: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


def operations_field(ctx: RequestContext, requested: bool, resource_type: ResourceType,
                     name: str, supported: frozenset[AclOperation]) -> int:
    """The `*_authorized_operations` field: the supported operations this principal may do
    (every one without an authorizer), or Kafka's "not requested"."""
    if not requested:
        return OPERATIONS_NOT_REQUESTED
    return to_bit_field(frozenset(op for op in supported
                                  if allowed(ctx, op, resource_type, name)))
