"""KIP-848 consumer groups: ConsumerGroupHeartbeat (68, v0-1 as Kafka 4.1: v1 adds
SubscribedTopicRegex) and ConsumerGroupDescribe (69, v0 only: 4.1's v1 adds MemberType, which
the local specs predate, and clients fall back to v0)."""
from protocol.messages.api import Api
from protocol.schema import f, struct

_TOPIC_PARTITIONS = [f('topic_id', 'uuid'), f('partitions', '[]int32')]

CONSUMER_GROUP_HEARTBEAT = Api(
    68, 'ConsumerGroupHeartbeat', versions='0-1', flexible='0+',
    request=[
        f('group_id', 'string'),
        f('member_id', 'string'),
        f('member_epoch', 'int32'),
        f('instance_id', 'string', nullable='0+', default=None),
        f('rack_id', 'string', nullable='0+', default=None),
        f('rebalance_timeout_ms', 'int32', default=-1),
        f('subscribed_topic_names', '[]string', nullable='0+', default=None),
        f('subscribed_topic_regex', 'string', '1+', nullable='1+', default=None),
        f('server_assignor', 'string', nullable='0+', default=None),
        f('topic_partitions', _TOPIC_PARTITIONS, nullable='0+', default=None),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+', default=None),
        f('member_id', 'string', nullable='0+', default=None),
        f('member_epoch', 'int32'),
        f('heartbeat_interval_ms', 'int32'),
        f('assignment', struct([f('topic_partitions', _TOPIC_PARTITIONS)]), nullable='0+',
          default=None),
    ],
)

_DESCRIBED_ASSIGNMENT = struct([f('topic_partitions', [
    f('topic_id', 'uuid'), f('topic_name', 'string'), f('partitions', '[]int32')])])

CONSUMER_GROUP_DESCRIBE = Api(
    69, 'ConsumerGroupDescribe', versions='0-1', flexible='0+',
    request=[
        f('group_ids', '[]string'),
        f('include_authorized_operations', 'bool'),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('groups', [
            f('error_code', 'int16'),
            f('error_message', 'string', nullable='0+', default=None),
            f('group_id', 'string'),
            f('group_state', 'string'),
            f('group_epoch', 'int32'),
            f('assignment_epoch', 'int32'),
            f('assignor_name', 'string'),
            f('members', [
                f('member_id', 'string'),
                f('instance_id', 'string', nullable='0+', default=None),
                f('rack_id', 'string', nullable='0+', default=None),
                f('member_epoch', 'int32'),
                f('client_id', 'string'),
                f('client_host', 'string'),
                f('subscribed_topic_names', '[]string'),
                f('subscribed_topic_regex', 'string', nullable='0+', default=None),
                f('assignment', _DESCRIBED_ASSIGNMENT),
                f('target_assignment', _DESCRIBED_ASSIGNMENT),
                # v1 (KIP-1099): 0 a classic-protocol member, 1 a consumer-protocol one.
                f('member_type', 'int8', '1+', default=-1),
            ]),
            f('authorized_operations', 'int32', default=-2147483648),
        ]),
    ],
)
