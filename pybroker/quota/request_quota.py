"""Enforcing `request_percentage`: how much of the broker's time each client's requests take.

Kafka's ClientRequestQuotaManager counts, per (user, client id), the time its request handler
threads (and network threads) spent on each request, as a percentage of one thread per
quota window: 100 is one thread's worth. A client over its bound is answered with
`throttle_time_ms` and its channel muted for as long, at most one window.

Here one trio event loop does all of a request's work, interleaved with every other
connection's, so neither a thread's CPU clock nor the wall time from request to response
says what a request cost: a long-poll fetch or an acks=all produce spends most of its wall
time parked, costing nothing, while other connections run. What a request costs is the time
its connection's task spends *running* on the loop. A trio Instrument
(`before_task_step`/`after_task_step`) measures exactly that: every step of a watched task is
timed, waits are not steps, and other tasks' steps are theirs. So each connection task's step
time is summed, and when a request is answered the time since the previous answer (reading
and decoding its frame, the handler's own steps, encoding the previous response) is recorded
against the request's (user, client id). Timing the dispatch call instead would need every
await inside a handler to be subtracted by hand, and would charge one client for the steps
of all the others that ran while it waited.

The instrument is installed only while some entity has a request_percentage quota (checked at
each answer, cheaply: the quota manager caches it per metadata image), so a broker without
one pays a single identity check per request; with one, every task step pays two clock
reads and a dict lookup. Not counted: work done for a connection by other tasks (the
replica fetchers, the log flusher, the group coordinator's timers) or in worker threads:
Kafka does not charge a client for those either (its purgatory and log flushes are not
request handler time), and threads run off the loop.

Exempt, as in Kafka: requests between brokers (CLUSTER_ACTION APIs, a follower's fetch), and
ApiVersions and the SASL APIs, which Kafka serves in the network thread before authentication
and never throttles there; their time is taken and dropped, not charged to the next request.
"""
from __future__ import annotations

from time import perf_counter
from typing import Any, Callable, Protocol

import trio

from protocol.api_keys import ApiKey
from pybroker.quota.client_quota import ClientQuotaManager
from pybroker.security.session import Session


class _Request(Protocol):
    """What is asked of a request (pybroker.handlers.RequestContext, which imports this)."""

    header: Any
    session: Session
    request_time_recorded: bool

    @property
    def client_id(self) -> str: ...

# APIs whose requests are never charged or throttled (Kafka's sendResponseExemptThrottle,
# and what its authenticator answers before a request reaches KafkaApis).
EXEMPT = frozenset(k for k in (
    ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE,
    ApiKey.WRITE_TXN_MARKERS,
    *(getattr(ApiKey, name, None) for name in (
        "LEADER_AND_ISR", "STOP_REPLICA", "UPDATE_METADATA", "CONTROLLED_SHUTDOWN",
        "ALTER_PARTITION", "BROKER_REGISTRATION", "BROKER_HEARTBEAT", "ENVELOPE")),
) if k is not None)

# 1 s of loop time is 100 percent-seconds (Kafka's NanosToPercentagePerSecond).
PERCENT_PER_SECOND = 100.0


class LoopTime(trio.abc.Instrument):
    """Seconds each watched task has spent running on the event loop."""

    def __init__(self, clock: Callable[[], float] = perf_counter) -> None:
        # `clock`: perf_counter, as Kafka meters a handler thread's nanoTime; a test gives a
        # clock of its own, since wall time under a loaded machine includes preemption.
        self._clock = clock
        self._spent: dict[trio.lowlevel.Task, float] = {}
        self._began = clock()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._began = self._clock()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        spent = self._spent
        if task in spent:
            spent[task] += self._clock() - self._began

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        self._spent.pop(task, None)

    def take(self) -> float:
        """The current task's loop time since it last took it, this step so far included;
        from now on the task is watched. The rest of the current step is counted toward
        the next take (after_task_step adds the whole step, so the part taken is owed)."""
        task = trio.lowlevel.current_task()
        now = self._clock()
        step = now - self._began
        spent = self._spent.get(task, 0.0) + step
        self._spent[task] = -step
        return spent


class RequestQuota:
    """The request quota's trio side: the loop-time instrument, installed while a quota
    exists, and the throttle each answered request earns."""

    def __init__(self, manager: ClientQuotaManager) -> None:
        self.manager = manager
        self.loop_time: LoopTime | None = None

    def _meter(self) -> LoopTime | None:
        enabled = self.manager.enabled()
        if enabled and self.loop_time is None:
            self.loop_time = LoopTime()
            trio.lowlevel.add_instrument(self.loop_time)
        elif not enabled and self.loop_time is not None:
            trio.lowlevel.remove_instrument(self.loop_time)
            self.loop_time = None
        return self.loop_time

    def record(self, ctx: _Request, exempt: bool = False) -> int:
        """Charge the request's loop time to its client (once per request: a handler that
        needs the answer early, Fetch, asks first and dispatch does not ask again); the
        throttle time in ms, 0 within the quota, exempt or without request quotas."""
        if ctx.request_time_recorded:
            return 0
        ctx.request_time_recorded = True
        meter = self._meter()
        if meter is None:
            return 0
        seconds = meter.take()
        if exempt or ctx.header.api_key in EXEMPT or not ctx.session.authenticated:
            return 0
        return self.manager.record(ctx.client_id, seconds * PERCENT_PER_SECOND,
                                   trio.current_time() * 1000, ctx.session.user)
