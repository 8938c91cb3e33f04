"""ListOffsets: request and response."""
from protocol.messages.api import Api
from protocol.schema import f

# The special values of a partition's `timestamp`; any other value is a time in ms.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3            # v7+ (KIP-734): the record with the largest timestamp
EARLIEST_LOCAL_TIMESTAMP = -4  # v8+ (KIP-405): the first offset on local storage
LATEST_TIERED_TIMESTAMP = -5   # v9+ (KIP-1005): the last offset on tiered storage

LIST_OFFSETS = Api(
    2, 'ListOffsets', versions='1-9', flexible='6+',
    request=[
        f('replica_id', 'int32'),
        f('isolation_level', 'int8', '2+'),
        f('topics', [
            f('name', 'string'),
            f('partitions', [
                f('partition_index', 'int32'),
                f('current_leader_epoch', 'int32', '4+', default=-1),
                f('timestamp', 'int64'),
                f('max_num_offsets', 'int32', '0', default=1),
            ]),
        ]),
        f('timeout_ms', 'int32', '10+'),
    ],
    response=[
        f('throttle_time_ms', 'int32', '2+'),
        f('topics', [
            f('name', 'string'),
            f('partitions', [
                f('partition_index', 'int32'),
                f('error_code', 'int16'),
                f('old_style_offsets', '[]int64', '0'),
                f('timestamp', 'int64', '1+', default=-1),
                f('offset', 'int64', '1+', default=-1),
                f('leader_epoch', 'int32', '4+', default=-1),
            ]),
        ]),
    ],
)
