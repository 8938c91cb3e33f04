"""UpdateFeatures (KIP-584): `kafka-features.sh upgrade|downgrade`."""
from protocol.messages.api import Api
from protocol.schema import f


UPDATE_FEATURES = Api(
    57, 'UpdateFeatures', versions='0-2', flexible='0+',
    request=[
        f('timeout_ms', 'int32', default=60000),
        f('feature_updates', [
            f('feature', 'string'),
            f('max_version_level', 'int16'),
            f('allow_downgrade', 'bool', '0'),
            f('upgrade_type', 'int8', '1+', default=1),
        ]),
        f('validate_only', 'bool', '1+', default=False),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+'),
        f('results', [
            f('feature', 'string'),
            f('error_code', 'int16'),
            f('error_message', 'string', nullable='0+'),
        ], '0-1'),
    ],
)
