"""Produce: request and response."""
from protocol.messages.api import Api
from protocol.schema import f, struct


PRODUCE = Api(
    0, 'Produce', versions='0-11', flexible='9+',
    request=[
        f('transactional_id', 'string', '3+', nullable='3+', default=None),
        f('acks', 'int16'),
        f('timeout_ms', 'int32'),
        f('topic_data', [
            f('name', 'string'),
            f('partition_data', [
                f('index', 'int32'),
                f('records', 'records', nullable='0+'),
            ]),
        ]),
    ],
    response=[
        f('responses', [
            f('name', 'string'),
            f('partition_responses', [
                f('index', 'int32'),
                f('error_code', 'int16'),
                f('base_offset', 'int64'),
                f('log_append_time_ms', 'int64', '2+', default=-1),
                f('log_start_offset', 'int64', '5+', default=-1),
                f('record_errors', [
                    f('batch_index', 'int32', '8+'),
                    f('batch_index_error_message', 'string', '8+', nullable='8+', default=None),
                ], '8+'),
                f('error_message', 'string', '8+', nullable='8+', default=None),
                f('current_leader', struct([
                    f('leader_id', 'int32', '10+', default=-1),
                    f('leader_epoch', 'int32', '10+', default=-1),
                ]), '10+', tag=0),
            ]),
        ]),
        f('throttle_time_ms', 'int32', '1+', default=0),
        f('node_endpoints', [
            f('node_id', 'int32', '10+'),
            f('host', 'string', '10+'),
            f('port', 'int32', '10+'),
            f('rack', 'string', '10+', nullable='10+', default=None),
        ], '10+', tag=0),
    ],
)
