"""Committed offsets: commit, fetch and delete."""
from protocol.messages.api import Api
from protocol.schema import f


OFFSET_COMMIT = Api(
    8, 'OffsetCommit', versions='2-9', flexible='8+',
    request=[
        f('group_id', 'string'),
        f('generation_id_or_member_epoch', 'int32', '1+', default=-1),
        f('member_id', 'string', '1+'),
        f('group_instance_id', 'string', '7+', nullable='7+', default=None),
        f('retention_time_ms', 'int64', '2-4', default=-1),
        f('topics', [
            f('name', 'string'),
            f('partitions', [
                f('partition_index', 'int32'),
                f('committed_offset', 'int64'),
                f('committed_leader_epoch', 'int32', '6+', default=-1),
                f('commit_timestamp', 'int64', '1', default=-1),
                f('committed_metadata', 'string', nullable='0+'),
            ]),
        ]),
    ],
    response=[
        f('throttle_time_ms', 'int32', '3+'),
        f('topics', [
            f('name', 'string'),
            f('partitions', [
                f('partition_index', 'int32'),
                f('error_code', 'int16'),
            ]),
        ]),
    ],
)

OFFSET_FETCH = Api(
    9, 'OffsetFetch', versions='1-9', flexible='6+',
    request=[
        f('group_id', 'string', '0-7'),
        f('topics', [
            f('name', 'string', '0-7'),
            f('partition_indexes', '[]int32', '0-7'),
        ], '0-7', nullable='2-7'),
        f('groups', [
            f('group_id', 'string', '8+'),
            f('member_id', 'string', '9+', nullable='9+', default=None),
            f('member_epoch', 'int32', '9+', default=-1),
            f('topics', [
                f('name', 'string', '8+'),
                f('partition_indexes', '[]int32', '8+'),
            ], '8+', nullable='8+'),
        ], '8+'),
        f('require_stable', 'bool', '7+', default=False),
    ],
    response=[
        f('throttle_time_ms', 'int32', '3+'),
        f('topics', [
            f('name', 'string', '0-7'),
            f('partitions', [
                f('partition_index', 'int32', '0-7'),
                f('committed_offset', 'int64', '0-7'),
                f('committed_leader_epoch', 'int32', '5-7', default=-1),
                f('metadata', 'string', '0-7', nullable='0-7'),
                f('error_code', 'int16', '0-7'),
            ], '0-7'),
        ], '0-7'),
        f('error_code', 'int16', '2-7', default=0),
        f('groups', [
            f('group_id', 'string', '8+'),
            f('topics', [
                f('name', 'string', '8+'),
                f('partitions', [
                    f('partition_index', 'int32', '8+'),
                    f('committed_offset', 'int64', '8+'),
                    f('committed_leader_epoch', 'int32', '8+', default=-1),
                    f('metadata', 'string', '8+', nullable='8+'),
                    f('error_code', 'int16', '8+'),
                ], '8+'),
            ], '8+'),
            f('error_code', 'int16', '8+', default=0),
        ], '8+'),
    ],
)

OFFSET_DELETE = Api(
    47, 'OffsetDelete', versions='0', flexible='none',
    request=[
        f('group_id', 'string'),
        f('topics', [
            f('name', 'string'),
            f('partitions', [
                f('partition_index', 'int32'),
            ]),
        ]),
    ],
    response=[
        f('error_code', 'int16'),
        f('throttle_time_ms', 'int32'),
        f('topics', [
            f('name', 'string'),
            f('partitions', [
                f('partition_index', 'int32'),
                f('error_code', 'int16'),
            ]),
        ]),
    ],
)
