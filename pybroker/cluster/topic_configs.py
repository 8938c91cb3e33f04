"""Each topic's effective configuration: its overrides in the metadata over the broker's
defaults, resolved once and cached until the topic's configs change.

The replica manager asks it on every produce (max.message.bytes, min.insync.replicas, ...),
the log manager for every log it opens, so resolving Kafka's synonym chains each time would
cost; `invalidate` is called by whoever changes a topic's configs (or deletes the topic).
"""
from __future__ import annotations

from pybroker.cluster.metadata import MetadataDelta, MetadataImage, MetadataStore
from pybroker.config import BrokerConfig, TopicConfig, resolve_topic_config
from pybroker.storage.log_config import LogConfig

__all__ = ["TopicConfigs"]


class TopicConfigs:
    def __init__(self, config: BrokerConfig, metadata: MetadataStore) -> None:
        self.config = config
        self.metadata = metadata
        self._cache: dict[str, TopicConfig] = {}
        # The LogConfig of each topic, one (frozen) object shared by its partitions: a start
        # with 1,000 partitions on disk built 1,000 (issue #15 §3).
        self._log_cache: dict[str, LogConfig] = {}

    def topic_config(self, topic: str) -> TopicConfig:
        cached = self._cache.get(topic)
        if cached is None:
            info = self.metadata.image.topics.get(topic)
            cached = resolve_topic_config(self.config, info.configs if info else {})
            self._cache[topic] = cached
        return cached

    def invalidate(self, topic: str) -> None:
        self._cache.pop(topic, None)
        self._log_cache.pop(topic, None)

    def invalidate_all(self) -> None:
        """The broker's defaults changed (a dynamic broker config): every topic resolves
        again."""
        self._cache.clear()
        self._log_cache.clear()

    def log_config(self, topic: str) -> LogConfig:
        """What the topic's logs need of its configuration (storage knows no TopicConfig)."""
        cached = self._log_cache.get(topic)
        if cached is None:
            cached = self._log_cache[topic] = self._log_config(self.topic_config(topic))
        return cached

    def _log_config(self, tc: TopicConfig) -> LogConfig:
        return LogConfig(
            segment_bytes=tc.segment_bytes, segment_ms=tc.max_segment_ms,
            retention_ms=tc.retention_ms, retention_bytes=tc.retention_bytes,
            index_interval_bytes=tc.index_interval_bytes,
            segment_index_bytes=tc.segment_index_bytes,
            flush_messages=tc.flush_messages, flush_ms=tc.flush_ms,
            message_timestamp_type=tc.message_timestamp_type,
            max_message_bytes=tc.max_message_bytes,
            file_delete_delay_ms=tc.file_delete_delay_ms,
            cleanup_policy=",".join(sorted(tc.cleanup_policy)),
            delete_retention_ms=tc.delete_retention_ms,
            min_cleanable_dirty_ratio=tc.min_cleanable_dirty_ratio,
            min_compaction_lag_ms=tc.min_compaction_lag_ms,
            max_compaction_lag_ms=tc.max_compaction_lag_ms,
            producer_id_expiration_ms=self.config.producer_id_expiration_ms,
            segment_jitter_ms=tc.segment_jitter_ms)

    async def apply_delta(self, image: MetadataImage, delta: MetadataDelta) -> None:
        """A store listener, first in line: forget what the change made stale."""
        for topic in (*delta.created_topics, *delta.deleted_topics, *delta.changed_configs):
            self.invalidate(topic)
