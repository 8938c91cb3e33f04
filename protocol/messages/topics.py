"""Topic administration: create, delete, add partitions, delete records, describe."""
from protocol.messages.api import Api
from protocol.schema import f, struct

# Kafka's internal topics (Metadata's `is_internal`): the group and transaction coordinators'.
GROUP_METADATA_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC})

CREATE_TOPICS = Api(
    19, 'CreateTopics', versions='2-7', flexible='5+',
    request=[
        f('topics', [
            f('name', 'string'),
            f('num_partitions', 'int32'),
            f('replication_factor', 'int16'),
            f('assignments', [
                f('partition_index', 'int32'),
                f('broker_ids', '[]int32'),
            ]),
            f('configs', [
                f('name', 'string'),
                f('value', 'string', nullable='0+'),
            ]),
        ]),
        f('timeout_ms', 'int32', default=60000),
        f('validate_only', 'bool', '1+', default=False),
    ],
    response=[
        f('throttle_time_ms', 'int32', '2+'),
        f('topics', [
            f('name', 'string'),
            f('topic_id', 'uuid', '7+'),
            f('error_code', 'int16'),
            f('error_message', 'string', '1+', nullable='0+'),
            f('topic_config_error_code', 'int16', '5+', tag=0),
            f('num_partitions', 'int32', '5+', default=-1),
            f('replication_factor', 'int16', '5+', default=-1),
            f('configs', [
                f('name', 'string', '5+'),
                f('value', 'string', '5+', nullable='5+'),
                f('read_only', 'bool', '5+'),
                f('config_source', 'int8', '5+', default=-1),
                f('is_sensitive', 'bool', '5+'),
            ], '5+', nullable='5+'),
        ]),
    ],
)

DELETE_TOPICS = Api(
    20, 'DeleteTopics', versions='1-6', flexible='4+',
    request=[
        f('topics', [
            f('name', 'string', '6+', nullable='6+', default=None),
            f('topic_id', 'uuid', '6+'),
        ], '6+'),
        f('topic_names', '[]string', '0-5'),
        f('timeout_ms', 'int32'),
    ],
    response=[
        f('throttle_time_ms', 'int32', '1+'),
        f('responses', [
            f('name', 'string', nullable='6+'),
            f('topic_id', 'uuid', '6+'),
            f('error_code', 'int16'),
            f('error_message', 'string', '5+', nullable='5+', default=None),
        ]),
    ],
)

CREATE_PARTITIONS = Api(
    37, 'CreatePartitions', versions='0-3', flexible='2+',
    request=[
        f('topics', [
            f('name', 'string'),
            f('count', 'int32'),
            f('assignments', [
                f('broker_ids', '[]int32'),
            ], nullable='0+'),
        ]),
        f('timeout_ms', 'int32'),
        f('validate_only', 'bool'),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('results', [
            f('name', 'string'),
            f('error_code', 'int16'),
            f('error_message', 'string', nullable='0+', default=None),
        ]),
    ],
)

DELETE_RECORDS = Api(
    21, 'DeleteRecords', versions='0-2', flexible='2+',
    request=[
        f('topics', [
            f('name', 'string'),
            f('partitions', [
                f('partition_index', 'int32'),
                f('offset', 'int64'),
            ]),
        ]),
        f('timeout_ms', 'int32'),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('topics', [
            f('name', 'string'),
            f('partitions', [
                f('partition_index', 'int32'),
                f('low_watermark', 'int64'),
                f('error_code', 'int16'),
            ]),
        ]),
    ],
)

DESCRIBE_TOPIC_PARTITIONS = Api(
    75, 'DescribeTopicPartitions', versions='0', flexible='0+',
    request=[
        f('topics', [
            f('name', 'string'),
        ]),
        f('response_partition_limit', 'int32', default=2000),
        f('cursor', struct([
            f('topic_name', 'string'),
            f('partition_index', 'int32'),
        ]), nullable='0+'),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('topics', [
            f('error_code', 'int16'),
            f('name', 'string', nullable='0+'),
            f('topic_id', 'uuid'),
            f('is_internal', 'bool', default=False),
            f('partitions', [
                f('error_code', 'int16'),
                f('partition_index', 'int32'),
                f('leader_id', 'int32'),
                f('leader_epoch', 'int32', default=-1),
                f('replica_nodes', '[]int32'),
                f('isr_nodes', '[]int32'),
                f('eligible_leader_replicas', '[]int32', nullable='0+', default=None),
                f('last_known_elr', '[]int32', nullable='0+', default=None),
                f('offline_replicas', '[]int32'),
            ]),
            f('topic_authorized_operations', 'int32', default=-2147483648),
        ]),
        f('next_cursor', struct([
            f('topic_name', 'string'),
            f('partition_index', 'int32'),
        ]), nullable='0+'),
    ],
)
