"""Access control lists: describe, create, delete."""
from protocol.messages.api import Api
from protocol.schema import f


DESCRIBE_ACLS = Api(
    29, 'DescribeAcls', versions='1-3', flexible='2+',
    request=[
        f('resource_type_filter', 'int8'),
        f('resource_name_filter', 'string', nullable='0+'),
        f('pattern_type_filter', 'int8', '1+', default=3),
        f('principal_filter', 'string', nullable='0+'),
        f('host_filter', 'string', nullable='0+'),
        f('operation', 'int8'),
        f('permission_type', 'int8'),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+'),
        f('resources', [
            f('resource_type', 'int8'),
            f('resource_name', 'string'),
            f('pattern_type', 'int8', '1+', default=3),
            f('acls', [
                f('principal', 'string'),
                f('host', 'string'),
                f('operation', 'int8'),
                f('permission_type', 'int8'),
            ]),
        ]),
    ],
)

CREATE_ACLS = Api(
    30, 'CreateAcls', versions='1-3', flexible='2+',
    request=[
        f('creations', [
            f('resource_type', 'int8'),
            f('resource_name', 'string'),
            f('resource_pattern_type', 'int8', '1+', default=3),
            f('principal', 'string'),
            f('host', 'string'),
            f('operation', 'int8'),
            f('permission_type', 'int8'),
        ]),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('results', [
            f('error_code', 'int16'),
            f('error_message', 'string', nullable='0+'),
        ]),
    ],
)

DELETE_ACLS = Api(
    31, 'DeleteAcls', versions='1-3', flexible='2+',
    request=[
        f('filters', [
            f('resource_type_filter', 'int8'),
            f('resource_name_filter', 'string', nullable='0+'),
            f('pattern_type_filter', 'int8', '1+', default=3),
            f('principal_filter', 'string', nullable='0+'),
            f('host_filter', 'string', nullable='0+'),
            f('operation', 'int8'),
            f('permission_type', 'int8'),
        ]),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('filter_results', [
            f('error_code', 'int16'),
            f('error_message', 'string', nullable='0+'),
            f('matching_acls', [
                f('error_code', 'int16'),
                f('error_message', 'string', nullable='0+'),
                f('resource_type', 'int8'),
                f('resource_name', 'string'),
                f('pattern_type', 'int8', '1+', default=3),
                f('principal', 'string'),
                f('host', 'string'),
                f('operation', 'int8'),
                f('permission_type', 'int8'),
            ]),
        ]),
    ],
)
