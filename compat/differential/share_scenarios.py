"""Share groups (KIP-932) client by client, on Apache Kafka and on pybroker: issue #34's six
scenarios, played unmodified by confluent-kafka's ShareConsumer (librdkafka's share consumer)
and by the Java client's KafkaShareConsumer 4.1.1 (through compat/java's JVM, driven call by
call as confluent's is: `CLIENTS`).

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
from typing import Any, Callable, Iterator, Protocol, Sequence

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

from compat.differential.config import SHARE_GROUPS as SETTINGS

LOCK_S = 2.0
Observation = dict[str, Any]


class Message(Protocol):
    """What the scenarios read of a delivery: confluent-kafka's Message, or the Java client's
    record (JavaShareMessage)."""

    def value(self) -> bytes | None: ...
    def delivery_count(self) -> int | None: ...
    def error(self) -> Any: ...


class Batch(Protocol):
    """One poll's deliveries: confluent-kafka's Messages (sized and iterable, but not a
    Sequence: its items are a Message or, sliced, Messages), or the Java client's list."""

    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[Message]: ...


class Consumer(Protocol):
    """An explicit-acknowledgement share consumer, subscribed: confluent-kafka's
    ShareConsumer, or the Java client's KafkaShareConsumer (JavaShareConsumer)."""

    def poll(self, timeout: float) -> Batch: ...
    def acknowledge(self, message: Any, type: AcknowledgeType) -> Any: ...
    def commit_sync(self) -> Any: ...
    def close(self) -> None: ...


class Holder(Protocol):
    """A consumer in a process of its own that got a warm-up record and holds the first other
    records it gets, unacknowledged, until it is killed -9."""

    def hold(self, values: list[bytes]) -> list[str]: ...
    def kill(self) -> None: ...


class Client(Protocol):
    """A share-consumer client the scenarios are played with: `key` names it in topics and
    groups and on the command line, `name` in the report."""

    key: str
    name: str

    def consumer(self, bootstrap: str, group: str, topic: str) -> Consumer: ...
    def holder(self, bootstrap: str, group: str, topic: str) -> Holder: ...


# (client, bootstrap, restart: a function that kills -9 and restarts the broker on its port)
Scenario = Callable[[Client, str, Callable[[], None]], Observation]


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
                       early: list[tuple[bytes, int]] | None = None,
                       client: Client | None = None) -> Consumer:
    """A consumer that got a warm-up record (accepted): from then on what is produced is
    delivered. One that gets none in 8 s is closed and another made: Kafka 4.1.1 fails every
    ShareFetch of a member whose id librdkafka 2.16 drew with a '+' or '/' in it (standard
    base64, where Kafka's Uuid.fromString wants the URL-safe alphabet: "Illegal base64
    character", UNKNOWN_SERVER_ERROR), about every other consumer; such a consumer never gets
    a record there. Records other than warm-ups delivered meanwhile are accepted and added
    to `early` (value, delivery count). `client`: confluent-kafka's by default."""
    for _ in range(tries):
        c = (client or CONFLUENT).consumer(bootstrap, group, topic)
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


def _drain(c: Consumer, until: Callable[[list[tuple[bytes, int]]], bool],
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
def polling(consumers: Sequence[Consumer], take: Callable[[int, Message], None]
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


def _names(client: Client, scenario: str) -> tuple[str, str]:
    """A scenario's topic and group for `client`: each client has its own, so that the
    clients can be played one after the other on one broker."""
    return f"share-{scenario}-{client.key}", f"sg-{scenario}-{client.key}"


def three_consumers_read_each_record_once(client: Client, bootstrap: str,
                                          restart: Callable[[], None]) -> Observation:
    topic, group = _names(client, "three")
    consumers = [_fetching_consumer(bootstrap, group, topic, client=client) for _ in range(3)]
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


def release_redelivers(client: Client, bootstrap: str, restart: Callable[[], None]
                       ) -> Observation:
    """A released record comes again at once, its delivery count one higher."""
    topic, group = _names(client, "release")
    c = _fetching_consumer(bootstrap, group, topic, client=client)
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


def _acknowledging(client: Client, bootstrap: str, name: str, values: list[bytes],
                   seconds: float, ack: Callable[[bytes, int], AcknowledgeType]
                   ) -> Observation:
    """One consumer of a fresh topic acknowledging each delivery of `values` as `ack` says,
    for `seconds`: every delivery it saw."""
    topic, group = _names(client, name)
    c = _fetching_consumer(bootstrap, group, topic, client=client)
    try:
        _produce(bootstrap, topic, values)
        got = _drain(c, lambda g: False, seconds, ack)
        c.commit_sync()
    finally:
        c.close()
    return {"deliveries (value, delivery count)": sorted(got)}


def reject_archives(client: Client, bootstrap: str, restart: Callable[[], None]
                    ) -> Observation:
    """A rejected record never comes back, not even after a lock's time."""
    return _acknowledging(client, bootstrap, "reject", [b"reject-me", b"accept-me"], 3 * LOCK_S,
                          lambda v, n: AcknowledgeType.REJECT if v == b"reject-me"
                          else AcknowledgeType.ACCEPT)


def delivery_limit_archives_a_poison_record(client: Client, bootstrap: str,
                                            restart: Callable[[], None]) -> Observation:
    """Released at every delivery, a record is archived at group.share.delivery.count.limit
    (3 here) deliveries."""
    return _acknowledging(client, bootstrap, "poison", [b"poison", b"fine"], 4 * LOCK_S,
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


class _ProcessHolder:
    """confluent-kafka's holder: the HOLDER script in a Python process of its own."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.proc, self.lines = start_holder(bootstrap, group, topic)

    def hold(self, values: list[bytes]) -> list[str]:
        return hold(self.bootstrap, self.topic, self.lines, values)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class _JavaHolder:
    """The Java client's holder: a KafkaShareConsumer in a JVM of its own (started again, up
    to `tries` times, until one gets a warm-up record in `seconds`), which holds the first
    poll that brings other records, unacknowledged, until the JVM is killed -9."""

    def __init__(self, bootstrap: str, group: str, topic: str, tries: int = 3,
                 seconds: float = 20.0) -> None:
        from compat.clients.java_client import ADAPTER
        self.bootstrap, self.topic = bootstrap, topic
        for _ in range(tries):
            self.consumer = ADAPTER.share_consumer(bootstrap, group, topic, killable=True)
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                _produce(bootstrap, topic, [b"warm-up"])
                msgs = self.consumer.poll(0.5)
                for m in msgs:
                    self.consumer.acknowledge(m, AcknowledgeType.ACCEPT)
                if msgs:
                    return
            self.consumer.kill()
        raise RuntimeError(f"no Java holder got a warm-up record in {tries} tries")

    def hold(self, values: list[bytes]) -> list[str]:
        _produce(self.bootstrap, self.topic, values)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msgs = self.consumer.poll(0.5)
            payload = [(m.value() or b"").decode() for m in msgs if m.value() != b"warm-up"]
            if payload:
                return sorted(payload)  # held: nothing of this poll is acknowledged
            for m in msgs:
                self.consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        raise RuntimeError(f"the Java holder got none of {values!r} in 30 s")

    def kill(self) -> None:
        if self.consumer.proc is not None and self.consumer.proc.poll() is None:
            self.consumer.kill()


class Confluent:
    key, name = "confluent", "confluent-kafka ShareConsumer"

    def consumer(self, bootstrap: str, group: str, topic: str) -> Consumer:
        return _consumer(bootstrap, group, topic)

    def holder(self, bootstrap: str, group: str, topic: str) -> Holder:
        return _ProcessHolder(bootstrap, group, topic)


class Java:
    key, name = "java", "Java KafkaShareConsumer"

    def consumer(self, bootstrap: str, group: str, topic: str) -> Consumer:
        from compat.clients.java_client import ADAPTER
        return ADAPTER.share_consumer(bootstrap, group, topic)

    def holder(self, bootstrap: str, group: str, topic: str) -> Holder:
        return _JavaHolder(bootstrap, group, topic)


CONFLUENT, JAVA = Confluent(), Java()
# The clients the differential plays the scenarios with, by the key `--share KEY` takes.
CLIENTS: dict[str, Client] = {c.key: c for c in (CONFLUENT, JAVA)}


def killed_consumers_records_come_back(client: Client, bootstrap: str,
                                       restart: Callable[[], None]) -> Observation:
    """A consumer process holding records is killed -9: another consumer gets them (when:
    at the connection's close, or when the acquisition lock runs out, is not observed; the
    delivery count tells which)."""
    topic, group = _names(client, "killed")
    c: Consumer | None = None
    holder = client.holder(bootstrap, group, topic)
    try:
        held = holder.hold([b"a", b"b", b"c"])
        holder.kill()
        got: list[tuple[bytes, int]] = []
        c = _fetching_consumer(bootstrap, group, topic, early=got, client=client)
        got += _drain(c, lambda g: len(got) + len(g) >= len(held), 30)
        c.commit_sync()
    finally:
        holder.kill()
        if c is not None:
            c.close()
    return {"held by the killed consumer": held,
            "then delivered (value, delivery count)": sorted(got)}


def restart_keeps_the_state(client: Client, bootstrap: str, restart: Callable[[], None]
                            ) -> Observation:
    """Acknowledged records stay done across a kill -9 and restart of the broker; a record
    delivered and not acknowledged comes again."""
    topic, group = _names(client, "restart")
    c = _fetching_consumer(bootstrap, group, topic, client=client)
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
    again = _fetching_consumer(bootstrap, group, topic, early=after, client=client)
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


def observe(bootstrap: str, restart: Callable[[], None], client: Client) -> dict[str, Any]:
    """Each scenario's observation on one broker (share groups must be enabled there) with
    `client`, or the error that stopped it ("error": text)."""
    out: dict[str, Any] = {}
    for name, scenario in SCENARIOS.items():
        try:
            out[name] = _jsonable(scenario(client, bootstrap, restart))
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
        "pybroker kept them until the lock ran out and counted 2. It now does as Kafka. "
        "The Java KafkaShareConsumer, its JVM killed -9 holding them, sees the same on "
        "both: they come again at once, with count 1."),
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


def _observe_fresh(broker: _Restartable, end: Callable[[], None],
                   clients: Sequence[Client]) -> dict[str, dict[str, Any]]:
    """`observe` on `broker` with each of `clients` (by name), started here with
    share.version finalized; its restart kills it -9 and starts it again on its data. `end`
    takes it down afterwards, as the caller says, even when a scenario raised."""
    broker.start()
    try:
        enable_share_groups(broker.bootstrap)

        def restart() -> None:
            broker.kill()
            broker.restart()
        return {client.name: observe(broker.bootstrap, restart, client) for client in clients}
    finally:
        end()


def run_both(clients: Sequence[Client] = (CONFLUENT, JAVA)) -> dict[str, Any]:
    """Fresh Apache Kafka and pybroker (a process, so that it can be killed -9), each with
    the differential's settings and `SETTINGS`, share.version finalized at 1 on both; the
    scenarios with each of `clients` on each broker (Kafka first), compared client by
    client ({client name: compare's answer}). Each scenario has its own topic and group, so
    a broker serves the clients one after the other; the restart scenario's kill -9 and
    restart leave the next client a broker with the same settings."""
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
        on_kafka = _observe_fresh(kafka, kafka.kill, clients)
        config = {k.replace(".", "_"): v for k, v in settings.items()}
        # Kafka's keys, `_` for `.`: none spells keep, log_dir or log_lines (a dict's keys are
        # beyond mypy, which holds its str values against those keywords' types).
        broker = Broker(process=True, **config)  # type: ignore[arg-type]
        on_pybroker = _observe_fresh(broker, broker.stop, clients)
    return {c.name: compare(on_kafka[c.name], on_pybroker[c.name]) for c in clients}
