"""Client quotas: describe and alter (KIP-546), as Kafka's JSON specs declare them."""
from protocol.messages.api import Api
from protocol.schema import f

_ENTITY = [
    f('entity_type', 'string'),
    f('entity_name', 'string', nullable='0+'),
]

DESCRIBE_CLIENT_QUOTAS = Api(
    48, 'DescribeClientQuotas', versions='0-1', flexible='1+',
    request=[
        f('components', [
            f('entity_type', 'string'),
            f('match_type', 'int8'),
            f('match', 'string', nullable='0+'),
        ]),
        f('strict', 'bool'),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+'),
        f('entries', [
            f('entity', list(_ENTITY)),
            f('values', [
                f('key', 'string'),
                f('value', 'float64'),
            ]),
        ], nullable='0+'),
    ],
)

ALTER_CLIENT_QUOTAS = Api(
    49, 'AlterClientQuotas', versions='0-1', flexible='1+',
    request=[
        f('entries', [
            f('entity', list(_ENTITY)),
            f('ops', [
                f('key', 'string'),
                f('value', 'float64'),
                f('remove', 'bool'),
            ]),
        ]),
        f('validate_only', 'bool'),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('entries', [
            f('error_code', 'int16'),
            f('error_message', 'string', nullable='0+'),
            f('entity', list(_ENTITY)),
        ]),
    ],
)
