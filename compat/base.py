"""The common interface every client adapter implements, and the records they exchange.

An adapter exposes what one client can do in the small vocabulary the scenarios speak:
produce records (also in transactions), read them back (from the beginning, from an offset,
from a timestamp, as a group that commits, under an isolation level to the end), run a
long-lived group member, and administer topics and configs. A
method the client cannot express raises `NotApplicable` with the reason, which the matrix shows
as N/A with a footnote; `Adapter`'s own implementations all do, so an adapter only overrides
what its client can do. Any other exception is a failure.

Adapters import their client library inside their methods: listing the adapters must not
need every client installed.
"""
from __future__ import annotations

import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Sequence

if TYPE_CHECKING:
    from compat.differential.share_scenarios import Client as ShareClient

Headers = tuple[tuple[str, "bytes | None"], ...]

TIMEOUT_S = 20.0  # how long a read waits for the records it expects

# A client's own settings, by its own names (e.g. {"acks": 1} for kafka-python).
Settings = Optional[Mapping[str, Any]]


class NotApplicable(Exception):
    """The client cannot express this scenario (the message says why)."""


class ProduceFailed(Exception):
    """The client reported that a record was not delivered (the message is its error)."""


@dataclass(frozen=True)
class Rec:
    """A record to produce. `partition` None lets the client's partitioner choose;
    `timestamp` None lets the client stamp it."""

    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp: int | None = None
    partition: int | None = None


@dataclass(frozen=True)
class Got:
    """A record read back."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers = field(default=())
    timestamp: int = -1


@dataclass(frozen=True)
class Txn:
    """One transaction to produce: its records (each with its partition), then commit or
    abort."""

    recs: tuple[Rec, ...]
    commit: bool


@dataclass(frozen=True)
class GroupView:
    """A consumer group as the client's admin API describes it: its state in Kafka's spelling
    ("Stable", "Empty"; compared without case), the assignor its members chose ("" when
    none), and each member's assignment as topic -> partitions."""

    state: str
    assignor: str
    members: tuple[dict[str, list[int]], ...]


READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"


def next_offsets(got: list[Got]) -> dict[int, int]:
    """Per partition, the offset after the last record read: what a consumer commits."""
    last: dict[int, int] = {}
    for g in got:
        last[g.partition] = max(last.get(g.partition, -1), g.offset)
    return {p: o + 1 for p, o in last.items()}


class Member:
    """A consumer-group member running in the background (a thread or a child process).

    `values()` are the values it has taken so far; `stop()` closes it gracefully (leaving the
    group); `debug()` is shown when a scenario fails.
    """

    def values(self) -> list[bytes]:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def debug(self) -> str:
        return ""

    def kill(self) -> None:
        """SIGKILL the member's process: it neither commits nor leaves (kill -9)."""
        raise NotApplicable("this member shares a process with others; it cannot be killed "
                            "alone")


class ProcessMember(Member):
    """A member that is a command-line consumer printing one value per line.

    `stop()` sends SIGTERM, on which the command commits what it printed and leaves the group.
    """

    def __init__(self, label: str, args: list[str], **popen: Any) -> None:
        self.label = label
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     **popen)
        self._taken: list[bytes] = []
        self._stderr: list[str] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lock:
                self._taken.append(line.rstrip(b"\n"))

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line.decode(errors="replace"))

    def values(self) -> list[bytes]:
        with self._lock:
            return list(self._taken)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise RuntimeError(f"{self.label} did not stop within 20 s of SIGTERM")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def debug(self) -> str:
        return f"{self.label} pid {self.proc.pid}: {len(self._taken)} taken; " + \
            " | ".join(s.strip() for s in self._stderr[-5:])


class ThreadMember(Member):
    """A member whose consumer loop runs in a thread: `body(stopping, take)` polls until
    `stopping()` is true, calls `take(value)` per record, then closes its consumer."""

    def __init__(self, name: str, body: Callable[[Callable[[], bool], Callable[[bytes], None]],
                                                 None]) -> None:
        self._taken: list[bytes] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.error: BaseException | None = None

        def run() -> None:
            try:
                body(self._stop.is_set, self._take)
            except BaseException as exc:  # reported by debug() and stop()
                self.error = exc

        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()

    def _take(self, value: bytes) -> None:
        with self._lock:
            self._taken.append(value)

    def values(self) -> list[bytes]:
        with self._lock:
            return list(self._taken)

    def request_stop(self) -> None:
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        if self._thread.is_alive():
            raise RuntimeError(f"{self._thread.name} did not stop within 30 s")
        if self.error is not None:
            raise RuntimeError(f"{self._thread.name} failed: {self.error!r}") from self.error

    def debug(self) -> str:
        return f"{self._thread.name}: {len(self._taken)} taken, error={self.error!r}"


def stop_all(members: Iterable[Member]) -> None:
    """Stop members concurrently (each may take a poll interval to notice)."""
    members = list(members)
    for m in members:
        if isinstance(m, ThreadMember):
            m.request_stop()
    errors = []
    for m in members:
        try:
            m.stop()
        except Exception as exc:  # keep stopping the others
            errors.append(exc)
    if errors:
        raise errors[0]


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


class Adapter:
    """One client. Subclasses set `name` (the matrix column) and override what they can do."""

    name = "?"
    order = 100  # column order in the matrix

    def __init__(self) -> None:
        self.notes: list[str] = []  # qualifications a run adds to a passing cell (`note()`)

    def note(self, text: str) -> None:
        """Qualify the current cell (shown as a footnote when it passes)."""
        if text not in self.notes:
            self.notes.append(text)

    @property
    def no_admin(self) -> str:
        return f"{self.name} has no admin API"

    # -- what the client is ---------------------------------------------------------------------
    def versions(self) -> dict[str, str]:
        """Component -> version, e.g. {"confluent-kafka": "2.16.1", "librdkafka": "2.16.0"}."""
        raise NotImplementedError

    def missing(self) -> str | None:
        """Why this client cannot run here at all (not installed), or None."""
        return None

    def prepare(self) -> None:
        """Build or install what the client needs (cached), before any cell runs: a first
        build can outlast a scenario's timeout (compat/go compiles in over a minute cold)."""

    # -- capabilities the scenarios ask about before producing ---------------------------------
    def cannot(self, feature: str) -> str | None:
        """Why the client cannot express `feature`, or None. Features: "partition" (produce to
        a chosen partition), "timestamp" (set a record's timestamp), "null-header-value",
        "codec:<name>", "idempotence", "transactions" (begin, commit and abort)."""
        return None

    # -- producing and consuming ----------------------------------------------------------------
    def produce(self, bootstrap: str, topic: str, recs: list[Rec], *, codec: str = "none",
                idempotent: bool = False, config: Settings = None) -> None:
        """Write `recs` in order and wait until each is acknowledged; ProduceFailed (or any
        exception) if one is not. `config`: the client's own producer settings, over the
        adapter's (the integration tests choose acks or turn idempotence off this way)."""
        raise NotApplicable(f"{self.name} cannot produce")

    def produce_transactions(self, bootstrap: str, topic: str, txns: list[Txn],
                             transactional_id: str,
                             while_open: Callable[[int], None] | None = None) -> None:
        """Run `txns` in order with one transactional producer of id `transactional_id`: begin,
        write the records, wait until each is acknowledged, call `while_open(i)` (the
        transaction is still open: the scenario writes beside it), then commit or abort.
        Clients that cannot say why in `cannot("transactions")`."""
        raise NotApplicable(self.cannot("transactions") or f"{self.name} has no transactions")

    def consume(self, bootstrap: str, topic: str, partitions: list[int],
                count: int) -> list[Got]:
        """Read `partitions` from the beginning, without a group, until `count` records."""
        raise NotApplicable(f"{self.name} cannot consume")

    def consume_to_end(self, bootstrap: str, topic: str, partitions: list[int], count: int,
                       isolation: str) -> tuple[list[Got], dict[int, int]]:
        """Read `partitions` from the beginning under `isolation` (READ_COMMITTED or
        READ_UNCOMMITTED) until `count` records and on until the end that level allows (past
        the transaction markers); the records and, per partition, where the consumer ended up
        (its position, or what it committed on closing) as the client reports it."""
        raise NotApplicable(f"{self.name} cannot choose an isolation level")

    def consume_from(self, bootstrap: str, topic: str, partition: int, offset: int,
                     count: int) -> list[Got]:
        """Read one partition from `offset` (seek), until `count` records."""
        raise NotApplicable(f"{self.name} cannot seek to an offset")

    def consume_from_time(self, bootstrap: str, topic: str, partition: int, timestamp: int,
                          count: int) -> list[Got]:
        """Read one partition from the first offset whose timestamp is >= `timestamp`."""
        raise NotApplicable(f"{self.name} cannot seek to a timestamp")

    def consume_group(self, bootstrap: str, topic: str, group: str, count: int) -> list[Got]:
        """Join `group` (subscribe to `topic`, earliest if nothing committed), take exactly
        `count` records, commit exactly those, leave."""
        raise NotApplicable(f"{self.name} cannot consume in a group")

    def committed(self, bootstrap: str, group: str, topic: str,
                  partitions: list[int]) -> dict[int, int]:
        """The group's committed offset per partition as the client reports it (-1: none)."""
        raise NotApplicable(f"{self.name} cannot show a group's committed offsets")

    def start_member(self, bootstrap: str, topic: str, group: str) -> Member:
        """A long-lived member of `group` subscribed to `topic` (earliest if nothing
        committed), committing what it takes."""
        raise NotApplicable(f"{self.name} cannot run a group member")

    def start_member_as(self, bootstrap: str, topic: str, group: str, *,
                        cooperative: bool = False, instance_id: str | None = None) -> Member:
        """Like `start_member`, with the cooperative-sticky assignor (`cooperative`) and/or
        static membership (`instance_id`: group.instance.id). A static member's `stop()` closes
        it without leaving the group, as the client does by default for static members."""
        raise NotApplicable(f"{self.name}'s adapter cannot choose the assignor or "
                            "group.instance.id of a member")

    def start_consumer_member(self, bootstrap: str, group: str, *,
                              topics: Sequence[str] = (), regex: str | None = None,
                              instance_id: str | None = None, killable: bool = False) -> Member:
        """A member joining by the consumer group protocol (KIP-848, `group.protocol=consumer`:
        ConsumerGroupHeartbeat, the broker's assignor), subscribed to `topics` or to the topics
        matching `regex` (resolved by the broker), committing what it takes. `killable`: in a
        process of its own, so that `kill()` can SIGKILL it. A static member's `stop()` leaves
        with epoch -2 (it may come back), another's with -1."""
        raise NotApplicable(f"{self.name}'s adapter cannot run a consumer-protocol member")

    def consume_consumer_group(self, bootstrap: str, topic: str, group: str,
                               count: int) -> list[Got]:
        """`consume_group` with the consumer group protocol (KIP-848): commits at its member
        epoch (OffsetCommit v9+)."""
        raise NotApplicable(f"{self.name}'s adapter cannot consume in a consumer-protocol group")

    def share_client(self) -> "ShareClient":
        """The client's share consumer (KIP-932), as compat/differential/share_scenarios.py
        plays it (explicit acknowledgement, and a consumer in a process of its own that can
        be killed -9 holding records): the same player the differential ran on Apache Kafka
        4.1.1, whose observations the share rows expect."""
        raise NotApplicable(f"{self.name}'s adapter cannot run a share consumer")

    def offsets_for_times(self, bootstrap: str, topic: str,
                          times: dict[int, int]) -> dict[int, tuple[int, int] | None]:
        """Per partition, (offset, timestamp) of the first record whose timestamp is >= the
        given one, None when there is none (the client's offsetsForTimes)."""
        raise NotApplicable(f"{self.name} has no offsets-for-times lookup")

    # -- administration -------------------------------------------------------------------------
    def create_topic(self, bootstrap: str, topic: str, partitions: int,
                     configs: dict[str, str]) -> None:
        raise NotApplicable(self.no_admin)

    def list_topics(self, bootstrap: str) -> set[str]:
        raise NotApplicable(self.no_admin)

    def partition_count(self, bootstrap: str, topic: str) -> int:
        raise NotApplicable(self.no_admin)

    def add_partitions(self, bootstrap: str, topic: str, total: int) -> None:
        raise NotApplicable(self.no_admin)

    def delete_topic(self, bootstrap: str, topic: str) -> None:
        raise NotApplicable(self.no_admin)

    def describe_configs(self, bootstrap: str, topic: str) -> dict[str, str]:
        """Every config of `topic` (defaults included) as name -> value."""
        raise NotApplicable(self.no_admin)

    def set_config(self, bootstrap: str, topic: str, name: str, value: str) -> None:
        raise NotApplicable(self.no_admin)

    def delete_config(self, bootstrap: str, topic: str, name: str) -> None:
        """Remove the override: the topic falls back to the default."""
        raise NotApplicable(self.no_admin)

    def list_groups(self, bootstrap: str) -> set[str]:
        raise NotApplicable(self.no_admin)

    def describe_group(self, bootstrap: str, group: str) -> GroupView:
        raise NotApplicable(self.no_admin)

    def alter_group_offsets(self, bootstrap: str, group: str, topic: str,
                            offsets: dict[int, int]) -> None:
        """Set an empty group's committed offsets (Admin alterConsumerGroupOffsets)."""
        raise NotApplicable(self.no_admin)

    def delete_group(self, bootstrap: str, group: str) -> None:
        raise NotApplicable(self.no_admin)

    def log_dir_sizes(self, bootstrap: str, topic: str) -> dict[int, int]:
        """Per partition of `topic`, its size in bytes as DescribeLogDirs reports it."""
        raise NotApplicable(self.no_admin)
