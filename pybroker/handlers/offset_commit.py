"""OffsetCommit: store consumed positions in __consumer_offsets before acknowledging them.

A member commits with its generation and member id, checked against the group; generation -1
without a member id is a "simple" commit, allowed only for a group without members. Partitions
of topics that do not exist get UNKNOWN_TOPIC_OR_PARTITION, as in Kafka. v2-4 may name a
retention time, stored as an explicit expiry (OffsetCommitValue v1); null metadata is stored as
"" (Kafka's NO_METADATA).

A KIP-848 consumer group's member commits with its member epoch (v9): an unknown member is
UNKNOWN_MEMBER_ID, another epoch STALE_MEMBER_EPOCH, a member below v9 UNSUPPORTED_VERSION.
A share group's id is GROUP_ID_NOT_FOUND for every partition, as Kafka 4.1.1 answers it.
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from pybroker.handlers._authz import GROUP, Op, require
from pybroker.handlers._base import Handler, RequestContext, partition_error_response
from pybroker.handlers._commit_request import commit_response, offsets_asked
from pybroker.handlers._group_kind import refused_as_share_group

DEFAULT_RETENTION = -1


async def handle(ctx: RequestContext, request: Container) -> dict:
    require(ctx, Op.READ, GROUP, request.group_id)
    groups = ctx.groups
    now = groups.now()
    expire = None
    if 2 <= ctx.version <= 4 and request.retention_time_ms != DEFAULT_RETENTION:
        expire = now + request.retention_time_ms
    offsets, unknown = offsets_asked(ctx, request, now, expire)
    epoch = request.generation_id_or_member_epoch
    check = await refused_as_share_group(ctx, request.group_id) or \
        groups.consumer.validate_commit(request.group_id, request.member_id, epoch,
                                        ctx.version)
    if check is None:  # a classic group
        results = await groups.commit_offsets(request.group_id, request.member_id,
                                              request.group_instance_id, epoch, offsets)
    elif check:
        results = {tp: check for tp in offsets}
    else:  # a consumer group's member at its epoch: stored as a member-less commit
        results = await groups.commit_offsets(request.group_id, "", None, -1, offsets)
    return commit_response(request, unknown, results)


HANDLER = Handler(ApiKey.OFFSET_COMMIT, 2, 9, handle, partition_error_response())
