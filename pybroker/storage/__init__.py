"""Partition logs on disk, laid out like Kafka's.

    log_manager      all logs under log.dirs, checkpoints, clean-shutdown marker
    partition_log    one partition: append, read, roll, truncate, retention, offsets
    log_loader       opening a partition directory, recovery after a crash
    segment          one .log file with its .index, .timeindex and (optional) .txnindex
    batch_walk       reading a .log's batches in chunks (segment, cleaner)
    offset_index     offset -> file position, 8-byte entries
    time_index       timestamp -> offset, 12-byte entries
    leader_epoch_cache   leader-epoch-checkpoint, for OffsetForLeaderEpoch
    transaction_index    .txnindex: the aborted transactions whose marker is in a segment
    producer_state   idempotent producers' sequences, open transactions, snapshot files
    cleaner_manager  compaction's bookkeeping: what to clean next, cleaner checkpoints
    cleaner          compaction: the offset map, cleaned segments, the swap
    cleaned_transactions  what compaction knows of transactions (aborted data, markers)
    checkpoint       Kafka's text checkpoint files
    log_config       the settings storage acts on

Nothing here imports trio: blocking operations (fsync, recovery) are plain methods that the
server runs in worker threads.
"""
from pybroker.storage.log_config import LogConfig
from pybroker.storage.log_manager import LogManager
from pybroker.storage.partition_log import (
    AppendInfo, FetchData, MessageTooLarge, OffsetOutOfRange, PartitionLog,
    UnexpectedAppendOffset,
)
from pybroker.storage.producer_state import (
    DuplicateBatch, InvalidProducerEpoch, InvalidTxnState, OutOfOrderSequence,
    ProducerStateManager, TransactionCoordinatorFenced,
)

__all__ = [
    "LogConfig", "LogManager", "PartitionLog", "AppendInfo", "FetchData",
    "OffsetOutOfRange", "MessageTooLarge", "UnexpectedAppendOffset", "ProducerStateManager",
    "DuplicateBatch", "InvalidProducerEpoch", "OutOfOrderSequence", "InvalidTxnState",
    "TransactionCoordinatorFenced",
]
