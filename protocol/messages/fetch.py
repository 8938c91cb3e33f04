"""Fetch: request and response."""
from protocol.messages.api import Api
from protocol.schema import f, struct

# `isolation_level` of Fetch (v4+) and ListOffsets (v2+).
READ_UNCOMMITTED = 0
READ_COMMITTED = 1

FETCH = Api(
    1, 'Fetch', versions='4-12', flexible='12+',
    request=[
        f('cluster_id', 'string', '12+', nullable='12+', tag=0, default=None),
        f('replica_id', 'int32', '0-14', default=-1),
        f('replica_state', struct([
            f('replica_id', 'int32', '15+', default=-1),
            f('replica_epoch', 'int64', '15+', default=-1),
        ]), '15+', tag=1),
        f('max_wait_ms', 'int32'),
        f('min_bytes', 'int32'),
        f('max_bytes', 'int32', '3+', default=2147483647),
        f('isolation_level', 'int8', '4+', default=0),
        f('session_id', 'int32', '7+', default=0),
        f('session_epoch', 'int32', '7+', default=-1),
        f('topics', [
            f('topic', 'string', '0-12'),
            f('topic_id', 'uuid', '13+'),
            f('partitions', [
                f('partition', 'int32'),
                f('current_leader_epoch', 'int32', '9+', default=-1),
                f('fetch_offset', 'int64'),
                f('last_fetched_epoch', 'int32', '12+', default=-1),
                f('log_start_offset', 'int64', '5+', default=-1),
                f('partition_max_bytes', 'int32'),
                f('replica_directory_id', 'uuid', '17+', tag=0),
            ]),
        ]),
        f('forgotten_topics_data', [
            f('topic', 'string', '7-12'),
            f('topic_id', 'uuid', '13+'),
            f('partitions', '[]int32', '7+'),
        ], '7+'),
        f('rack_id', 'string', '11+', default=''),
    ],
    response=[
        f('throttle_time_ms', 'int32', '1+'),
        f('error_code', 'int16', '7+'),
        f('session_id', 'int32', '7+', default=0),
        f('responses', [
            f('topic', 'string', '0-12'),
            f('topic_id', 'uuid', '13+'),
            f('partitions', [
                f('partition_index', 'int32'),
                f('error_code', 'int16'),
                f('high_watermark', 'int64'),
                f('last_stable_offset', 'int64', '4+', default=-1),
                f('log_start_offset', 'int64', '5+', default=-1),
                f('diverging_epoch', struct([
                    f('epoch', 'int32', '12+', default=-1),
                    f('end_offset', 'int64', '12+', default=-1),
                ]), '12+', tag=0),
                f('current_leader', struct([
                    f('leader_id', 'int32', '12+', default=-1),
                    f('leader_epoch', 'int32', '12+', default=-1),
                ]), '12+', tag=1),
                f('snapshot_id', struct([
                    f('end_offset', 'int64', default=-1),
                    f('epoch', 'int32', default=-1),
                ]), '12+', tag=2),
                f('aborted_transactions', [
                    f('producer_id', 'int64', '4+'),
                    f('first_offset', 'int64', '4+'),
                ], '4+', nullable='4+'),
                f('preferred_read_replica', 'int32', '11+', default=-1),
                f('records', 'records', nullable='0+'),
            ]),
        ]),
        f('node_endpoints', [
            f('node_id', 'int32', '16+'),
            f('host', 'string', '16+'),
            f('port', 'int32', '16+'),
            f('rack', 'string', '16+', nullable='16+', default=None),
        ], '16+', tag=0),
    ],
)
