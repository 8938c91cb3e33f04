"""Authentication: SASL handshake and exchange, SCRAM credentials."""
from protocol.messages.api import Api
from protocol.schema import f


SASL_HANDSHAKE = Api(
    17, 'SaslHandshake', versions='0-1', flexible='none',
    request=[
        f('mechanism', 'string'),
    ],
    response=[
        f('error_code', 'int16'),
        f('mechanisms', '[]string'),
    ],
)

SASL_AUTHENTICATE = Api(
    36, 'SaslAuthenticate', versions='0-2', flexible='2+',
    request=[
        f('auth_bytes', 'bytes'),
    ],
    response=[
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+'),
        f('auth_bytes', 'bytes'),
        f('session_lifetime_ms', 'int64', '1+', default=0),
    ],
)

DESCRIBE_USER_SCRAM_CREDENTIALS = Api(
    50, 'DescribeUserScramCredentials', versions='0', flexible='0+',
    request=[
        f('users', [
            f('name', 'string'),
        ], nullable='0+'),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+'),
        f('results', [
            f('user', 'string'),
            f('error_code', 'int16'),
            f('error_message', 'string', nullable='0+'),
            f('credential_infos', [
                f('mechanism', 'int8'),
                f('iterations', 'int32'),
            ]),
        ]),
    ],
)

ALTER_USER_SCRAM_CREDENTIALS = Api(
    51, 'AlterUserScramCredentials', versions='0', flexible='0+',
    request=[
        f('deletions', [
            f('name', 'string'),
            f('mechanism', 'int8'),
        ]),
        f('upsertions', [
            f('name', 'string'),
            f('mechanism', 'int8'),
            f('iterations', 'int32'),
            f('salt', 'bytes'),
            f('salted_password', 'bytes'),
        ]),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('results', [
            f('user', 'string'),
            f('error_code', 'int16'),
            f('error_message', 'string', nullable='0+'),
        ]),
    ],
)
