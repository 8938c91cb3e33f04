"""Share groups (KIP-932) under load (issue #34 item 6): records/s through a share group of
1, 4 and 16 consumers reading one partition, and how long after its acquisition lock runs out
a record held by a consumer that went silent is delivered to another.

Throughput: a fresh one-partition topic; the consumers (confluent-kafka ShareConsumer, each
in a thread of this process, accepting each record explicitly: the acceptances ride on the
next ShareFetch) join the group and each gets a warm-up record (share.auto.offset.reset is latest);
then `records` 100 B records are produced, and only then do the consumers poll again: the
clock runs from that start to the last record delivered, across all consumers. Each record must be delivered exactly once: a
lost or doubled one fails the run. A consumer that gets no warm-up record in 8 s is replaced
(Kafka 4.1.1 fails every ShareFetch of a librdkafka member id with '+' or '/' in it:
compat/differential/share_scenarios.py), so each broker is measured with N working consumers.

Redelivery: two raw members (tests/integration/share_member.py's requests, with member ids in
Kafka's Uuid form) share a partition. One acquires a record and never acknowledges it;
the other waits in a long-poll ShareFetch (max_wait 5 s, repeated). The figure is the time from
the holder's ShareFetch answer to the record's second delivery, less the lock duration
(`LOCK_MS`): the broker's lateness in noticing the expiry and handing the record on.
"""
from __future__ import annotations

import base64
import statistics
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import AcknowledgeType, Producer

from compat.differential.share_scenarios import (
    Consumer, _fetching_consumer, enable_share_groups,
)
from compat.wire import create_topic
from protocol.api_keys import ApiKey

CONSUMERS = (1, 4, 16)
LOCK_MS = 1000
SETTINGS = {
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.min.record.lock.duration.ms": str(LOCK_MS),
}
VALUE = b"x" * 100


@dataclass
class ShareRun:
    records_per_s: dict[int, float] = field(default_factory=dict)  # by consumer count
    redelivery_ms: list[float] = field(default_factory=list)  # beyond the lock, per sample


def throughput(bootstrap: str, consumers: int, records: int, tag: str) -> float:
    """Records/s through a share group of `consumers` on one partition (see the module)."""
    topic, group = f"share-bench-{tag}-{consumers}", f"sg-bench-{tag}-{consumers}"
    create_topic(bootstrap, topic)
    members: list[Consumer] = [_fetching_consumer(bootstrap, group, topic)
                                    for _ in range(consumers)]
    counts = [0] * consumers
    last = [0.0]
    lock = threading.Lock()
    stop = threading.Event()
    started = threading.Event()

    def run(i: int) -> None:
        c = members[i]
        started.wait()
        while not stop.is_set():
            got = [m for m in c.poll(0.1) if m.error() is None]
            for m in got:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            got = [m for m in got if m.value() == VALUE]
            if got:
                now = time.monotonic()
                with lock:
                    counts[i] += len(got)
                    last[0] = now

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(consumers)]
    for t in threads:
        t.start()
    try:
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                      "batch.size": 1_000_000})
        for _ in range(records):
            while True:
                try:
                    p.produce(topic, VALUE)
                    break
                except BufferError:
                    p.poll(0.01)
        if p.flush(60):
            raise RuntimeError("records not produced in 60 s")
        began = time.monotonic()
        started.set()
        deadline = time.monotonic() + 120
        while sum(counts) < records and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(2 * LOCK_MS / 1000)  # nothing more may come: each record once
    finally:
        started.set()
        stop.set()
        for t in threads:
            t.join(10)
        for c in members:
            c.close()
    if sum(counts) != records:
        raise RuntimeError(f"{consumers} consumers: {sum(counts)} deliveries of {records} "
                           "records")
    return records / (last[0] - began)


def _member_id() -> str:
    """A member id in Kafka's Uuid form (URL-safe base64, 22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class _Member:
    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        from tests.integration.raw import RawConnection
        self.conn = RawConnection(bootstrap, 15.0)
        self.group, self.topic, self.member_id, self.epoch = group, topic, _member_id(), 0
        deadline = time.monotonic() + 30
        member_epoch = 0
        while True:
            r: Any = self.conn.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
                "group_id": group, "member_id": self.member_id, "member_epoch": member_epoch,
                "rack_id": None, "subscribed_topic_names": [topic]})
            if r.error_code == 0 and r.assignment and r.assignment.topic_partitions:
                self.topic_id = r.assignment.topic_partitions[0].topic_id
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"no assignment for {self.member_id}: {r}")
            if r.error_code == 0:  # Kafka assigns once the share-partition is initialized
                member_epoch = r.member_epoch
            elif r.error_code in (14, 15, 16):  # loading, not available, not coordinator:
                # FindCoordinator creates __consumer_offsets on a fresh broker
                self.conn.request(ApiKey.FIND_COORDINATOR, 4, {
                    "key_type": 0, "coordinator_keys": [group]})
            time.sleep(0.5)

    def fetch(self, max_wait_ms: int) -> list[tuple[int, int, int]]:
        r: Any = self.conn.request(ApiKey.SHARE_FETCH, 1, {
            "group_id": self.group, "member_id": self.member_id,
            "share_session_epoch": self.epoch, "max_wait_ms": max_wait_ms, "min_bytes": 1,
            "max_bytes": 1 << 20, "max_records": 1, "batch_size": 1,
            "topics": [{"topic_id": self.topic_id, "partitions": [
                {"partition_index": 0, "acknowledgement_batches": []}]}],
            "forgotten_topics_data": []})
        if r.error_code:
            raise RuntimeError(f"ShareFetch: error {r.error_code}")
        self.epoch += 1
        return [(a.first_offset, a.last_offset, a.delivery_count)
                for t in r.responses for p in t.partitions for a in p.acquired_records]


def redelivery(bootstrap: str, samples: int, tag: str) -> list[float]:
    """Milliseconds beyond the lock duration until a held record reaches another member."""
    topic, group = f"share-redelivery-{tag}", f"sg-redelivery-{tag}"
    create_topic(bootstrap, topic)
    holder, taker = _Member(bootstrap, group, topic), _Member(bootstrap, group, topic)
    p = Producer({"bootstrap.servers": bootstrap})
    out: list[float] = []
    for i in range(samples + 1):  # the first is a warm-up: the share-partition starts there
        held: list[tuple[int, int, int]] = []
        deadline = time.monotonic() + 30
        while not held and time.monotonic() < deadline:
            p.produce(topic, VALUE)
            p.flush(10)
            held = holder.fetch(1000)
        if not held:
            raise RuntimeError("the holder acquired nothing in 30 s")
        acquired_at = time.monotonic()
        offset = held[0][0]
        got: list[tuple[int, int, int]] = []
        deadline = acquired_at + LOCK_MS / 1000 + 30
        while not any(f <= offset <= last and n >= 2 for f, last, n in got) \
                and time.monotonic() < deadline:
            got = taker.fetch(5000)
        if not got:
            raise RuntimeError("the held record never came back")
        if i:
            out.append((time.monotonic() - acquired_at) * 1000 - LOCK_MS)
        # the taker accepts it with its next fetch's piggy-back, or it expires again: either
        # way the next sample's record is a new one, past it
        taker.conn.request(ApiKey.SHARE_ACKNOWLEDGE, 1, {
            "group_id": group, "member_id": taker.member_id,
            "share_session_epoch": taker.epoch,
            "topics": [{"topic_id": taker.topic_id, "partitions": [{
                "partition_index": 0, "acknowledgement_batches": [
                    {"first_offset": offset, "last_offset": offset,
                     "acknowledge_types": [1]}]}]}]})
        taker.epoch += 1
    return out


def bench_share(bootstrap: str, records: int, samples: int, tag: str,
                consumers: tuple[int, ...] = CONSUMERS) -> ShareRun:
    """Both figures on one broker, share groups enabled there first."""
    enable_share_groups(bootstrap)
    run = ShareRun()
    for n in consumers:
        run.records_per_s[n] = throughput(bootstrap, n, records, tag)
    run.redelivery_ms = redelivery(bootstrap, samples, tag)
    return run


def summary(run: ShareRun) -> str:
    rates = ", ".join(f"{n}: {r:,.0f}/s" for n, r in run.records_per_s.items())
    lat = run.redelivery_ms
    return (f"{rates}; redelivery +{statistics.median(lat):.0f} ms median, "
            f"+{max(lat):.0f} ms max") if lat else rates


__all__ = ["bench_share", "ShareRun", "CONSUMERS", "LOCK_MS", "SETTINGS", "summary"]
