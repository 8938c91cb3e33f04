"""The `scale` workload of bin/pybroker-bench (issue #15 §3): how a broker's throughput and
memory change from 10 to 10,000 partitions and from 10 to 5,000 connections.

Two series, each point run against every broker of the bench (pybroker and its peers):

- partitions: a topic of N partitions takes a fixed volume of 1 KB records spread
  round-robin over them (bench_broker.bench_produce: acks=1, linger.ms=5, one producer),
  then a consumer assigned all N reads them back (bench_broker.bench_consume). The volume
  is the same at every N, so the figures say what spreading it thinner costs: more, smaller
  batches per request, and per-partition work in the broker. The broker's RSS is read after
  both (VmRSS, before the topic is deleted).
- connections: C sockets are opened and each sends ApiVersions v3 and Metadata v12 (what a
  modern client does first), then they stay open and silent while one more client measures
  1 KB produce throughput and, on a connection of its own, Metadata round trips. The RSS
  with the C connections open, less the RSS before they were opened, divided by C, is what
  each idle connection costs the broker.

The bench process opens every socket itself, so `raise_open_file_limit()` lifts its soft
RLIMIT_NOFILE to the hard limit before the brokers start: they inherit it (pybroker and
the JVM raise their own soft limit to the hard one anyway; Tansu does not).
"""
from __future__ import annotations

import resource
import time
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions

from protocol.api_keys import ApiKey
from tests.bench.bench_broker import (
    QUIET, Throughput, bench_consume, bench_produce, create_topic, percentile, status_kb,
)
from tests.integration.raw import RawConnection

PARTITION_SERIES = (10, 100, 1_000, 10_000)
CONNECTION_SERIES = (10, 100, 1_000, 5_000)
CONNECTION_TOPIC_PARTITIONS = 8
METADATA_ROUND_TRIPS = 200
FD_MARGIN = 1_024  # the client's own sockets and files beside the held connections
# Kafka's KRaft controller refuses one operation that writes more than MAX_RECORDS_PER_USER_OP
# (10,000) metadata records: a topic of 10,000 partitions is 10,001 (POLICY_VIOLATION,
# "Unable to perform excessively large batch operation"). Such a topic is made in steps.
CREATE_STEP = 5_000
# A consumer of Kafka's 10,000 partitions had all but 13 of them at once, and those 38 s
# later: a point waits that long rather than failing (bench_consume's default is 30 s).
STALL_SECONDS = 180


def raise_open_file_limit(needed: int) -> int:
    """Lift this process's soft RLIMIT_NOFILE to the hard limit (children inherit it);
    the soft limit now. Raises RuntimeError when even the hard limit is below `needed`,
    since the bench would otherwise fail half-way with EMFILE."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, needed)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft < needed:
        raise RuntimeError(
            f"the open-file limit is {soft} (hard {hard}); the scale workload needs "
            f"{needed}: raise it (ulimit -Hn) or choose fewer --scale-connections")
    return soft


def create_wide_topic(bootstrap: str, topic: str, partitions: int,
                      step: int = CREATE_STEP) -> bool:
    """A topic of `partitions` partitions in one CreateTopics; where the broker refuses that
    with POLICY_VIOLATION (Kafka, over 10,000 records), by CreateTopics of `step` and then
    CreatePartitions of at most `step` more at a time (Tansu has no CreatePartitions, and
    takes the single request). Whether it took steps."""
    try:
        create_topic(bootstrap, topic, partitions)
        return False
    except KafkaException as exc:
        if partitions <= step or exc.args[0].code() != KafkaError.POLICY_VIOLATION:
            raise
    create_topic(bootstrap, topic, step)
    have = step
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    while have < partitions:
        have = min(partitions, have + step)
        for future in admin.create_partitions([NewPartitions(topic, have)],
                                              operation_timeout=60,
                                              request_timeout=120).values():
            future.result()
    return True


def wait_partitions_ready(bootstrap: str, topic: str, partitions: int,
                          timeout: float = 300) -> None:
    """Until every partition of a new topic answers ListOffsets (latest) without error.
    CreateTopics returns before the broker has made the logs (Kafka's broker applies the
    controller's record afterwards; pybroker makes them in a worker thread), and clients
    retry NOT_LEADER_OR_FOLLOWER meanwhile: for 10,000 partitions that is seconds, which
    would otherwise land in the produce figure. RuntimeError after `timeout` seconds."""
    body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
        {"partition_index": p, "timestamp": -1, "current_leader_epoch": -1}
        for p in range(partitions)]}]}
    deadline = time.monotonic() + timeout
    codes: list[int] = []
    with RawConnection(bootstrap, timeout=60, client_id="scale-bench-ready") as conn:
        while time.monotonic() < deadline:
            answer = conn.request(ApiKey.LIST_OFFSETS, 7, body)
            assert answer is not None
            codes = [p.error_code for t in answer.topics for p in t.partitions]
            if len(codes) == partitions and not any(codes):
                return
            time.sleep(0.1)
    waiting = sum(1 for c in codes if c) + partitions - len(codes)
    raise RuntimeError(f"{topic}: {waiting} of {partitions} partitions not ready after "
                       f"{timeout:.0f} s (error codes {sorted(set(codes) - {0})})")


@dataclass
class PartitionsPoint:
    partitions: int
    create_seconds: float  # CreateTopics sent until every partition answers ListOffsets
    stepped: bool  # made by CreateTopics and CreatePartitions steps (create_wide_topic)
    produce: Throughput
    consume: Throughput
    rss_mb: float


def bench_partitions_point(bootstrap: str, pid: int, topic: str, partitions: int,
                           count: int, size: int = 1024) -> PartitionsPoint:
    """`count` records of `size` bytes over a new `partitions`-partition topic, produced and
    consumed once every partition is ready; the topic is left for the caller to delete."""
    t0 = time.perf_counter()
    stepped = create_wide_topic(bootstrap, topic, partitions)
    wait_partitions_ready(bootstrap, topic, partitions)
    create_seconds = time.perf_counter() - t0
    produced = bench_produce(bootstrap, pid, topic, partitions, size, count, "1", create=False)
    consumed = bench_consume(bootstrap, pid, topic, partitions, size, count,
                             stall_seconds=STALL_SECONDS)
    return PartitionsPoint(partitions, create_seconds, stepped, produced, consumed,
                           status_kb(pid, "VmRSS") / 1024)


def metadata_body(topic: str) -> dict:
    # Kafka's auto.create.topics.enable is on by default: never let the bench create one.
    return {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}


@dataclass
class HeldConnections:
    conns: list[RawConnection]
    failed: int
    errors: list[str]  # the first few failures' reasons
    seconds: float  # to open them all and have both answers on each

    def close(self) -> None:
        for conn in self.conns:
            conn.close()
        self.conns.clear()


def hold_connections(bootstrap: str, n: int, topic: str, partitions: int) -> HeldConnections:
    """`n` sockets, each having had ApiVersions and a Metadata answer naming all of the
    topic's `partitions`; those that failed are closed and their errors kept (at most 5)."""
    conns: list[RawConnection] = []
    errors: list[str] = []
    failed = 0
    t0 = time.perf_counter()
    for _ in range(n):
        conn = None
        try:
            conn = RawConnection(bootstrap, timeout=30, client_id="scale-bench")
            versions = conn.request(ApiKey.API_VERSIONS, 3, {
                "client_software_name": "pybroker-bench", "client_software_version": "1"})
            meta = conn.request(ApiKey.METADATA, 12, metadata_body(topic))
            assert versions is not None and meta is not None
            if versions.error_code:
                raise RuntimeError(f"ApiVersions error {versions.error_code}")
            got = len(meta.topics[0].partitions) if meta.topics else 0
            if got != partitions:
                raise RuntimeError(f"Metadata named {got} of {partitions} partitions")
            conns.append(conn)
        except Exception as exc:
            failed += 1
            if len(errors) < 5:
                errors.append(f"{type(exc).__name__}: {exc}")
            if conn is not None:
                conn.close()
    seconds = time.perf_counter() - t0
    errors += [f"... {failed - len(errors)} more"] if failed > len(errors) else []
    return HeldConnections(conns, failed, errors, seconds)


def metadata_round_trips(bootstrap: str, topic: str, n: int = METADATA_ROUND_TRIPS
                         ) -> list[float]:
    """`n` Metadata v12 requests for `topic` on one fresh connection, one at a time; the
    round trips in milliseconds, sorted."""
    times = []
    with RawConnection(bootstrap, timeout=30, client_id="scale-bench-meta") as conn:
        conn.request(ApiKey.API_VERSIONS, 3, {
            "client_software_name": "pybroker-bench", "client_software_version": "1"})
        for _ in range(n):
            t0 = time.perf_counter_ns()
            conn.request(ApiKey.METADATA, 12, metadata_body(topic))
            times.append((time.perf_counter_ns() - t0) / 1e6)
    return sorted(times)


@dataclass
class ConnectionsPoint:
    connections: int
    opened: int
    failed: int
    errors: list[str]
    open_seconds: float
    rss_before_mb: float
    rss_held_mb: float
    produce: Throughput
    metadata_p50_ms: float
    metadata_p99_ms: float

    @property
    def rss_per_connection_kb(self) -> float | None:
        if not self.opened:
            return None
        return (self.rss_held_mb - self.rss_before_mb) * 1024 / self.opened


def bench_connections_point(bootstrap: str, pid: int, topic: str, connections: int,
                            count: int, size: int = 1024) -> ConnectionsPoint:
    """`connections` idle connections held open while one producer sends `count` records of
    `size` bytes to a new topic of CONNECTION_TOPIC_PARTITIONS partitions and another
    connection times Metadata round trips; the topic is left for the caller to delete."""
    partitions = CONNECTION_TOPIC_PARTITIONS
    create_topic(bootstrap, topic, partitions)
    wait_partitions_ready(bootstrap, topic, partitions)  # else Metadata may not list them yet
    time.sleep(0.5)  # the broker's RSS settles after the topic's creation
    rss_before = status_kb(pid, "VmRSS") / 1024
    held = hold_connections(bootstrap, connections, topic, partitions)
    try:
        time.sleep(0.5)
        rss_held = status_kb(pid, "VmRSS") / 1024
        # bench_produce creates its topic: give it a sibling, so the held connections'
        # topic stays as they saw it.
        produced = bench_produce(bootstrap, pid, topic + "-load", partitions, size, count, "1")
        trips = metadata_round_trips(bootstrap, topic)
        alive = _still_open(held)
    finally:
        held.close()
    return ConnectionsPoint(connections, alive, connections - alive, held.errors,
                            held.seconds, rss_before, rss_held, produced,
                            percentile(trips, 0.50), percentile(trips, 0.99))


def _still_open(held: HeldConnections) -> int:
    """How many held connections the broker still serves: each answers one more ApiVersions
    (a broker that shed idle connections under load would show it here)."""
    alive = 0
    for conn in held.conns:
        try:
            got = conn.request(ApiKey.API_VERSIONS, 3, {
                "client_software_name": "pybroker-bench", "client_software_version": "1"})
            if got is not None and not got.error_code:
                alive += 1
        except Exception:
            if len(held.errors) < 6:
                held.errors.append("a held connection was closed by the broker")
    return alive


def kept(values: list[float]) -> float | None:
    """The last of a series as a percentage of its first (None when either is missing)."""
    if len(values) < 2 or not values[0]:
        return None
    return 100 * values[-1] / values[0]


