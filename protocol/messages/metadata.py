"""Metadata: request and response."""
from protocol.messages.api import Api
from protocol.schema import f


METADATA = Api(
    3, 'Metadata', versions='0-12', flexible='9+',
    request=[
        f('topics', [
            f('topic_id', 'uuid', '10+'),
            f('name', 'string', nullable='10+'),
        ], nullable='1+'),
        f('allow_auto_topic_creation', 'bool', '4+', default=True),
        f('include_cluster_authorized_operations', 'bool', '8-10'),
        f('include_topic_authorized_operations', 'bool', '8+'),
    ],
    response=[
        f('throttle_time_ms', 'int32', '3+'),
        f('brokers', [
            f('node_id', 'int32'),
            f('host', 'string'),
            f('port', 'int32'),
            f('rack', 'string', '1+', nullable='1+', default=None),
        ]),
        f('cluster_id', 'string', '2+', nullable='2+', default=None),
        f('controller_id', 'int32', '1+', default=-1),
        f('topics', [
            f('error_code', 'int16'),
            f('name', 'string', nullable='12+'),
            f('topic_id', 'uuid', '10+'),
            f('is_internal', 'bool', '1+', default=False),
            f('partitions', [
                f('error_code', 'int16'),
                f('partition_index', 'int32'),
                f('leader_id', 'int32'),
                f('leader_epoch', 'int32', '7+', default=-1),
                f('replica_nodes', '[]int32'),
                f('isr_nodes', '[]int32'),
                f('offline_replicas', '[]int32', '5+'),
            ]),
            f('topic_authorized_operations', 'int32', '8+', default=-2147483648),
        ]),
        f('cluster_authorized_operations', 'int32', '8-10', default=-2147483648),
    ],
)
