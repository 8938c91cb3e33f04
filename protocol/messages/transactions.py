"""Transactions: partitions and offsets joining a transaction, its end, markers, listing."""
from protocol.messages.api import Api
from protocol.schema import f


ADD_PARTITIONS_TO_TXN = Api(
    24, 'AddPartitionsToTxn', versions='0-4', flexible='3+',
    request=[
        f('transactions', [
            f('transactional_id', 'string', '4+'),
            f('producer_id', 'int64', '4+'),
            f('producer_epoch', 'int16', '4+'),
            f('verify_only', 'bool', '4+', default=False),
            f('topics', [
                f('name', 'string'),
                f('partitions', '[]int32'),
            ], '4+'),
        ], '4+'),
        f('v3_and_below_transactional_id', 'string', '0-3'),
        f('v3_and_below_producer_id', 'int64', '0-3'),
        f('v3_and_below_producer_epoch', 'int16', '0-3'),
        f('v3_and_below_topics', [
            f('name', 'string'),
            f('partitions', '[]int32'),
        ], '0-3'),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('error_code', 'int16', '4+'),
        f('results_by_transaction', [
            f('transactional_id', 'string', '4+'),
            f('topic_results', [
                f('name', 'string'),
                f('results_by_partition', [
                    f('partition_index', 'int32'),
                    f('partition_error_code', 'int16'),
                ]),
            ], '4+'),
        ], '4+'),
        f('results_by_topic_v3_and_below', [
            f('name', 'string'),
            f('results_by_partition', [
                f('partition_index', 'int32'),
                f('partition_error_code', 'int16'),
            ]),
        ], '0-3'),
    ],
)

ADD_OFFSETS_TO_TXN = Api(
    25, 'AddOffsetsToTxn', versions='0-4', flexible='3+',
    request=[
        f('transactional_id', 'string'),
        f('producer_id', 'int64'),
        f('producer_epoch', 'int16'),
        f('group_id', 'string'),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('error_code', 'int16'),
    ],
)

END_TXN = Api(
    26, 'EndTxn', versions='0-4', flexible='3+',
    request=[
        f('transactional_id', 'string'),
        f('producer_id', 'int64'),
        f('producer_epoch', 'int16'),
        f('committed', 'bool'),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('error_code', 'int16'),
        f('producer_id', 'int64', '5+', default=-1),
        f('producer_epoch', 'int16', '5+', default=-1),
    ],
)

TXN_OFFSET_COMMIT = Api(
    28, 'TxnOffsetCommit', versions='0-4', flexible='3+',
    request=[
        f('transactional_id', 'string'),
        f('group_id', 'string'),
        f('producer_id', 'int64'),
        f('producer_epoch', 'int16'),
        f('generation_id', 'int32', '3+', default=-1),
        f('member_id', 'string', '3+', default=''),
        f('group_instance_id', 'string', '3+', nullable='3+', default=None),
        f('topics', [
            f('name', 'string'),
            f('partitions', [
                f('partition_index', 'int32'),
                f('committed_offset', 'int64'),
                f('committed_leader_epoch', 'int32', '2+', default=-1),
                f('committed_metadata', 'string', nullable='0+'),
            ]),
        ]),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('topics', [
            f('name', 'string'),
            f('partitions', [
                f('partition_index', 'int32'),
                f('error_code', 'int16'),
            ]),
        ]),
    ],
)

WRITE_TXN_MARKERS = Api(
    27, 'WriteTxnMarkers', versions='1', flexible='1+',
    request=[
        f('markers', [
            f('producer_id', 'int64'),
            f('producer_epoch', 'int16'),
            f('transaction_result', 'bool'),
            f('topics', [
                f('name', 'string'),
                f('partition_indexes', '[]int32'),
            ]),
            f('coordinator_epoch', 'int32'),
        ]),
    ],
    response=[
        f('markers', [
            f('producer_id', 'int64'),
            f('topics', [
                f('name', 'string'),
                f('partitions', [
                    f('partition_index', 'int32'),
                    f('error_code', 'int16'),
                ]),
            ]),
        ]),
    ],
)

DESCRIBE_TRANSACTIONS = Api(
    65, 'DescribeTransactions', versions='0', flexible='0+',
    request=[
        f('transactional_ids', '[]string'),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('transaction_states', [
            f('error_code', 'int16'),
            f('transactional_id', 'string'),
            f('transaction_state', 'string'),
            f('transaction_timeout_ms', 'int32'),
            f('transaction_start_time_ms', 'int64'),
            f('producer_id', 'int64'),
            f('producer_epoch', 'int16'),
            f('topics', [
                f('topic', 'string'),
                f('partitions', '[]int32'),
            ]),
        ]),
    ],
)

LIST_TRANSACTIONS = Api(
    66, 'ListTransactions', versions='0-1', flexible='0+',
    request=[
        f('state_filters', '[]string'),
        f('producer_id_filters', '[]int64'),
        f('duration_filter', 'int64', '1+', default=-1),
    ],
    response=[
        f('throttle_time_ms', 'int32'),
        f('error_code', 'int16'),
        f('unknown_state_filters', '[]string'),
        f('transaction_states', [
            f('transactional_id', 'string'),
            f('producer_id', 'int64'),
            f('transaction_state', 'string'),
        ]),
    ],
)
