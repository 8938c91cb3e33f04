"""Share groups (KIP-932) client by client, on Apache Kafka and on pybroker: issue #34's six
scenarios, played by confluent-kafka's ShareConsumer (librdkafka's share consumer) unmodified.

The wire corpus compares answers request by request; these scenarios compare what a
consumer application sees, which is what a share group promises: who got which record, how
many times (the delivery count each delivery carried), and what came back after a release, a
lock expiry, a kill -9 of the consumer and a restart of the broker. Each scenario uses its own
topic and group, warms the share-partition up (share.auto.offset.reset is latest: records
produced before a consumer first fetches are not delivered) and returns an observation that
holds no timing and no offsets, so the two brokers' observations are compared as they are.
`SETTINGS` are the share-group settings both brokers run with (short locks: the scenarios
wait for their expiry).
"""
from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Protocol

from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer

SETTINGS = {
    "group.share.record.lock.duration.ms": "2000",
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.delivery.count.limit": "3",
}
LOCK_S = 2.0
Observation = dict[str, Any]
# (bootstrap, restart: a function that kills -9 and restarts the broker on its port)
Scenario = Callable[[str, Callable[[], None]], Observation]


def enable_share_groups(bootstrap: str) -> None:
    """kafka-features.sh upgrade --feature share.version=1, on either broker."""
    from compat.wire import request
    from protocol.api_keys import ApiKey
    r = request(bootstrap, ApiKey.UPDATE_FEATURES, 1, {
        "timeout_ms": 60000, "validate_only": False,
        "feature_updates": [{"feature": "share.version", "max_version_level": 1,
                             "upgrade_type": 1}]})
    if r.error_code:
        raise RuntimeError(f"share.version not finalized: {r}")


def _consumer(bootstrap: str, group: str, topic: str, explicit: bool = True) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       **({"share.acknowledgement.mode": "explicit"} if explicit else {})})
    c.subscribe([topic])
    return c


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(topic, v)
    if p.flush(30):
        raise RuntimeError(f"records to {topic} not delivered in 30 s")


def _fetching_consumer(bootstrap: str, group: str, topic: str, tries: int = 8,
                       early: list[tuple[bytes, int]] | None = None) -> ShareConsumer:
    """A consumer that got a warm-up record (accepted): from then on what is produced is
    delivered. One that gets none in 8 s is closed and another made: Kafka 4.1.1 fails every
    ShareFetch of a member whose id librdkafka 2.16 drew with a '+' or '/' in it (standard
    base64, where Kafka's Uuid.fromString wants the URL-safe alphabet: "Illegal base64
    character", UNKNOWN_SERVER_ERROR), about every other consumer; such a consumer never gets
    a record there. Records other than warm-ups delivered meanwhile are accepted and added
    to `early` (value, delivery count)."""
    for _ in range(tries):
        c = _consumer(bootstrap, group, topic)
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            _produce(bootstrap, topic, [b"warm-up"])
            msgs = [m for m in c.poll(0.5) if m.error() is None]
            for m in msgs:
                if m.value() != b"warm-up" and early is not None:
                    early.append((m.value() or b"", m.delivery_count() or 0))
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            if msgs:
                return c
        c.close()
    raise RuntimeError(f"no consumer of {topic} got a warm-up record in {tries} tries")


def _drain(c: ShareConsumer, until: Callable[[list[tuple[bytes, int]]], bool],
           limit: float, ack: Callable[[bytes, int], AcknowledgeType] | None = None
           ) -> list[tuple[bytes, int]]:
    """(value, delivery count) of each delivery but warm-ups, acknowledged as `ack` says
    (ACCEPT by default), until `until` holds or `limit` seconds passed."""
    got: list[tuple[bytes, int]] = []
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and not until(got):
        for m in c.poll(0.3):
            if m.error() is not None:
                continue
            if m.value() != b"warm-up":
                got.append((m.value() or b"", m.delivery_count() or 0))
            c.acknowledge(m, AcknowledgeType.ACCEPT if ack is None or m.value() == b"warm-up"
                          else ack(m.value() or b"", m.delivery_count() or 0))
    return got


@contextmanager
def polling(consumers: list[ShareConsumer], take: Callable[[int, Message], None]
            ) -> Iterator[None]:
    """Each consumer polls in a thread of its own while the block runs, handing every
    delivery that is not an error to `take(its index, the message)`; at the block's end
    (or its exception) the threads are stopped and joined and the consumers closed, so a
    scenario or test never leaves a consumer polling behind it. `take` runs in those
    threads."""
    stop = threading.Event()

    def run(i: int) -> None:
        while not stop.is_set():
            for m in consumers[i].poll(0.2):
                if m.error() is None:
                    take(i, m)

    threads = [threading.Thread(target=run, args=(i,), daemon=True)
               for i in range(len(consumers))]
    for t in threads:
        t.start()
    try:
        yield
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        for c in consumers:
            c.close()


def three_consumers_read_each_record_once(bootstrap: str, restart: Callable[[], None]
                                          ) -> Observation:
    topic, group = "share-three", "sg-three"
    consumers = [_fetching_consumer(bootstrap, group, topic) for _ in range(3)]
    got: list[list[bytes]] = [[] for _ in consumers]

    def take(i: int, m: Message) -> None:
        if m.value() != b"warm-up":
            got[i].append(m.value() or b"")
        consumers[i].acknowledge(m, AcknowledgeType.ACCEPT)

    payload = [f"r{i}".encode() for i in range(300)]
    with polling(consumers, take):
        for i in range(0, 300, 30):  # several batches, so that all three may get some
            _produce(bootstrap, topic, payload[i:i + 30])
        deadline = time.monotonic() + 60
        while sum(len(g) for g in got) < 300 and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2 * LOCK_S)  # nothing comes twice, not even after a lock's time
    seen = [v for g in got for v in g]
    return {"records produced": 300, "deliveries": len(seen),
            "every record once": sorted(seen) == sorted(payload)}


def release_redelivers(bootstrap: str, restart: Callable[[], None]) -> Observation:
    """A released record comes again at once, its delivery count one higher."""
    topic, group = "share-release", "sg-release"
    c = _fetching_consumer(bootstrap, group, topic)
    try:
        _produce(bootstrap, topic, [b"release-me", b"accept-me"])
        got = _drain(c, lambda g: [v for v, _ in g].count(b"release-me") >= 2, 30,
                     lambda v, n: AcknowledgeType.RELEASE if v == b"release-me" and n == 1
                     else AcknowledgeType.ACCEPT)
        got += _drain(c, lambda g: False, 2 * LOCK_S)  # and then nothing more
        c.commit_sync()
    finally:
        c.close()
    return {"deliveries (value, delivery count)": sorted(got)}


def _acknowledging(bootstrap: str, name: str, values: list[bytes], seconds: float,
                   ack: Callable[[bytes, int], AcknowledgeType]) -> Observation:
    """One consumer of a fresh topic acknowledging each delivery of `values` as `ack` says,
    for `seconds`: every delivery it saw."""
    c = _fetching_consumer(bootstrap, f"sg-{name}", f"share-{name}")
    try:
        _produce(bootstrap, f"share-{name}", values)
        got = _drain(c, lambda g: False, seconds, ack)
        c.commit_sync()
    finally:
        c.close()
    return {"deliveries (value, delivery count)": sorted(got)}


def reject_archives(bootstrap: str, restart: Callable[[], None]) -> Observation:
    """A rejected record never comes back, not even after a lock's time."""
    return _acknowledging(bootstrap, "reject", [b"reject-me", b"accept-me"], 3 * LOCK_S,
                          lambda v, n: AcknowledgeType.REJECT if v == b"reject-me"
                          else AcknowledgeType.ACCEPT)


def delivery_limit_archives_a_poison_record(bootstrap: str, restart: Callable[[], None]
                                            ) -> Observation:
    """Released at every delivery, a record is archived at group.share.delivery.count.limit
    (3 here) deliveries."""
    return _acknowledging(bootstrap, "poison", [b"poison", b"fine"], 4 * LOCK_S,
                          lambda v, n: AcknowledgeType.RELEASE if v == b"poison"
                          else AcknowledgeType.ACCEPT)


# How the script of a consumer process starts (argv: bootstrap, group, topic): an explicit
# ShareConsumer subscribed, and its poll loop, each poll's good records in `msgs`.
CONSUMER_PROCESS = """
import json, sys, time
from confluent_kafka import AcknowledgeType, ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                   "share.acknowledgement.mode": "explicit"})
c.subscribe([sys.argv[3]])
while True:
    msgs = [m for m in c.poll(0.5) if m.error() is None]
"""

# A consumer process that accepts warm-ups, then holds the first other records it gets
# until it is killed (argv: bootstrap, group, topic).
HOLDER = CONSUMER_PROCESS + """\
    payload = [m.value().decode() for m in msgs if m.value() != b"warm-up"]
    if payload:
        print("held:" + ",".join(payload), flush=True)
        time.sleep(600)  # holding them until killed
    for m in msgs:
        c.acknowledge(m, AcknowledgeType.ACCEPT)
    if msgs:
        print("warm", flush=True)
"""


def _lines(proc: subprocess.Popen[str], into: queue.Queue[str]) -> None:
    for line in proc.stdout or ():
        into.put(line.strip())


def start_holder(bootstrap: str, group: str, topic: str, tries: int = 8,
                 seconds: float = 10.0) -> tuple[subprocess.Popen[str], queue.Queue[str]]:
    """A HOLDER process of `group` that got a warm-up record, and the queue its later lines
    come to. Warm-up records are produced until it says "warm"; one that does not in
    `seconds` is killed and another started, `tries` times (on Kafka 4.1.1 about every
    other member id cannot be read: see _fetching_consumer), then RuntimeError. Each
    holder has a queue of its own, so a late "warm" of a killed one is never taken for the
    next one's."""
    for _ in range(tries):
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, bootstrap, group, topic],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=_lines, args=(holder, lines), daemon=True).start()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            _produce(bootstrap, topic, [b"warm-up"])
            try:
                if lines.get(timeout=0.5) == "warm":
                    return holder, lines
            except queue.Empty:
                pass
        holder.kill()
        holder.wait(10)
    raise RuntimeError(f"no holder got a warm-up record in {tries} tries of {seconds:.0f} s")


def hold(bootstrap: str, topic: str, lines: queue.Queue[str], values: list[bytes]
         ) -> list[str]:
    """Produce `values` to a started holder's topic: the values it then holds (the first
    delivery it got, which need not be all of them), sorted."""
    _produce(bootstrap, topic, values)
    line = ""
    while not line.startswith("held:"):
        line = lines.get(timeout=30)
    return sorted(line[len("held:"):].split(","))


def killed_consumers_records_come_back(bootstrap: str, restart: Callable[[], None]
                                       ) -> Observation:
    """A consumer process holding records is killed -9: another consumer gets them (when:
    at the connection's close, or when the acquisition lock runs out, is not observed; the
    delivery count tells which)."""
    topic, group = "share-killed", "sg-killed"
    c: ShareConsumer | None = None
    holder: subprocess.Popen[str] | None = None
    try:
        holder, lines = start_holder(bootstrap, group, topic)
        held = hold(bootstrap, topic, lines, [b"a", b"b", b"c"])
        holder.kill()
        holder.wait(10)
        got: list[tuple[bytes, int]] = []
        c = _fetching_consumer(bootstrap, group, topic, early=got)
        got += _drain(c, lambda g: len(got) + len(g) >= len(held), 30)
        c.commit_sync()
    finally:
        if holder is not None and holder.poll() is None:
            holder.kill()
        if c is not None:
            c.close()
    return {"held by the killed consumer": held,
            "then delivered (value, delivery count)": sorted(got)}


def restart_keeps_the_state(bootstrap: str, restart: Callable[[], None]) -> Observation:
    """Acknowledged records stay done across a kill -9 and restart of the broker; a record
    delivered and not acknowledged comes again."""
    topic, group = "share-restart", "sg-restart"
    c = _fetching_consumer(bootstrap, group, topic)
    try:
        _produce(bootstrap, topic, [b"done-1", b"done-2"])
        first = _drain(c, lambda g: len(g) >= 2, 30)
        c.commit_sync()
        _produce(bootstrap, topic, [b"pending"])
        pending = _drain(c, lambda g: len(g) >= 1, 30,
                         lambda v, n: AcknowledgeType.RELEASE)
        # released, and the release written: then the broker goes down hard
        c.commit_sync()
    finally:
        c.close()
    restart()
    after: list[tuple[bytes, int]] = []
    again = _fetching_consumer(bootstrap, group, topic, early=after)
    try:
        after += _drain(again, lambda g: len(after) + len(g) >= 1, 60)
        after += _drain(again, lambda g: False, 2 * LOCK_S)
        again.commit_sync()
    finally:
        again.close()
    return {"before the restart (value, delivery count)": sorted(first + pending),
            "after it": sorted(after)}


SCENARIOS: dict[str, Scenario] = {
    "three consumers share one partition and read each record once":
        three_consumers_read_each_record_once,
    "a released record is redelivered": release_redelivers,
    "a killed consumer's records come back": killed_consumers_records_come_back,
    "reject archives a record": reject_archives,
    "the delivery limit archives a poison record": delivery_limit_archives_a_poison_record,
    "a restart keeps the state": restart_keeps_the_state,
}


def observe(bootstrap: str, restart: Callable[[], None]) -> dict[str, Any]:
    """Each scenario's observation on one broker (share groups must be enabled there), or
    the error that stopped it ("error": text)."""
    out: dict[str, Any] = {}
    for name, scenario in SCENARIOS.items():
        try:
            out[name] = _jsonable(scenario(bootstrap, restart))
        except Exception as exc:  # reported, not raised: the other scenarios still run
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


# Why an observation differs between the two brokers, where it does (scenario -> reason).
EXPLAINED: dict[str, str] = {}
# Differences these scenarios found and pybroker then fixed (scenario -> what).
FIXED: dict[str, str] = {
    "a killed consumer's records come back": (
        "Kafka 4.1.1 ends a share session when its connection closes (ConnectionDisconnect"
        "Listener) and gives its records back at once with the delivery taken back "
        "(releaseAcquiredRecords, DeliveryCountOps.DECREASE): they came again with count 1; "
        "pybroker kept them until the lock ran out and counted 2. It now does as Kafka."),
}


def compare(kafka: dict[str, Any], pybroker: dict[str, Any]) -> dict[str, Any]:
    """Per scenario: both observations, `status` (identical, deliberate: a difference
    EXPLAINED, differs: one not, error: a scenario that could not run) and the reason."""
    out = {}
    for name in SCENARIOS:
        k, p = kafka.get(name, {}), pybroker.get(name, {})
        if "error" in k or "error" in p:
            status = "error"
        elif k == p:
            status = "identical"
        else:
            status = "deliberate" if name in EXPLAINED else "differs"
        out[name] = {"kafka": k, "pybroker": p, "status": status,
                     "reason": EXPLAINED.get(name) if status == "deliberate" else None}
    return out


class _Restartable(Protocol):
    """What the scenarios need of a broker: ApacheKafka, or pybroker's Broker(process=True)."""

    @property
    def bootstrap(self) -> str: ...
    def start(self) -> object: ...
    def kill(self) -> None: ...
    def restart(self) -> object: ...


def _observe_fresh(broker: _Restartable, end: Callable[[], None]) -> dict[str, Any]:
    """`observe` on `broker`, started here with share.version finalized; its restart kills
    it -9 and starts it again on its data. `end` takes it down afterwards, as the caller
    says, even when a scenario raised."""
    broker.start()
    try:
        enable_share_groups(broker.bootstrap)

        def restart() -> None:
            broker.kill()
            broker.restart()
        return observe(broker.bootstrap, restart)
    finally:
        end()


def run_both() -> dict[str, Any]:
    """Fresh Apache Kafka and pybroker (a process, so that it can be killed -9), each with
    the differential's settings and `SETTINGS`, share.version finalized at 1 on both; the
    scenarios on each (Kafka first), compared."""
    import tempfile
    from pathlib import Path

    from compat.apache_kafka import ApacheKafka
    from compat.differential.config import SHARED
    from pybroker.testing import Broker

    settings = {**SHARED, **SETTINGS}
    with tempfile.TemporaryDirectory(prefix="share-differential-") as tmp:
        kafka = ApacheKafka(Path(tmp) / "kafka", overrides=settings)
        # Kafka is killed, not stopped: its data goes with `tmp`, so a controlled
        # shutdown would only cost time; the Broker's stop also removes its log dir.
        on_kafka = _observe_fresh(kafka, kafka.kill)
        broker = Broker(process=True, **{k.replace(".", "_"): v for k, v in settings.items()})
        on_pybroker = _observe_fresh(broker, broker.stop)
    return compare(on_kafka, on_pybroker)
