"""DeleteShareGroupOffsets (KIP-932): drop a share group's state for whole topics, as
`kafka-share-groups.sh --delete-offsets` does; the group consumes those topics afresh, from
`share.auto.offset.reset`, when it next fetches them.

Only for a share group without members (NON_EMPTY_GROUP); an id no share group holds is
GROUP_ID_NOT_FOUND, an empty one INVALID_GROUP_ID, at the top, as Kafka answers, but for a
request with no topic it may read (none at all included): that is answered with no error
and the topics' refusals, whatever the group, as Kafka 4.1.1's KafkaApis does. Per topic:
one unknown here, or one the group has no state for, is UNKNOWN_TOPIC_OR_PARTITION with the
zero topic id, as Kafka. The tombstones are written to __share_group_state before the
answer; a topic some of whose share coordinators cannot answer has the state deleted where
they can and that error, with its topic id, as Kafka answers a topic its persister failed
on, and the other topics as usual. Needs DELETE on the group (else GROUP_AUTHORIZATION_FAILED
for the request) and READ on each topic (else TOPIC_AUTHORIZATION_FAILED on it).
"""
from __future__ import annotations

from uuid import UUID

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.cluster.features import SHARE_VERSION
from pybroker.handlers._authz import GROUP, TOPIC, Op, denied_names, require
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._share import (
    NO_TOPIC_ID, admin_failed, admin_group_error, share_coordinator,
)


async def handle(ctx: RequestContext, request: Container) -> dict:
    require(ctx, Op.DELETE, GROUP, request.group_id)
    shares = share_coordinator(ctx)
    denied = denied_names(ctx, Op.READ, TOPIC, {t.topic_name for t in request.topics})
    if all(t.topic_name in denied for t in request.topics):
        # No topic left to delete: Kafka 4.1.1's KafkaApis answers the refusals alone, before
        # the group coordinator would check the group (an empty or unknown group included)
        return {"error_code": 0, "responses": [
            _response(t.topic_name, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
            for t in request.topics]}
    code = await admin_group_error(ctx, shares, request.group_id, must_exist=True)
    if code:
        return admin_failed(request.group_id, code)
    responses = []
    for topic in request.topics:
        found = shares.lookup(topic.topic_name)
        topic_id = None
        if topic.topic_name in denied:
            code, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, None
        elif found is None:
            code, message = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             "This server does not host this topic-partition.")
        else:
            code = await shares.delete_offsets(request.group_id, found[0])
            message = None
            if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                message = "There is no offset information to delete."
            else:  # deleted, or a share coordinator's error: Kafka names the topic's id
                topic_id = found[0]
        responses.append(_response(topic.topic_name, topic_id, code, message))
    return {"error_code": 0, "responses": responses}


def _response(topic: str, topic_id: UUID | None, code: ErrorCode, message: str | None) -> dict:
    return {"topic_name": topic, "topic_id": topic_id or NO_TOPIC_ID,
            "error_code": int(code), "error_message": message or (code.message if code else None)}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return admin_failed(request.group_id, code)


HANDLER = Handler(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, 0, handle, error_response,
                  feature=(SHARE_VERSION, 1))
