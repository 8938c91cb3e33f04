"""The share-group offsets admin APIs (KIP-932): describe, alter and delete the start offset
(SPSO) of each share-partition of a group.

Kafka 4.1 serves version 0 of each; the share-partition's lag is not in it (that is later).
"""
from protocol.messages.api import Api
from protocol.schema import f

_ERROR_MESSAGE = ('error_message', 'string')

DESCRIBE_SHARE_GROUP_OFFSETS = Api(
    90, 'DescribeShareGroupOffsets', versions='0', flexible='0+',
    request=[
        f('groups', [
            f('group_id', 'string'),
            f('topics', [
                f('topic_name', 'string'),
                f('partitions', '[]int32'),
            ], nullable='0+'),  # null: every share-partition of the group
        ]),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('groups', [
            f('group_id', 'string'),
            f('topics', [
                f('topic_name', 'string'),
                f('topic_id', 'uuid'),
                f('partitions', [
                    f('partition_index', 'int32'),
                    f('start_offset', 'int64'),
                    f('leader_epoch', 'int32'),
                    f('error_code', 'int16'),
                    f(*_ERROR_MESSAGE, nullable='0+', default=None),
                ]),
            ]),
            f('error_code', 'int16'),
            f(*_ERROR_MESSAGE, nullable='0+', default=None),
        ]),
    ],
)

ALTER_SHARE_GROUP_OFFSETS = Api(
    91, 'AlterShareGroupOffsets', versions='0', flexible='0+',
    request=[
        f('group_id', 'string'),
        f('topics', [
            f('topic_name', 'string'),
            f('partitions', [
                f('partition_index', 'int32'),
                f('start_offset', 'int64'),
            ]),
        ]),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('error_code', 'int16'),
        f(*_ERROR_MESSAGE, nullable='0+', default=None),
        f('responses', [
            f('topic_name', 'string'),
            f('topic_id', 'uuid'),
            f('partitions', [
                f('partition_index', 'int32'),
                f('error_code', 'int16'),
                f(*_ERROR_MESSAGE, nullable='0+', default=None),
            ]),
        ]),
    ],
)

DELETE_SHARE_GROUP_OFFSETS = Api(
    92, 'DeleteShareGroupOffsets', versions='0', flexible='0+',
    request=[
        f('group_id', 'string'),
        f('topics', [
            f('topic_name', 'string'),
        ]),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('error_code', 'int16'),
        f(*_ERROR_MESSAGE, nullable='0+', default=None),
        f('responses', [
            f('topic_name', 'string'),
            f('topic_id', 'uuid'),
            f('error_code', 'int16'),
            f(*_ERROR_MESSAGE, nullable='0+', default=None),
        ]),
    ],
)
