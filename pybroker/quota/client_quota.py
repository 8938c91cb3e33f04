"""Enforcing client quotas: rates per window, and how long a client that went over waits.

Theory of operation (Kafka's ClientQuotaManager over its metrics' Rate and SampledStat).
Each quota type (produce bytes, fetch bytes) keeps one rate per (user, client id) that a quota
is counted against (`client_quotas.quota_for` says which). A rate is a sum over
`quota.window.num` samples of `quota.window.size.seconds` each, divided by the time they
span (at least num-1 full windows, so a fresh client is not judged on its first
millisecond). Recording a value that takes the rate over the bound answers the throttle time
Kafka answers: `(rate - bound) / bound * window`, the time after which, with nothing more
recorded, the rate is back at the bound. The caller answers with that `throttle_time_ms` and
stops reading the connection for as long (connection.py), as Kafka mutes the channel.

The request quota (`request_percentage`, Kafka's ClientRequestQuotaManager) is the same rate
over time instead of bytes: each request's share of the event loop, recorded as percent-seconds
(1 ms of loop time is 0.1), so a rate of 100 is one thread's worth of time every second. Its
throttle is bounded by one window, as Kafka bounds it (QuotaUtils.boundedThrottleTime); who
measures the time is request_quota.py.

The controller mutation quota (`controller_mutation_rate`, KIP-599, Kafka's
ControllerMutationQuotaManager) is a token bucket instead of a rate: partitions created or
deleted per second. The bucket holds at most `controller.quota.window.num` ×
`controller.quota.window.size.seconds` × quota credits (a new client starts full), refills at
the quota's rate and may go below zero: a mutation is admitted while credits are at zero or
above, and takes its partitions' worth. Each request gets a `MutationQuota`: strict
(CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+) refuses a topic's mutation once
the credits are below zero (THROTTLING_QUOTA_EXCEEDED); permissive (older versions, whose
clients know no such error) admits every mutation. Either way the throttle is the time the
bucket needs to come back to zero, `-credits / quota` seconds.

Pure: time is passed in (milliseconds, the caller's monotonic clock), no trio, no I/O.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

from pybroker.cluster.client_quotas import (
    ANONYMOUS, CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE, QuotaEntity, quota_for,
)

# Kafka's InactiveSensorExpirationTimeSeconds: a client's rate is forgotten after an hour.
INACTIVE_EXPIRY_MS = 3600 * 1000


class Rate:
    """A windowed rate: `samples` buckets of `window_ms`, the oldest reused (SampledStat).

    The time it divides by is the time its samples span, stretched to num-1 full windows
    (Kafka's Rate), or, `simple`, to one window (Kafka's SimpleRate, which the replication
    quotas use, so that a throttle bites from the first second of a reassignment)."""

    __slots__ = ("samples", "window_ms", "simple", "_buckets", "last_used_ms")

    def __init__(self, samples: int, window_ms: int, *, simple: bool = False) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self.simple = simple
        self._buckets: list[list[float]] = []  # [start_ms, value]
        self.last_used_ms = 0.0

    def record(self, value: float, now_ms: float) -> None:
        self.last_used_ms = now_ms
        self._purge(now_ms)
        if not self._buckets or now_ms >= self._buckets[-1][0] + self.window_ms:
            if len(self._buckets) >= self.samples:
                self._buckets.pop(0)
            self._buckets.append([now_ms, 0.0])
        self._buckets[-1][1] += value

    def _purge(self, now_ms: float) -> None:
        expire = self.samples * self.window_ms
        self._buckets = [b for b in self._buckets if now_ms - b[0] < expire]

    def window(self, now_ms: float) -> float:
        """The time the rate is measured over (Rate.windowSize), in ms."""
        self._purge(now_ms)
        oldest = self._buckets[0][0] if self._buckets else now_ms
        elapsed = now_ms - oldest
        if self.simple:
            return max(elapsed, float(self.window_ms))
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1.0)

    def per_second(self, now_ms: float) -> float:
        total = sum(b[1] for b in self._buckets if now_ms - b[0] < self.samples * self.window_ms)
        return total / (self.window(now_ms) / 1000.0)


class ClientQuotaManager:
    """One quota type's rates and throttle decisions (Kafka's ClientQuotaManager for
    Produce or Fetch)."""

    def __init__(self, key: str, quotas: Callable[[], Mapping[QuotaEntity, Mapping[str, float]]],
                 *, samples: int = 11, window_s: int = 1,
                 max_throttle_ms: int | None = None) -> None:
        self.key = key
        self._quotas = quotas
        self.samples = samples
        self.window_ms = window_s * 1000
        self.max_throttle_ms = max_throttle_ms
        self._rates: dict[tuple[str, str], Rate] = {}
        self._next_expiry_ms = 0.0
        self._enabled_for: object = None
        self._enabled = False

    def enabled(self) -> bool:
        """Whether any entity has a quota of this type (Kafka's quotasEnabled): without one,
        nothing is measured. Recomputed only when the quotas mapping is a new one (the
        metadata image replaces it on every change)."""
        quotas = self._quotas()
        if quotas is not self._enabled_for:
            self._enabled_for = quotas
            self._enabled = any(self.key in values for values in quotas.values())
        return self._enabled

    def _rate(self, tags: tuple[str, str], now_ms: float) -> Rate:
        if now_ms >= self._next_expiry_ms:
            self._next_expiry_ms = now_ms + 60_000
            self._rates = {t: r for t, r in self._rates.items()
                           if now_ms - r.last_used_ms < INACTIVE_EXPIRY_MS}
        rate = self._rates.get(tags)
        if rate is None:
            rate = self._rates[tags] = Rate(self.samples, self.window_ms)
        return rate

    def record(self, client_id: str, value: float, now_ms: float,
               user: str = ANONYMOUS) -> int:
        """Count `value` for this client; the throttle time in ms (0 within its quota, or
        when no quota applies)."""
        found = quota_for(self._quotas(), self.key, user, client_id)
        if found is None:
            return 0
        bound, tags = found
        rate = self._rate(tags, now_ms)
        rate.record(value, now_ms)
        measured = rate.per_second(now_ms)
        if measured <= bound:
            return 0
        throttle = round((measured - bound) / bound * rate.window(now_ms))
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        return throttle

    def unrecord(self, client_id: str, value: float, now_ms: float,
                 user: str = ANONYMOUS) -> None:
        """Take back a value recorded for a response that was not sent (a throttled fetch
        answers empty), as Kafka records its negative."""
        found = quota_for(self._quotas(), self.key, user, client_id)
        if found is not None:
            self._rate(found[1], now_ms).record(-value, now_ms)

    def max_value_in_window(self, client_id: str, user: str = ANONYMOUS) -> float | None:
        """The most one response may carry without being throttled on its own
        (getMaxValueInQuotaWindow); None without a quota."""
        found = quota_for(self._quotas(), self.key, user, client_id)
        if found is None:
            return None
        return found[0] * (self.samples - 1) * self.window_ms / 1000


class TokenBucket:
    """Credits for partition mutations (Kafka's TokenBucket stat): refilled at `quota` per
    second up to `burst`, taken by each mutation, possibly below zero."""

    __slots__ = ("credits", "last_ms")

    def __init__(self) -> None:
        self.credits = 0.0
        self.last_ms: float | None = None  # never used: full at the first look

    def measure(self, quota: float, burst: float, now_ms: float) -> float:
        if self.last_ms is None:
            self.credits = burst
        else:
            self.credits = min(burst, self.credits + quota * (now_ms - self.last_ms) / 1000)
        self.last_ms = max(now_ms, self.last_ms or now_ms)
        return self.credits

    def take(self, value: float, quota: float, burst: float, now_ms: float) -> None:
        self.credits = min(burst, self.measure(quota, burst, now_ms) - value)


class MutationQuota:
    """One CreateTopics / CreatePartitions / DeleteTopics request's view of its client's
    bucket (Kafka's Strict- and PermissiveControllerMutationQuota). Without a quota every
    mutation is admitted and nothing is counted."""

    def __init__(self, bucket: TokenBucket | None, quota: float, burst: float,
                 strict: bool) -> None:
        self._bucket = bucket
        self._quota = quota
        self._burst = burst
        self.strict = strict
        self.throttle_ms = 0

    def admit(self, partitions: int, now_ms: float) -> bool:
        """Whether a topic's mutation of `partitions` may go ahead, counting it if so.
        False (strict only): the client is over its quota; the throttle says for how long."""
        bucket = self._bucket
        if bucket is None:
            return True
        if self.strict:
            credits = bucket.measure(self._quota, self._burst, now_ms)
            if credits < 0:
                self.throttle_ms = self._throttle(credits)
                return False
        bucket.take(partitions, self._quota, self._burst, now_ms)
        if not self.strict:
            credits = bucket.measure(self._quota, self._burst, now_ms)
            self.throttle_ms = max(self.throttle_ms, self._throttle(credits))
        return True

    def _throttle(self, credits: float) -> int:
        return round(-credits / self._quota * 1000) if credits < 0 else 0


class ControllerMutationQuotaManager:
    """The buckets of the clients with a controller_mutation_rate, by the (user, client)
    each quota is counted against."""

    def __init__(self, quotas: Callable[[], Mapping[QuotaEntity, Mapping[str, float]]], *,
                 samples: int = 11, window_s: int = 1) -> None:
        self._quotas = quotas
        self.burst_s = samples * window_s
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    def new_quota(self, client_id: str, user: str, strict: bool, now_ms: float
                  ) -> MutationQuota:
        found = quota_for(self._quotas(), CONTROLLER_MUTATION_RATE, user, client_id)
        if found is None:
            return MutationQuota(None, 0.0, 0.0, strict)
        quota, tags = found
        # Buckets unused for an hour are forgotten (Kafka's inactive sensor expiry); a
        # forgotten bucket would have refilled to its burst anyway.
        self._buckets = {t: b for t, b in self._buckets.items()
                         if b.last_ms is None or now_ms - b.last_ms < INACTIVE_EXPIRY_MS}
        bucket = self._buckets.setdefault(tags, TokenBucket())
        return MutationQuota(bucket, quota, quota * self.burst_s, strict)


class ClientQuotas:
    """The broker's quota managers, reading the quotas of the current metadata image."""

    def __init__(self, quotas: Callable[[], Mapping[QuotaEntity, Mapping[str, float]]], *,
                 samples: int = 11, window_s: int = 1, controller_samples: int = 11,
                 controller_window_s: int = 1) -> None:
        self.controller_mutation = ControllerMutationQuotaManager(
            quotas, samples=controller_samples, window_s=controller_window_s)
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, quotas, samples=samples,
                                          window_s=window_s)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, quotas, samples=samples,
                                        window_s=window_s)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, quotas, samples=samples,
                                          window_s=window_s, max_throttle_ms=window_s * 1000)
