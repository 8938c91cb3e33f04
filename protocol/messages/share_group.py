"""The share-group APIs (KIP-932): membership, describe, fetch and acknowledge.

Kafka 4.1 serves version 1 of each; the 4.0 early-access version 0 is not compatible with it
and is not declared. Fields carry Kafka's version ranges ("0+" where the spec says so).
"""
from protocol.messages.api import Api
from protocol.schema import Field, f, struct


def _topic_partitions(with_name: bool) -> Field:
    fields = [f('topic_id', 'uuid')]
    if with_name:
        fields.append(f('topic_name', 'string'))
    fields.append(f('partitions', '[]int32'))
    return f('topic_partitions', fields)


def _acknowledgement_batches() -> Field:
    return f('acknowledgement_batches', [
        f('first_offset', 'int64'),
        f('last_offset', 'int64'),
        f('acknowledge_types', '[]int8'),
    ])


def _current_leader() -> Field:
    return f('current_leader', struct([
        f('leader_id', 'int32'),
        f('leader_epoch', 'int32'),
    ]))


def _node_endpoints() -> Field:
    return f('node_endpoints', [
        f('node_id', 'int32'),
        f('host', 'string'),
        f('port', 'int32'),
        f('rack', 'string', nullable='0+', default=None),
    ])


SHARE_GROUP_HEARTBEAT = Api(
    76, 'ShareGroupHeartbeat', versions='1', flexible='0+',
    request=[
        f('group_id', 'string'),
        f('member_id', 'string'),
        f('member_epoch', 'int32'),
        f('rack_id', 'string', nullable='0+', default=None),
        f('subscribed_topic_names', '[]string', nullable='0+', default=None),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+', default=None),
        f('member_id', 'string', nullable='0+', default=None),
        f('member_epoch', 'int32'),
        f('heartbeat_interval_ms', 'int32'),
        f('assignment', struct([_topic_partitions(with_name=False)]), nullable='0+',
          default=None),
    ],
)

SHARE_GROUP_DESCRIBE = Api(
    77, 'ShareGroupDescribe', versions='1', flexible='0+',
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
                f('rack_id', 'string', nullable='0+', default=None),
                f('member_epoch', 'int32'),
                f('client_id', 'string'),
                f('client_host', 'string'),
                f('subscribed_topic_names', '[]string'),
                f('assignment', struct([_topic_partitions(with_name=True)])),
            ]),
            f('authorized_operations', 'int32', default=-2147483648),
        ]),
    ],
)

SHARE_FETCH = Api(
    78, 'ShareFetch', versions='1', flexible='0+',
    request=[
        f('group_id', 'string', nullable='0+', default=None),
        f('member_id', 'string', nullable='0+'),
        f('share_session_epoch', 'int32'),
        f('max_wait_ms', 'int32'),
        f('min_bytes', 'int32'),
        f('max_bytes', 'int32', default=0x7fffffff),
        f('max_records', 'int32', '1+'),
        f('batch_size', 'int32', '1+'),
        f('topics', [
            f('topic_id', 'uuid'),
            f('partitions', [
                f('partition_index', 'int32'),
                f('partition_max_bytes', 'int32', '0'),
                _acknowledgement_batches(),
            ]),
        ]),
        f('forgotten_topics_data', [
            f('topic_id', 'uuid'),
            f('partitions', '[]int32'),
        ]),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+', default=None),
        f('acquisition_lock_timeout_ms', 'int32'),
        f('responses', [
            f('topic_id', 'uuid'),
            f('partitions', [
                f('partition_index', 'int32'),
                f('error_code', 'int16'),
                f('error_message', 'string', nullable='0+', default=None),
                f('acknowledge_error_code', 'int16'),
                f('acknowledge_error_message', 'string', nullable='0+', default=None),
                _current_leader(),
                f('records', 'records', nullable='0+'),
                f('acquired_records', [
                    f('first_offset', 'int64'),
                    f('last_offset', 'int64'),
                    f('delivery_count', 'int16'),
                ]),
            ]),
        ]),
        _node_endpoints(),
    ],
)

SHARE_ACKNOWLEDGE = Api(
    79, 'ShareAcknowledge', versions='1', flexible='0+',
    request=[
        f('group_id', 'string', nullable='0+', default=None),
        f('member_id', 'string', nullable='0+'),
        f('share_session_epoch', 'int32'),
        f('topics', [
            f('topic_id', 'uuid'),
            f('partitions', [
                f('partition_index', 'int32'),
                _acknowledgement_batches(),
            ]),
        ]),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+', default=None),
        f('responses', [
            f('topic_id', 'uuid'),
            f('partitions', [
                f('partition_index', 'int32'),
                f('error_code', 'int16'),
                f('error_message', 'string', nullable='0+', default=None),
                _current_leader(),
            ]),
        ]),
        _node_endpoints(),
    ],
)
