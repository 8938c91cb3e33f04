"""The per-partition settings storage acts on, separate from the broker's property parsing.

Storage does not read `server.properties` or topic overrides itself: the broker resolves them
(Kafka names such as `segment.bytes`, `retention.ms`) and hands each log one `LogConfig`. Keeping
the set small makes it obvious what a config change can affect in a running log, and lets the
storage tests build logs without a broker. Defaults are Kafka's.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LogConfig", "LONG_MAX", "CREATE_TIME", "LOG_APPEND_TIME"]

LONG_MAX = 2**63 - 1
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"


@dataclass(frozen=True)
class LogConfig:
    """Settings of one partition log; replace the whole object to change one (logs read it live).

    `retention_ms` / `retention_bytes` of -1 mean unlimited. `cleanup_policy` decides whether
    retention deletes segments at all: a compacted-only topic ("compact") keeps them, since its
    history is pruned by the cleaner instead. `file_delete_delay_ms` is how long a segment
    removed by retention stays on disk (renamed `.deleted`) so readers holding its file finish.
    The last four fields drive the log cleaner (`cleaner.py`) on "compact" topics: how long
    tombstones survive once cleaned, the dirty fraction that triggers a cleaning, and the
    youngest / oldest a record may be before it is left alone / cleaned regardless.
    """

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    retention_ms: int = 604800000
    retention_bytes: int = -1
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10485760
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    message_timestamp_type: str = CREATE_TIME
    max_message_bytes: int = 1048588
    file_delete_delay_ms: int = 60000
    cleanup_policy: str = "delete"
    delete_retention_ms: int = 86400000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    producer_id_expiration_ms: int = 86400000  # broker-wide producer.id.expiration.ms
    segment_jitter_ms: int = 0

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def delete_enabled(self) -> bool:
        """Whether retention may delete segments ("delete" or "compact,delete")."""
        return "delete" in self.cleanup_policy

    @property
    def compact_enabled(self) -> bool:
        """Whether the log cleaner compacts this log ("compact" or "compact,delete")."""
        return "compact" in self.cleanup_policy
