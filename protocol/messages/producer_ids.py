"""Producer ids for idempotence and transactions, and their per-partition state."""
from protocol.messages.api import Api
from protocol.schema import f


INIT_PRODUCER_ID = Api(
    22, 'InitProducerId', versions='0-5', flexible='2+',
    request=[
        f('transactional_id', 'string', nullable='0+'),
        f('transaction_timeout_ms', 'int32'),
        f('producer_id', 'int64', '3+', default=-1),
        f('producer_epoch', 'int16', '3+', default=-1),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('error_code', 'int16'),
        f('producer_id', 'int64', default=-1),
        f('producer_epoch', 'int16'),
    ],
)

DESCRIBE_PRODUCERS = Api(
    61, 'DescribeProducers', versions='0', flexible='0+',
    request=[
        f('topics', [
            f('name', 'string'),
            f('partition_indexes', '[]int32'),
        ]),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('topics', [
            f('name', 'string'),
            f('partitions', [
                f('partition_index', 'int32'),
                f('error_code', 'int16'),
                f('error_message', 'string', nullable='0+', default=None),
                f('active_producers', [
                    f('producer_id', 'int64'),
                    f('producer_epoch', 'int32'),
                    f('last_sequence', 'int32', default=-1),
                    f('last_timestamp', 'int64', default=-1),
                    f('coordinator_epoch', 'int32'),
                    f('current_txn_start_offset', 'int64', default=-1),
                ]),
            ]),
        ]),
    ],
)
