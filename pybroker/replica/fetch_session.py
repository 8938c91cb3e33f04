"""Incremental fetch sessions (KIP-227): Kafka's FetchSession, FetchSessionCache, FetchManager.

Theory of operation. A fetcher that asks for the same thousand partitions every few hundred
milliseconds spends most of each round trip saying, and hearing, that nothing changed. With a
session the broker remembers what the fetcher asked for (fetch offset, max bytes, leader epoch
per partition) and what it last answered (high watermark, last stable offset, log start
offset); the fetcher then sends only the partitions whose request changed, and the broker
answers only the partitions with something new: records, a moved watermark or log start, an
error, a diverging epoch, a preferred read replica. Both sides keep the rest.

A request names its session by (`session_id`, `session_epoch`):

| session_id | epoch | what it is                                                      |
|------------|-------|-----------------------------------------------------------------|
| 0          | -1    | sessionless: a full fetch, answered in full, nothing kept       |
| 0          | 0     | full: answered in full, and a new session is created if the     |
|            |       | cache has (or can make) room; the answer names it (or says 0)  |
| n          | 0     | full: session n is closed first, then as above                  |
| n          | -1    | session n is closed; answered in full, sessionless              |
| n          | e > 0 | incremental: n must exist (FETCH_SESSION_ID_NOT_FOUND) at epoch |
|            |       | e (INVALID_FETCH_SESSION_EPOCH), with the same topic-id usage   |
|            |       | (FETCH_SESSION_TOPIC_ID_ERROR); its partitions are updated from |
|            |       | the request, `forgotten_topics_data` removed, the epoch moves   |
|            |       | on, and the answer carries only the partitions that changed     |

An incremental request that leaves the session empty closes it (answered sessionless). The
epoch after 2**31-1 is 1. A session error answers with no partitions and session id 0.

The cache holds `max.incremental.fetch.session.cache.slots` sessions. When it is full a new
session gets a slot only by evicting one (KIP-227, as Kafka's FetchSessionCache): first any
session unused for EVICTION_MS (stale); else the least valuable evictable one, valued by
(privileged, partitions, id) — a follower's session (privileged) outranks a consumer's, a
larger one a smaller one — and only if the newcomer is worth more (a tie keeps it). A session is
evictable by a consumer's newcomer only once older than EVICTION_MS; a consumer's session
is evictable by a follower's newcomer at any age. Evictability and size are taken when the
session is touched (created or used), as Kafka takes them. With no slot the full fetch is
answered with session id 0 and the client goes on without a session.

Within a session, partitions answered with records move to the end of its order, so with a
small `max_bytes` the next fetch starts with the partitions that got nothing (Kafka's
fairness rule). Records are never looked at, only their length.

Pure: no trio, no I/O; time comes in as `now_ms`. The Fetch handler is the façade: it asks
`new_context` what to read, reads it, and hands the answer to the context's `finish`.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from protocol.errors import ErrorCode
from protocol.fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch

__all__ = ["EVICTION_MS", "FINAL_EPOCH", "INITIAL_EPOCH", "INVALID_SESSION_ID",
           "CachedPartition", "FetchContext", "FetchSession", "FetchSessionCache",
           "FetchTopic", "next_epoch"]

# Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS (not a config key in Kafka either).
EVICTION_MS = 120_000
_INT32_MAX = 0x7FFFFFFF


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session: what the fetcher last asked (read like a request's
    partition entry, with the same field names) and what the broker last answered."""

    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1  # the fetcher's (a follower's) log start, as it sent it
    # What the last answer carried; -1 until answered, and again after an error, so that the
    # partition is answered again once the error clears.
    high_watermark: int = -1
    last_stable_offset: int = -1
    local_log_start_offset: int = -1

    def get(self, name: str, default: Any = None) -> Any:
        """As a decoded request entry's `get` (a field a version lacks), so the handler
        reads session and request partitions alike, without an exception per partition."""
        return getattr(self, name, default)

    def update_request(self, p: Any) -> None:
        self.fetch_offset = p.fetch_offset
        self.partition_max_bytes = p.partition_max_bytes
        self.current_leader_epoch = getattr(p, "current_leader_epoch", -1)
        self.last_fetched_epoch = getattr(p, "last_fetched_epoch", -1)
        self.log_start_offset = getattr(p, "log_start_offset", -1)

    def must_answer(self, entry: dict, update: bool) -> bool:
        """Whether this partition's answer `entry` says something the fetcher does not know
        (Kafka's CachedPartition.maybeUpdateResponseData); with `update`, remember it."""
        answer = len(entry["records"] or b"") > 0
        hwm = entry["high_watermark"]
        lso = entry.get("last_stable_offset", -1)
        log_start = entry.get("log_start_offset", -1)
        if hwm != self.high_watermark or lso != self.last_stable_offset \
                or log_start != self.local_log_start_offset:
            answer = True
            if update:
                self.high_watermark, self.last_stable_offset = hwm, lso
                self.local_log_start_offset = log_start
        if entry["error_code"]:
            answer = True
            if update:
                self.high_watermark = -1
        return answer or entry.get("preferred_read_replica", -1) >= 0 \
            or "diverging_epoch" in entry


def _cached(topic: str, p: Any) -> CachedPartition:
    cached = CachedPartition(topic, p.partition, p.fetch_offset, p.partition_max_bytes)
    cached.update_request(p)
    return cached


@dataclass(frozen=True, slots=True)
class FetchTopic:
    """A topic's partitions to read, shaped like a request's topic entry."""

    topic: str
    partitions: Sequence[Any]


@dataclass(eq=False)
class FetchSession:
    id: int
    privileged: bool  # a follower's: outranks consumers' sessions in eviction
    uses_topic_ids: bool  # created by Fetch v13+ (topic ids instead of names)
    creation_ms: int
    last_used_ms: int
    epoch: int
    partitions: dict[tuple[str, int], CachedPartition] = field(default_factory=dict)
    # Taken at the last touch (Kafka's cachedSize and evictable keys).
    cached_size: int = -1
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False

    def update(self, topics: Iterable[Any], forgotten: Iterable[Any]) -> None:
        parts = self.partitions
        for t in topics:
            for p in t.partitions:
                cached = parts.get((t.topic, p.partition))
                if cached is None:
                    parts[(t.topic, p.partition)] = _cached(t.topic, p)
                else:
                    cached.update_request(p)
        for t in forgotten:
            for index in t.partitions:
                parts.pop((t.topic, index), None)

    def fetch_topics(self) -> list[FetchTopic]:
        """The session's partitions in its order, consecutive ones of a topic together."""
        topics: list[FetchTopic] = []
        current: list[CachedPartition] = []
        name: str | None = None
        for cached in self.partitions.values():
            if cached.topic != name:
                if current:  # so name is a topic's, set with current below
                    topics.append(FetchTopic(name, current))  # type: ignore[arg-type]
                name, current = cached.topic, []
            current.append(cached)
        if current:  # so name is a topic's
            topics.append(FetchTopic(name, current))  # type: ignore[arg-type]
        return topics


class FetchSessionCache:
    """The broker's sessions, at most `max_entries` (max.incremental.fetch.session.cache.slots);
    `clock` is the broker's timers' clock, so a test can age sessions past EVICTION_MS."""

    def __init__(self, max_entries: int, eviction_ms: int = EVICTION_MS,
                 clock: Callable[[], int] | None = None,
                 rng: random.Random | None = None) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.now_ms: Callable[[], int] = clock or (lambda: int(time.time() * 1000))
        self._rng = rng or random.Random()
        self.sessions: dict[int, FetchSession] = {}
        self.total_partitions = 0  # Kafka's NumIncrementalFetchPartitionsCached
        self.evictions = 0  # Kafka's IncrementalFetchSessionEvictionsPerSec, as a count
        self.incremental_fetches = 0  # incremental requests served (no session error)

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def _new_id(self) -> int:
        while True:
            sid = self._rng.randint(1, _INT32_MAX - 1)
            if sid not in self.sessions:
                return sid

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None and session.cached_size >= 0:
            self.total_partitions -= session.cached_size
        return session

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """Mark `session` used now, and take its size and evictability as they are now."""
        session.last_used_ms = now_ms
        if session.cached_size >= 0:
            self.total_partitions -= session.cached_size
        session.cached_size = len(session.partitions)
        self.total_partitions += session.cached_size
        old = now_ms - session.creation_ms > self.eviction_ms
        session.evictable_by_all = old
        session.evictable_by_privileged = old or not session.privileged

    def try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        """Make room for a new session of `size` partitions, if the rules allow."""
        if not self.sessions:
            return False
        stalest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stalest.last_used_ms > self.eviction_ms:
            self.remove(stalest.id)
            self.evictions += 1
            return True
        candidates = [s for s in self.sessions.values()
                      if (s.evictable_by_privileged if privileged else s.evictable_by_all)]
        if not candidates:
            return False
        least = min(candidates, key=lambda s: (s.privileged, s.cached_size, s.id))
        # The newcomer's key has id 0, below every session's: a tie on (privileged, size)
        # keeps the incumbent.
        if (privileged, size, 0) < (least.privileged, least.cached_size, least.id):
            return False
        self.remove(least.id)
        self.evictions += 1
        return True

    def maybe_create(self, privileged: bool, uses_topic_ids: bool,
                     partitions: dict[tuple[str, int], CachedPartition], now_ms: int) -> int:
        """A new session holding `partitions`; its id, or INVALID_SESSION_ID without room."""
        if len(self.sessions) >= self.max_entries \
                and not self.try_evict(privileged, len(partitions), now_ms):
            return INVALID_SESSION_ID
        session = FetchSession(self._new_id(), privileged, uses_topic_ids, now_ms, now_ms,
                               next_epoch(INITIAL_EPOCH), partitions)
        self.sessions[session.id] = session
        self.touch(session, now_ms)
        return session.id

    def new_context(self, session_id: int, epoch: int, topics: Sequence[Any],
                    forgotten: Sequence[Any], *, privileged: bool, uses_topic_ids: bool,
                    now_ms: int) -> "FetchContext":
        """What a Fetch request reads and how it is answered (Kafka's FetchManager.newContext).
        `topics` and `forgotten` are the request's entries (`.topic`, `.partitions`)."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)  # a full request closes the session it names
            if epoch == FINAL_EPOCH or self.max_entries <= 0:
                return FetchContext(self, topics)
            return FetchContext(self, topics, full=True, privileged=privileged,
                                uses_topic_ids=uses_topic_ids)
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext(self, (), error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext(self, (), error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            return FetchContext(self, (), error=ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        session.update(topics, forgotten)
        if not session.partitions:
            self.remove(session.id)
            return FetchContext(self, topics)
        self.touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        self.incremental_fetches += 1
        return FetchContext(self, session.fetch_topics(), session=session)


class FetchContext:
    """One request's view of its session: `topics` to read, then `finish` (or `throttled`)
    for the answer's top-level error, session id and partitions."""

    __slots__ = ("cache", "topics", "error", "full", "privileged", "uses_topic_ids",
                 "session", "expected_epoch")

    def __init__(self, cache: FetchSessionCache, topics: Sequence[Any], *,
                 error: ErrorCode = ErrorCode.NONE, full: bool = False,
                 privileged: bool = False, uses_topic_ids: bool = False,
                 session: FetchSession | None = None) -> None:
        self.cache = cache
        self.topics = topics
        self.error = error
        self.full = full
        self.privileged = privileged
        self.uses_topic_ids = uses_topic_ids
        self.session = session
        self.expected_epoch = session.epoch if session is not None else 0

    @property
    def incremental(self) -> bool:
        return self.session is not None

    def _raced(self) -> bool:
        """Another request of the same session moved its epoch while this one waited (a
        session evicted meanwhile still answers this request, as Kafka's does; the next
        one finds it gone)."""
        session = self.session
        return session is not None and session.epoch != self.expected_epoch

    def finish(self, responses: list[dict], now_ms: int) -> tuple[ErrorCode, int, list[dict]]:
        """The answer for `responses` (one entry per topic read, in `topics` order): a full
        fetch creates its session here, as Kafka does once the answer is known; an
        incremental one keeps only the partitions with news and remembers what it said."""
        if self.error:
            return self.error, INVALID_SESSION_ID, []
        session = self.session
        if session is None:
            if not self.full:
                return ErrorCode.NONE, INVALID_SESSION_ID, responses
            partitions: dict[tuple[str, int], CachedPartition] = {}
            for topic, response in zip(self.topics, responses):
                for p, entry in zip(topic.partitions, response["partitions"]):
                    cached = _cached(topic.topic, p)
                    cached.must_answer(entry, True)
                    partitions[(topic.topic, p.partition)] = cached
            sid = self.cache.maybe_create(self.privileged, self.uses_topic_ids, partitions,
                                          now_ms)
            return ErrorCode.NONE, sid, responses
        if self._raced():
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id, []
        answered: list[dict] = []
        to_end: list[CachedPartition] = []
        for topic, response in zip(self.topics, responses):
            kept = []
            for cached, entry in zip(topic.partitions, response["partitions"]):
                if cached.must_answer(entry, True):
                    kept.append(entry)
                    if entry["records"]:
                        to_end.append(cached)
            if kept:
                answered.append({**response, "partitions": kept})
        parts = session.partitions
        for cached in to_end:  # answered with records: last in the next round's order
            key = (cached.topic, cached.partition)
            del parts[key]
            parts[key] = cached
        return ErrorCode.NONE, session.id, answered

    def throttled(self) -> tuple[ErrorCode, int]:
        """A throttled answer (no partitions): its error and session id. Nothing is
        remembered, so the next fetch answers what this one would have."""
        if self.error:
            return self.error, INVALID_SESSION_ID
        if self.session is None:
            return ErrorCode.NONE, INVALID_SESSION_ID
        if self._raced():
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH, self.session.id
        return ErrorCode.NONE, self.session.id
