"""ApiVersions: request and response."""
from protocol.messages.api import Api
from protocol.schema import f


API_VERSIONS = Api(
    18, 'ApiVersions', versions='0-4', flexible='3+',
    request=[
        f('client_software_name', 'string', '3+'),
        f('client_software_version', 'string', '3+'),
    ],
    response=[
        f('error_code', 'int16'),
        f('api_keys', [
            f('api_key', 'int16'),
            f('min_version', 'int16'),
            f('max_version', 'int16'),
        ]),
        f('throttle_time_ms', 'int32', '1+'),
        f('supported_features', [
            f('name', 'string', '3+'),
            f('min_version', 'int16', '3+'),
            f('max_version', 'int16', '3+'),
        ], '3+', tag=0),
        f('finalized_features_epoch', 'int64', '3+', tag=1, default=-1),
        f('finalized_features', [
            f('name', 'string', '3+'),
            f('max_version_level', 'int16', '3+'),
            f('min_version_level', 'int16', '3+'),
        ], '3+', tag=2),
        f('zk_migration_ready', 'bool', '3+', tag=3, default=False),
    ],
)
