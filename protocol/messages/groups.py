"""The classic consumer-group APIs: coordinator lookup, membership, and group admin."""
from protocol.messages.api import Api
from protocol.schema import f


FIND_COORDINATOR = Api(
    10, 'FindCoordinator', versions='0-6', flexible='3+',
    request=[
        f('key', 'string', '0-3'),
        f('key_type', 'int8', '1+', default=0),
        f('coordinator_keys', '[]string', '4+'),
    ],
    response=[
        f('throttle_time_ms', 'int32', '1+'),
        f('error_code', 'int16', '0-3'),
        f('error_message', 'string', '1-3', nullable='1-3'),
        f('node_id', 'int32', '0-3'),
        f('host', 'string', '0-3'),
        f('port', 'int32', '0-3'),
        f('coordinators', [
            f('key', 'string', '4+'),
            f('node_id', 'int32', '4+'),
            f('host', 'string', '4+'),
            f('port', 'int32', '4+'),
            f('error_code', 'int16', '4+'),
            f('error_message', 'string', '4+', nullable='4+'),
        ], '4+'),
    ],
)

JOIN_GROUP = Api(
    11, 'JoinGroup', versions='0-9', flexible='6+',
    request=[
        f('group_id', 'string'),
        f('session_timeout_ms', 'int32'),
        f('rebalance_timeout_ms', 'int32', '1+', default=-1),
        f('member_id', 'string'),
        f('group_instance_id', 'string', '5+', nullable='5+', default=None),
        f('protocol_type', 'string'),
        f('protocols', [
            f('name', 'string'),
            f('metadata', 'bytes'),
        ]),
        f('reason', 'string', '8+', nullable='8+', default=None),
    ],
    response=[
        f('throttle_time_ms', 'int32', '2+'),
        f('error_code', 'int16'),
        f('generation_id', 'int32', default=-1),
        f('protocol_type', 'string', '7+', nullable='7+', default=None),
        f('protocol_name', 'string', nullable='7+'),
        f('leader', 'string'),
        f('skip_assignment', 'bool', '9+', default=False),
        f('member_id', 'string'),
        f('members', [
            f('member_id', 'string'),
            f('group_instance_id', 'string', '5+', nullable='5+', default=None),
            f('metadata', 'bytes'),
        ]),
    ],
)

SYNC_GROUP = Api(
    14, 'SyncGroup', versions='0-5', flexible='4+',
    request=[
        f('group_id', 'string'),
        f('generation_id', 'int32'),
        f('member_id', 'string'),
        f('group_instance_id', 'string', '3+', nullable='3+', default=None),
        f('protocol_type', 'string', '5+', nullable='5+', default=None),
        f('protocol_name', 'string', '5+', nullable='5+', default=None),
        f('assignments', [
            f('member_id', 'string'),
            f('assignment', 'bytes'),
        ]),
    ],
    response=[
        f('throttle_time_ms', 'int32', '1+'),
        f('error_code', 'int16'),
        f('protocol_type', 'string', '5+', nullable='5+', default=None),
        f('protocol_name', 'string', '5+', nullable='5+', default=None),
        f('assignment', 'bytes'),
    ],
)

HEARTBEAT = Api(
    12, 'Heartbeat', versions='0-4', flexible='4+',
    request=[
        f('group_id', 'string'),
        f('generation_id', 'int32'),
        f('member_id', 'string'),
        f('group_instance_id', 'string', '3+', nullable='3+', default=None),
    ],
    response=[
        f('throttle_time_ms', 'int32', '1+'),
        f('error_code', 'int16'),
    ],
)

LEAVE_GROUP = Api(
    13, 'LeaveGroup', versions='0-5', flexible='4+',
    request=[
        f('group_id', 'string'),
        f('member_id', 'string', '0-2'),
        f('members', [
            f('member_id', 'string', '3+'),
            f('group_instance_id', 'string', '3+', nullable='3+', default=None),
            f('reason', 'string', '5+', nullable='5+', default=None),
        ], '3+'),
    ],
    response=[
        f('throttle_time_ms', 'int32', '1+'),
        f('error_code', 'int16'),
        f('members', [
            f('member_id', 'string', '3+'),
            f('group_instance_id', 'string', '3+', nullable='3+'),
            f('error_code', 'int16', '3+'),
        ], '3+'),
    ],
)

DESCRIBE_GROUPS = Api(
    15, 'DescribeGroups', versions='0-5', flexible='5+',
    request=[
        f('groups', '[]string'),
        f('include_authorized_operations', 'bool', '3+'),
    ],
    response=[
        f('throttle_time_ms', 'int32', '1+'),
        f('groups', [
            f('error_code', 'int16'),
            f('group_id', 'string'),
            f('group_state', 'string'),
            f('protocol_type', 'string'),
            f('protocol_data', 'string'),
            f('members', [
                f('member_id', 'string'),
                f('group_instance_id', 'string', '4+', nullable='4+', default=None),
                f('client_id', 'string'),
                f('client_host', 'string'),
                f('member_metadata', 'bytes'),
                f('member_assignment', 'bytes'),
            ]),
            f('authorized_operations', 'int32', '3+', default=-2147483648),
        ]),
    ],
)

LIST_GROUPS = Api(
    16, 'ListGroups', versions='0-5', flexible='3+',
    request=[
        f('states_filter', '[]string', '4+'),
        f('types_filter', '[]string', '5+'),
    ],
    response=[
        f('throttle_time_ms', 'int32', '1+'),
        f('error_code', 'int16'),
        f('groups', [
            f('group_id', 'string'),
            f('protocol_type', 'string'),
            f('group_state', 'string', '4+'),
            f('group_type', 'string', '5+'),
        ]),
    ],
)

DELETE_GROUPS = Api(
    42, 'DeleteGroups', versions='0-2', flexible='2+',
    request=[
        f('groups_names', '[]string'),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('results', [
            f('group_id', 'string'),
            f('error_code', 'int16'),
        ]),
    ],
)
