"""Broker and topic configuration: describe and alter."""
from protocol.messages.api import Api
from protocol.schema import f


DESCRIBE_CONFIGS = Api(
    32, 'DescribeConfigs', versions='1-4', flexible='4+',
    request=[
        f('resources', [
            f('resource_type', 'int8'),
            f('resource_name', 'string'),
            f('configuration_keys', '[]string', nullable='0+'),
        ]),
        f('include_synonyms', 'bool', '1+', default=False),
        f('include_documentation', 'bool', '3+', default=False),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('results', [
            f('error_code', 'int16'),
            f('error_message', 'string', nullable='0+'),
            f('resource_type', 'int8'),
            f('resource_name', 'string'),
            f('configs', [
                f('name', 'string'),
                f('value', 'string', nullable='0+'),
                f('read_only', 'bool'),
                f('is_default', 'bool', '0'),
                f('config_source', 'int8', '1+', default=-1),
                f('is_sensitive', 'bool'),
                f('synonyms', [
                    f('name', 'string', '1+'),
                    f('value', 'string', '1+', nullable='0+'),
                    f('source', 'int8', '1+'),
                ], '1+'),
                f('config_type', 'int8', '3+', default=0),
                f('documentation', 'string', '3+', nullable='0+'),
            ]),
        ]),
    ],
)

ALTER_CONFIGS = Api(
    33, 'AlterConfigs', versions='0-2', flexible='2+',
    request=[
        f('resources', [
            f('resource_type', 'int8'),
            f('resource_name', 'string'),
            f('configs', [
                f('name', 'string'),
                f('value', 'string', nullable='0+'),
            ]),
        ]),
        f('validate_only', 'bool'),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('responses', [
            f('error_code', 'int16'),
            f('error_message', 'string', nullable='0+'),
            f('resource_type', 'int8'),
            f('resource_name', 'string'),
        ]),
    ],
)

INCREMENTAL_ALTER_CONFIGS = Api(
    44, 'IncrementalAlterConfigs', versions='0-1', flexible='1+',
    request=[
        f('resources', [
            f('resource_type', 'int8'),
            f('resource_name', 'string'),
            f('configs', [
                f('name', 'string'),
                f('config_operation', 'int8'),
                f('value', 'string', nullable='0+'),
            ]),
        ]),
        f('validate_only', 'bool'),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('responses', [
            f('error_code', 'int16'),
            f('error_message', 'string', nullable='0+'),
            f('resource_type', 'int8'),
            f('resource_name', 'string'),
        ]),
    ],
)

# Kafka 4.1 (KIP-1142): ListClientMetricsResources (v0) renamed; v1 lists the resources of
# any config type, and names each one's type.
LIST_CONFIG_RESOURCES = Api(
    74, 'ListConfigResources', versions='0-1', flexible='0+',
    request=[
        f('resource_types', '[]int8', '1+'),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('error_code', 'int16'),
        f('config_resources', [
            f('resource_name', 'string'),
            f('resource_type', 'int8', '1+', default=16),
        ]),
    ],
)
