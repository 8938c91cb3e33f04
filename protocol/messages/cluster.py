"""Cluster and replica information: brokers, log dirs, leader elections and epochs."""
from protocol.messages.api import Api
from protocol.schema import f


DESCRIBE_CLUSTER = Api(
    60, 'DescribeCluster', versions='0-1', flexible='0+',
    request=[
        f('include_cluster_authorized_operations', 'bool'),
        f('endpoint_type', 'int8', '1+', default=1),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+', default=None),
        f('endpoint_type', 'int8', '1+', default=1),
        f('cluster_id', 'string'),
        f('controller_id', 'int32', default=-1),
        f('brokers', [
            f('broker_id', 'int32'),
            f('host', 'string'),
            f('port', 'int32'),
            f('rack', 'string', nullable='0+', default=None),
        ]),
        f('cluster_authorized_operations', 'int32', default=-2147483648),
    ],
)

DESCRIBE_LOG_DIRS = Api(
    35, 'DescribeLogDirs', versions='1-4', flexible='2+',
    request=[
        f('topics', [
            f('topic', 'string'),
            f('partitions', '[]int32'),
        ], nullable='0+'),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('error_code', 'int16', '3+'),
        f('results', [
            f('error_code', 'int16'),
            f('log_dir', 'string'),
            f('topics', [
                f('name', 'string'),
                f('partitions', [
                    f('partition_index', 'int32'),
                    f('partition_size', 'int64'),
                    f('offset_lag', 'int64'),
                    f('is_future_key', 'bool'),
                ]),
            ]),
            f('total_bytes', 'int64', '4+', default=-1),
            f('usable_bytes', 'int64', '4+', default=-1),
        ]),
    ],
)

ELECT_LEADERS = Api(
    43, 'ElectLeaders', versions='0-2', flexible='2+',
    request=[
        f('election_type', 'int8', '1+'),
        f('topic_partitions', [
            f('topic', 'string'),
            f('partitions', '[]int32'),
        ], nullable='0+'),
        f('timeout_ms', 'int32', default=60000),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('error_code', 'int16', '1+'),
        f('replica_election_results', [
            f('topic', 'string'),
            f('partition_result', [
                f('partition_id', 'int32'),
                f('error_code', 'int16'),
                f('error_message', 'string', nullable='0+'),
            ]),
        ]),
    ],
)

ALTER_PARTITION_REASSIGNMENTS = Api(
    45, 'AlterPartitionReassignments', versions='0', flexible='0+',
    request=[
        f('timeout_ms', 'int32', default=60000),
        f('topics', [
            f('name', 'string'),
            f('partitions', [
                f('partition_index', 'int32'),
                f('replicas', '[]int32', nullable='0+', default=None),
            ]),
        ]),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+'),
        f('responses', [
            f('name', 'string'),
            f('partitions', [
                f('partition_index', 'int32'),
                f('error_code', 'int16'),
                f('error_message', 'string', nullable='0+'),
            ]),
        ]),
    ],
)

LIST_PARTITION_REASSIGNMENTS = Api(
    46, 'ListPartitionReassignments', versions='0', flexible='0+',
    request=[
        f('timeout_ms', 'int32', default=60000),
        f('topics', [
            f('name', 'string'),
            f('partition_indexes', '[]int32'),
        ], nullable='0+', default=None),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+'),
        f('topics', [
            f('name', 'string'),
            f('partitions', [
                f('partition_index', 'int32'),
                f('replicas', '[]int32'),
                f('adding_replicas', '[]int32'),
                f('removing_replicas', '[]int32'),
            ]),
        ]),
    ],
)

OFFSET_FOR_LEADER_EPOCH = Api(
    23, 'OffsetForLeaderEpoch', versions='2-4', flexible='4+',
    request=[
        f('replica_id', 'int32', '3+', default=-2),
        f('topics', [
            f('topic', 'string'),
            f('partitions', [
                f('partition', 'int32'),
                f('current_leader_epoch', 'int32', '2+', default=-1),
                f('leader_epoch', 'int32'),
            ]),
        ]),
    ],
    response=[
        f('throttle_time_ms', 'int32', '2+'),
        f('topics', [
            f('topic', 'string'),
            f('partitions', [
                f('error_code', 'int16'),
                f('partition', 'int32'),
                f('leader_epoch', 'int32', '1+', default=-1),
                f('end_offset', 'int64', default=-1),
            ]),
        ]),
    ],
)
