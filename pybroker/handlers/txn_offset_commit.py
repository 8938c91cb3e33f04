"""TxnOffsetCommit: a transactional producer stores a group's offsets inside its transaction.

The offsets are written at once but take effect only when the transaction commits (its marker
lands in the group's partition of __consumer_offsets); this is what `send_offsets_to_transaction`
and Kafka Streams' exactly-once rely on. v3+ names the member and generation, checked as
OffsetCommit checks them. As in Kafka, partitions of topics that do not exist get
UNKNOWN_TOPIC_OR_PARTITION; TRANSACTION_ABORTABLE is answered only to v4 clients (older ones get
INVALID_TXN_STATE), and COORDINATOR_LOAD_IN_PROGRESS only to v2+ (older ones could crash on it:
KAFKA-7296). Null metadata is stored as "". For a KIP-848 consumer group the generation is the
member epoch: a stale one is ILLEGAL_GENERATION, an unknown member UNKNOWN_MEMBER_ID. A share
group's id is GROUP_ID_NOT_FOUND for every partition, as Kafka 4.1.1 answers it.
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from pybroker.handlers._authz import GROUP, TXN, Op, require
from pybroker.handlers._base import Handler, RequestContext, partition_error_response
from pybroker.handlers._commit_request import commit_response, offsets_asked
from pybroker.handlers._group_kind import refused_as_share_group


def _for_version(code: ErrorCode, version: int) -> ErrorCode:
    if code == ErrorCode.TRANSACTION_ABORTABLE and version < 4:
        return ErrorCode.INVALID_TXN_STATE
    if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and version < 2:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return code


async def handle(ctx: RequestContext, request: Container) -> dict:
    require(ctx, Op.WRITE, TXN, request.transactional_id)
    require(ctx, Op.READ, GROUP, request.group_id)
    groups = ctx.groups
    offsets, unknown = offsets_asked(ctx, request, groups.now())
    results: dict[TopicPartition, ErrorCode] = {}
    member, instance, generation = request.member_id, request.group_instance_id, \
        request.generation_id
    check = await refused_as_share_group(ctx, request.group_id) or \
        groups.consumer.validate_txn_commit(request.group_id, member, generation)
    if check:
        results = {tp: check for tp in offsets}
    elif offsets:
        if check is not None:  # a consumer group's member: stored as a member-less commit
            member, instance, generation = "", None, -1
        results = await groups.commit_txn_offsets(
            request.transactional_id, request.group_id, request.producer_id,
            request.producer_epoch, member, instance, generation, offsets)
    return commit_response(request, unknown, results,
                           lambda code: _for_version(code, ctx.version))


HANDLER = Handler(ApiKey.TXN_OFFSET_COMMIT, 0, 4, handle, partition_error_response())
