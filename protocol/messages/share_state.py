"""The share coordinator's APIs (KIP-932): how the leader of a data partition reads and
writes the state of its share-partitions at the share coordinator, the leader of the
`__share_group_state` partition of the key "group:topicId:partition". Broker to broker only.

Kafka 4.1 serves version 0 of each. The fields are Kafka 4.1.1's (its kafka-clients
classes): ReadShareGroupStateSummary's answer carries the LeaderEpoch, which the older spec
in shared/reference lacks.
"""
from protocol.messages.api import Api
from protocol.schema import f

_ERROR = [f('error_code', 'int16'), f('error_message', 'string', nullable='0+', default=None)]
_STATE_BATCHES = f('state_batches', [
    f('first_offset', 'int64'),
    f('last_offset', 'int64'),
    f('delivery_state', 'int8'),
    f('delivery_count', 'int16'),
])


def _request(*partition_fields: object) -> list:
    return [
        f('group_id', 'string'),
        f('topics', [
            f('topic_id', 'uuid'),
            f('partitions', [f('partition', 'int32'), *partition_fields]),
        ]),
    ]


def _response(*partition_fields: object) -> list:
    return [
        f('results', [
            f('topic_id', 'uuid'),
            f('partitions', [f('partition', 'int32'), *_ERROR, *partition_fields]),
        ]),
    ]


INITIALIZE_SHARE_GROUP_STATE = Api(
    83, 'InitializeShareGroupState', versions='0', flexible='0+',
    request=_request(f('state_epoch', 'int32'), f('start_offset', 'int64')),
    response=_response(),
)

READ_SHARE_GROUP_STATE = Api(
    84, 'ReadShareGroupState', versions='0', flexible='0+',
    request=_request(f('leader_epoch', 'int32')),
    response=_response(f('state_epoch', 'int32'), f('start_offset', 'int64'), _STATE_BATCHES),
)

WRITE_SHARE_GROUP_STATE = Api(
    85, 'WriteShareGroupState', versions='0', flexible='0+',
    request=_request(f('state_epoch', 'int32'), f('leader_epoch', 'int32'),
                     f('start_offset', 'int64'), _STATE_BATCHES),
    response=_response(),
)

DELETE_SHARE_GROUP_STATE = Api(
    86, 'DeleteShareGroupState', versions='0', flexible='0+',
    request=_request(),
    response=_response(),
)

READ_SHARE_GROUP_STATE_SUMMARY = Api(
    87, 'ReadShareGroupStateSummary', versions='0', flexible='0+',
    request=_request(f('leader_epoch', 'int32')),
    response=_response(f('state_epoch', 'int32'), f('leader_epoch', 'int32'),
                       f('start_offset', 'int64')),
)
