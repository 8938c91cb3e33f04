"""Hostile load on a subprocess broker and what it costs (issue #20: bounded memory).

Shared by `tests/integration/test_memory_bound.py` (fast, asserted) and
`tests/bench/bench_memory.py` (the issue's full measurement, printed). The pieces:

- `rss` / `RssSampler`: the broker's resident size from /proc (VmRSS) every 100 ms, its peak,
  and a watchdog that kills the broker past a limit, so a run against a broker without a
  memory pool cannot take the machine down.
- `HostileFlood`: raw TCP connections that each declare a frame size and push part of it,
  from one thread with `poll` (400 connections, not 400 threads). A frame is never completed,
  so the broker holds what it read until the connection closes; a socket whose kernel buffer
  is full just waits — that wait is the backpressure the pool is meant to cause. It notes the
  connections the broker closed (EOF or reset), as it must close one declaring a frame
  larger than its pool.
- `RoundTrips`: a normal client's produce→consume round trips of one small record meanwhile.
- `AckedRecords`: records produced with acks=all meanwhile, read back afterwards.
- `GroupWatch`: a consumer group of subprocess members (tests/integration/group_member.py)
  whose rebalances are counted: a member that misses its heartbeats is evicted, rejoins and
  is revoked and assigned again, and the broker logs every JoinGroup.
"""
from __future__ import annotations

import os
import select
import signal
import socket
import statistics
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from compat.wire import create_topic
from tests.integration.group_harness import Member, wait_until

__all__ = ["MB", "rss", "RssSampler", "HostileFlood", "RoundTrips", "AckedRecords",
           "GroupWatch", "Measurement", "measure", "percentiles", "raise_open_files"]

MB = 2**20
_CHUNK = 256 * 1024
_PAYLOAD = memoryview(b"\x7f" * _CHUNK)  # never parsed: no frame is ever completed


def rss(pid: int) -> int:
    """The process's resident set size in bytes (VmRSS), 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def open_fds(pid: int) -> int:
    """How many descriptors the process has open (its connections among them); 0 once gone."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def raise_open_files(at_least: int) -> None:
    """Lift this process's soft RLIMIT_NOFILE so it can hold `at_least` sockets (up to the
    hard limit, which an unprivileged process cannot raise)."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < at_least:
        want = at_least if hard == resource.RLIM_INFINITY else min(at_least, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def percentiles(values: list[float]) -> dict[str, float]:
    """p50, p99 and max of `values` (NaN when there are none)."""
    if not values:
        return {"p50": float("nan"), "p99": float("nan"), "max": float("nan")}
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"p50": statistics.median(ordered), "p99": p99, "max": ordered[-1]}


class RssSampler(threading.Thread):
    """Samples a process's RSS every `interval` seconds until stopped; with `kill_above`,
    SIGKILLs it when a sample passes that many bytes (and says so in `killed_at`)."""

    def __init__(self, pid: int, interval: float = 0.1, kill_above: int | None = None) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.interval = interval
        self.kill_above = kill_above
        self.samples: list[tuple[float, int]] = []
        self.killed_at: int | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            value = rss(self.pid)
            self.samples.append((time.monotonic(), value))
            if self.kill_above is not None and value > self.kill_above and self.killed_at is None:
                self.killed_at = value
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(5)

    def peak(self, since: float = 0.0, until: float = float("inf")) -> int:
        return max((v for t, v in self.samples if since <= t <= until), default=0)

    def at(self, when: float) -> int:
        """The first sample taken at or after `when` (the last one if none is)."""
        for t, v in self.samples:
            if t >= when:
                return v
        return self.samples[-1][1] if self.samples else 0

    def back_within(self, limit: int, since: float) -> float | None:
        """Seconds after `since` until a sample was at most `limit` bytes; None if never."""
        for t, v in self.samples:
            if t >= since and 0 < v <= limit:
                return t - since
        return None


@dataclass
class _Conn:
    sock: socket.socket
    left: int  # payload bytes still to push
    closed_by_broker: bool = False


class HostileFlood(threading.Thread):
    """Connections that each send a 4-byte size prefix declaring `declared` bytes, then push
    up to `push` bytes of it (never the whole frame), from this one thread with `poll`.

    `specs` is one (declared, push) pair per connection. `start()` connects them all first
    (in the caller's thread) and sends the prefixes; `close()` closes every socket as a
    client would (FIN after what is still in the kernel's send buffer)."""

    def __init__(self, bootstrap: str, specs: list[tuple[int, int]]) -> None:
        super().__init__(daemon=True)
        host, _, port = bootstrap.rpartition(":")
        self.address = (host, int(port))
        self.specs = specs
        self.conns: list[_Conn] = []
        self._halt = threading.Event()
        self._lock = threading.Lock()

    def start(self) -> None:
        raise_open_files(len(self.specs) + 256)
        for declared, push in self.specs:
            assert push < declared, "a completed frame would be parsed and refused"
            sock = socket.create_connection(self.address, timeout=10)
            sock.sendall(struct.pack(">i", declared))
            sock.setblocking(False)
            self.conns.append(_Conn(sock, push))
        super().start()

    def run(self) -> None:
        poller = select.poll()
        by_fd = {c.sock.fileno(): c for c in self.conns}
        for fd, conn in by_fd.items():
            poller.register(fd, select.POLLIN | (select.POLLOUT if conn.left else 0))
        while not self._halt.is_set() and by_fd:
            for fd, events in poller.poll(100):
                c = by_fd.get(fd)
                if c is None:
                    continue
                if events & (select.POLLIN | select.POLLHUP | select.POLLERR):
                    try:
                        data = c.sock.recv(4096)
                    except BlockingIOError:
                        data = b"?"
                    except OSError:
                        data = b""
                    if not data:
                        self._closed(poller, by_fd, fd, c)
                        continue
                if events & select.POLLOUT and c.left:
                    try:
                        sent = c.sock.send(_PAYLOAD[:min(c.left, _CHUNK)])
                    except BlockingIOError:
                        continue
                    except OSError:
                        self._closed(poller, by_fd, fd, c)
                        continue
                    with self._lock:
                        c.left -= sent
                    if not c.left:
                        poller.modify(fd, select.POLLIN)

    @staticmethod
    def _closed(poller: Any, by_fd: dict, fd: int, c: _Conn) -> None:
        c.closed_by_broker = True
        poller.unregister(fd)
        del by_fd[fd]

    @property
    def pushed(self) -> int:
        """Payload bytes handed to the kernel so far (what the broker may have read, plus
        what sits in the two sockets' buffers)."""
        with self._lock:
            return sum(push - c.left for (_, push), c in zip(self.specs, self.conns))

    def closed_by_broker(self) -> list[int]:
        """Indexes (into `specs`) of the connections the broker closed."""
        return [i for i, c in enumerate(self.conns) if c.closed_by_broker]

    def close(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(5)
        for c in self.conns:
            c.sock.close()


def _producer(bootstrap: str, **extra: Any) -> Any:
    from confluent_kafka import Producer
    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                     "message.timeout.ms": 30000, **extra})


class RoundTrips(threading.Thread):
    """A normal client's round trips: produce one small record (acks=all), wait for its
    acknowledgement, then consume it from an assigned consumer; the latency of each, from
    `produce()` to the record in hand, and the ones that failed or took over `timeout`."""

    def __init__(self, bootstrap: str, topic: str, interval: float = 0.1,
                 timeout: float = 5.0) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Consumer
        self.topic = topic
        self.interval = interval
        self.timeout = timeout
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self.producer = _producer(bootstrap)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "round-trips",
                                  "enable.auto.commit": False, "fetch.wait.max.ms": 10,
                                  "fetch.error.backoff.ms": 10})
        self._halt = threading.Event()
        self._seq = 0
        self._closed = False

    def warm_up(self) -> None:
        """One round trip before measuring: connections made, the consumer assigned."""
        from confluent_kafka import TopicPartition
        offset = self._produce("warm-up")
        assert offset is not None, self.failures
        self.consumer.assign([TopicPartition(self.topic, 0, offset)])
        assert self._consume("warm-up", time.monotonic() + 30), "warm-up record never read"
        self.failures.clear()

    def _produce(self, value: str) -> int | None:
        box: dict[str, Any] = {}
        self.producer.produce(self.topic, value=value.encode(), partition=0,
                              on_delivery=lambda err, msg: box.update(err=err, msg=msg))
        self.producer.flush(self.timeout)
        if "msg" not in box or box["err"] is not None:
            self.failures.append(f"produce {value}: {box.get('err', 'no acknowledgement')}")
            return None
        return box["msg"].offset()

    def _consume(self, value: str, deadline: float) -> bool:
        while time.monotonic() < deadline:
            msg = self.consumer.poll(0.05)
            if msg is not None and not msg.error() and msg.value() == value.encode():
                return True
        return False

    def run(self) -> None:
        while not self._halt.is_set():
            self._seq += 1
            value = f"rt-{self._seq}"
            began = time.monotonic()
            if self._produce(value) is not None:
                if self._consume(value, began + self.timeout):
                    self.latencies.append(time.monotonic() - began)
                else:
                    self.failures.append(f"consume {value}: not read within {self.timeout}s")
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(self.timeout * 3)
        if not self._closed:
            self._closed = True
            self.consumer.close()


class AckedRecords(threading.Thread):
    """`count` records produced with acks=all in `bursts` spread over `spread` seconds; the
    ones acknowledged are checked afterwards by `unreadable()`."""

    def __init__(self, bootstrap: str, topic: str, count: int = 1000, bursts: int = 10,
                 spread: float = 3.0) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.count = count
        self.bursts = bursts
        self.spread = spread
        self.acked: dict[int, bytes] = {}  # offset -> value
        self.errors: list[str] = []

    def run(self) -> None:
        producer = _producer(self.bootstrap, **{"linger.ms": 5})

        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                self.acked[msg.offset()] = msg.value()
            else:
                self.errors.append(str(err))

        per_burst = -(-self.count // self.bursts)
        for i in range(self.count):
            producer.produce(self.topic, value=f"acked-{i}".encode(), partition=0,
                             on_delivery=on_delivery)
            if (i + 1) % per_burst == 0:
                producer.poll(0)
                time.sleep(self.spread / self.bursts)
        left = producer.flush(60)
        if left:
            self.errors.append(f"{left} record(s) never acknowledged or failed")

    def unreadable(self, timeout: float = 30) -> list[int]:
        """Offsets acknowledged whose record is not read back with the same value."""
        from confluent_kafka import Consumer, TopicPartition
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "acked-check",
                             "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition(self.topic, 0, 0)])
            want = dict(self.acked)
            end = max(want, default=-1) + 1
            seen: dict[int, bytes | None] = {}
            deadline = time.monotonic() + timeout
            while len(seen) < end and time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                # A record consumed has an offset: the stubs' Optional covers others' messages.
                if msg is not None and not msg.error() and (offset := msg.offset()) is not None:
                    seen[offset] = msg.value()
            return sorted(o for o, v in want.items() if seen.get(o) != v)
        finally:
            consumer.close()


@dataclass
class GroupWatch:
    """A consumer group of `members` subprocess members on `topic` (one partition each)."""

    bootstrap: str
    topic: str
    group: str
    members: int = 2
    client: str = "confluent"
    session_ms: int = 6000
    heartbeat_ms: int = 500
    broker_log: list[str] | None = None  # the broker's stderr lines, to count JoinGroups
    procs: list[Member] = field(default_factory=list)
    _base: tuple[int, int] = (0, 0)

    def start(self, timeout: float = 30) -> None:
        """Start the members and wait until each holds one partition, then one second more
        with nothing changing (the group stable): that is the baseline."""
        for _ in range(self.members):
            self.procs.append(Member(self.client, self.bootstrap, self.topic, self.group,
                                     session_ms=self.session_ms,
                                     heartbeat_ms=self.heartbeat_ms))
        wait_until(lambda: all(len(m.assignment) == 1 for m in self.procs), timeout,
                   "every member assigned one partition: " +
                   "; ".join(m.debug() for m in self.procs))
        while True:
            before = self._counts()
            time.sleep(1.0)
            if self._counts() == before and all(len(m.assignment) == 1 for m in self.procs):
                break
        self._base = self._counts()

    def _counts(self) -> tuple[int, int]:
        events = sum(len(m.of("assigned")) + len(m.of("revoked")) for m in self.procs)
        return events, self._joins()

    def _joins(self) -> int:
        return sum(1 for line in list(self.broker_log or ()) if "joining group " + self.group
                   in line)

    def rebalance_events(self) -> int:
        """Assigned/revoked events reported by the members since the baseline."""
        return self._counts()[0] - self._base[0]

    def joins(self) -> int:
        """JoinGroup requests the broker logged for the group since the baseline."""
        return self._counts()[1] - self._base[1]

    def dead(self) -> list[int]:
        return [i for i, m in enumerate(self.procs) if m.proc.poll() is not None]

    def commit_failures(self) -> int:
        return sum(len(m.of("commit_failed")) for m in self.procs)

    def stop(self) -> None:
        for m in self.procs:
            try:
                m.stop(15)
            except Exception:
                pass
            m.ensure_dead()


@dataclass
class Measurement:
    """What `measure` saw; sizes in bytes, times in seconds."""

    idle: int  # RSS before the flood, normal clients and group connected
    peak: int  # the highest sample from the flood's start to the end of the run
    pushed: int  # payload bytes the hostile connections got into their sockets
    closed_by_broker: list[int]  # indexes into the flood's specs
    rss_after: dict[float, int]  # seconds after closing -> RSS then
    back_in: float | None  # seconds after closing until within `back_margin` of idle
    latencies: list[float]
    round_trip_failures: list[str]
    acked: int
    unreadable: list[int]
    acked_errors: list[str]
    rebalance_events: int | None = None
    joins: int | None = None
    dead_members: list[int] = field(default_factory=list)
    killed_at: int | None = None  # RSS at which the watchdog killed the broker
    open_fds: tuple[int, int, int] = (0, 0, 0)  # the broker's: before, during, after the flood
    timeline: list[tuple[float, int]] = field(default_factory=list)  # (s from closing, RSS)


def measure(broker: Any, specs: list[tuple[int, int]], *, duration: float,
            after_close: float = 10.0, back_margin: int = 100 * MB, stop_when_back: bool = False,
            group: bool = False, group_client: str = "confluent", acked: int = 1000,
            kill_above: int | None = None) -> Measurement:
    """Flood a started `BrokerProcess` with `specs` for `duration` seconds while a normal
    client makes round trips, `acked` records are produced with acks=all and (with `group`)
    a two-member consumer group runs; then close the flood and follow RSS for `after_close`
    seconds (less with `stop_when_back`, once it is within `back_margin` of idle)."""
    bootstrap = broker.bootstrap
    for name, partitions in (("round-trips", 1), ("acked", 1), ("watched-group", 2)):
        create_topic(bootstrap, name, partitions)
    trips = RoundTrips(bootstrap, "round-trips")
    trips.warm_up()
    watch = None
    if group:
        watch = GroupWatch(bootstrap, "watched-group", "hostile-load-group", client=group_client,
                           broker_log=broker.stderr_lines)
    sampler = RssSampler(broker.serving_pid, kill_above=kill_above)
    flood = HostileFlood(bootstrap, specs)
    records = AckedRecords(bootstrap, "acked", count=acked, spread=min(3.0, duration / 2))
    try:
        if watch is not None:
            watch.start()
        idle = rss(broker.serving_pid)
        fds_before = open_fds(broker.serving_pid)
        sampler.start()
        began = time.monotonic()
        flood.start()
        trips.start()
        records.start()
        time.sleep(duration)
        trips.stop()
        records.join(60)
        fds_during = open_fds(broker.serving_pid)
        pushed = flood.pushed
        closed = flood.closed_by_broker()
        flood.close()
        closed_at = time.monotonic()
        while time.monotonic() < closed_at + after_close:
            time.sleep(0.1)
            back = sampler.back_within(idle + back_margin, closed_at)
            if stop_when_back and back is not None:
                break
        sampler.stop()
        result = Measurement(
            idle=idle, peak=sampler.peak(since=began), pushed=pushed, closed_by_broker=closed,
            rss_after={t: sampler.at(closed_at + t) for t in (2.0, 10.0)
                       if t <= after_close},
            back_in=sampler.back_within(idle + back_margin, closed_at),
            latencies=trips.latencies, round_trip_failures=trips.failures,
            acked=len(records.acked), unreadable=[], acked_errors=records.errors,
            killed_at=sampler.killed_at,
            open_fds=(fds_before, fds_during, open_fds(broker.serving_pid)),
            timeline=[(t - closed_at, v) for t, v in sampler.samples])
        if sampler.killed_at is None:
            result.unreadable = records.unreadable()
        if watch is not None:
            result.rebalance_events = watch.rebalance_events()
            result.joins = watch.joins()
            result.dead_members = watch.dead()
        return result
    finally:
        sampler.stop()
        trips.stop()
        flood.close()
        if watch is not None:
            watch.stop()
