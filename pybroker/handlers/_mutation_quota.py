"""controller_mutation_rate (KIP-599) for the APIs that create or delete partitions:
CreateTopics, CreatePartitions and DeleteTopics each take a `MutationQuota` for the request,
ask it before each topic's mutation, and answer with its throttle (quota/client_quota.py
has the bucket and the rules). Validate-only requests and auto-created topics are not
counted, as in Kafka."""
from __future__ import annotations

import trio

from pybroker.quota.client_quota import MutationQuota
from pybroker.handlers._base import RequestContext

# A throttled topic's error_message: none, as Kafka 4.1 answers (its code says it all).
THROTTLED = None


def mutation_quota(ctx: RequestContext, strict_since: int) -> MutationQuota:
    """The request's quota: strict from `strict_since` (the first version whose clients
    know THROTTLING_QUOTA_EXCEEDED), permissive before."""
    strict = ctx.version >= strict_since
    quotas = ctx.services.quotas
    if quotas is None:
        return MutationQuota(None, 0.0, 0.0, strict)
    return quotas.controller_mutation.new_quota(ctx.client_id, ctx.session.user, strict,
                                                trio.current_time() * 1000)


def admit(quota: MutationQuota, partitions: int) -> bool:
    """Whether a topic's mutation of `partitions` partitions may go ahead (counted if so)."""
    return quota.admit(partitions, trio.current_time() * 1000)


def throttle(ctx: RequestContext, quota: MutationQuota) -> None:
    """Hand the quota's throttle to dispatch, which writes it into the response
    (throttle_time_ms) and mutes the connection for as long (as Kafka mutes the channel)."""
    ctx.throttle_ms = max(ctx.throttle_ms, quota.throttle_ms)
