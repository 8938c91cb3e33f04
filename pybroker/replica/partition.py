"""One partition this broker hosts, as a replica: Kafka's `Partition`.

Theory of operation
-------------------
The log (`storage.partition_log`) knows offsets; this object knows who else holds them. As
leader it keeps the leader epoch, the replica set, the in-sync replicas (ISR), and for each
follower the log end offset it last fetched from and when it was last caught up. The high
watermark — the offset below which every in-sync replica has the data, so it is committed —
moves here and nowhere else (`maybe_increment_high_watermark`): to the smallest log end offset
over the ISR, never backwards. On one broker the ISR is the leader alone, so the high
watermark follows the log end offset at every append, as it did before this layer existed.
It does not move at all while the ISR is smaller than min.insync.replicas (capped at the
replica count), as in Kafka since 3.7 (KAFKA-15583): a leader left alone in the ISR would
otherwise commit acks=1 writes no other replica has, which a later election could lose
after consumers had read them.

Requests that name the epoch they believe current (`current_leader_epoch` in Fetch v9+,
ListOffsets v4+, OffsetForLeaderEpoch) are fenced here: an older epoch gets
FENCED_LEADER_EPOCH (the client has stale metadata), a newer one UNKNOWN_LEADER_EPOCH (this
broker has not caught up with it yet), -1 means "not checked", as in Kafka.

An `acks=all` produce is done when the high watermark has passed its last offset: then it
succeeds if the ISR is still at least min.insync.replicas, else NOT_ENOUGH_REPLICAS_AFTER_APPEND
(`check_enough_replicas_reach_offset`, Kafka's name). Waiting for that is the replica manager's
business (the purgatory); this class only answers.

Pure: no trio, no clock; time is an argument. Not thread-safe: the event loop owns it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from protocol.errors import ErrorCode
from pybroker.storage.partition_log import PartitionLog

__all__ = ["Partition", "FollowerState", "NO_EPOCH"]

NO_EPOCH = -1
# ISRs are few distinct sets shared by many partitions (on one broker, all are {0}): one
# frozenset each instead of one per partition.
_ISRS: dict[frozenset[int], frozenset[int]] = {}


def _isr(members: "tuple[int, ...] | list[int] | frozenset[int]") -> frozenset[int]:
    isr = frozenset(members)
    return _ISRS.setdefault(isr, isr)


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower: its log end offset (-1: unknown since this
    broker became leader), the last time it had fetched up to the leader's log end, and its
    log start offset (what a consumer sent there can still read; -1: unknown)."""

    log_end_offset: int = -1
    last_caught_up_ms: int = -1
    log_start_offset: int = -1


class Partition:
    # One per hosted partition: slots keep tens of thousands of them small.
    __slots__ = ("topic", "partition", "log", "local_id", "leader_id", "leader_epoch",
                 "replicas", "isr", "followers", "epoch_start_offset", "min_isr_of",
                 "state_version")

    def __init__(self, topic: str, partition: int, log: PartitionLog, local_id: int,
                 min_isr_of: Callable[[str], int] | None = None) -> None:
        """`min_isr_of(topic)`: the topic's min.insync.replicas now (dynamic configs change
        it), one function shared by every partition; None: 1."""
        self.min_isr_of = min_isr_of
        self.topic = topic
        self.partition = partition
        self.log = log
        self.local_id = local_id
        self.leader_id: int | None = None
        self.leader_epoch = NO_EPOCH
        self.replicas: tuple[int, ...] = ()
        self.isr: frozenset[int] = frozenset()
        self.followers: dict[int, FollowerState] = {}
        # Where this leader's epoch began in the log: a follower joins the ISR only once it
        # has reached it (KAFKA-7128).
        self.epoch_start_offset = 0
        # The version of the partition-state znode that leader, epoch and ISR were read at or
        # written as (Kafka's zkVersion; -1: none, as on one broker): the leader's next ISR
        # write is conditional on it, and an older read of the state is not taken up.
        self.state_version = -1

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.partition}, leader={self.leader_id}, "
                f"epoch={self.leader_epoch}, isr={sorted(self.isr)})")

    # -- leadership ----------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_id

    def make_leader(self, leader_epoch: int, replicas: tuple[int, ...] | list[int],
                    isr: tuple[int, ...] | list[int] | frozenset[int], now_ms: int = -1,
                    version: int = -1) -> bool:
        """Become (or stay) leader at `leader_epoch`; True if this is a new leadership.
        `version`: the state znode's version this state was read at; a state older than the
        one this partition has (an image built before the leader's own ISR write landed,
        applied after it) changes nothing.

        A new epoch starts at the log end (recorded in the leader-epoch cache only when the
        epoch is new to the log: a restart under the same epoch writes nothing). Followers'
        states start unknown, as in Kafka, so they cannot hold the high watermark back until
        they fetch — but an ISR member with an unknown offset does hold it: a new leader never
        commits what a follower in the ISR may not have. Their caught-up time starts at
        `now_ms`, so one that never fetches leaves the ISR after replica.lag.time.max.ms.
        """
        if self.has_newer_state_than(version):
            return False
        self.state_version = version
        new = not self.is_leader or leader_epoch != self.leader_epoch
        self.leader_id = self.local_id
        self.replicas = tuple(replicas)
        self.isr = _isr(isr)
        if new:
            self.leader_epoch = leader_epoch
            self.followers = {r: FollowerState(-1, now_ms)
                              for r in self.replicas if r != self.local_id}
            self.epoch_start_offset = self.log.log_end_offset
            if leader_epoch >= 0 and self.log.latest_epoch < leader_epoch:
                self.log.leader_epoch_cache.assign(leader_epoch, self.log.log_end_offset)
        else:
            for r in self.replicas:  # a replica added by a reassignment
                if r != self.local_id and r not in self.followers:
                    self.followers[r] = FollowerState(-1, now_ms)
        self.maybe_increment_high_watermark()
        return new

    def make_follower(self, leader_id: int, leader_epoch: int,
                      replicas: tuple[int, ...] | list[int], version: int = -1) -> bool:
        """Follow `leader_id` at `leader_epoch`; True if anything changed. The follower keeps
        its high watermark (the leader's fetch responses move it) and forgets follower state.
        `version` as in `make_leader`."""
        if self.has_newer_state_than(version):
            return False
        self.state_version = version
        changed = self.leader_id != leader_id or self.leader_epoch != leader_epoch
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.replicas = tuple(replicas)
        self.isr = frozenset()
        self.followers = {}
        return changed

    def has_newer_state_than(self, version: int) -> bool:
        """Whether this partition has taken up a later partition state than one read at
        `version` (-1: not versioned, never older). Images are applied by more than one task
        (a store refresh after a write, the watch's), so one built earlier can arrive after
        a later one, or after this leader's own ISR write."""
        return 0 <= version < self.state_version

    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """FENCED_LEADER_EPOCH for a stale epoch, UNKNOWN_LEADER_EPOCH for one from the future,
        NONE when it matches or the client did not say (-1)."""
        if current_leader_epoch == NO_EPOCH or current_leader_epoch == self.leader_epoch:
            return ErrorCode.NONE
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.UNKNOWN_LEADER_EPOCH

    # -- the ISR and the high watermark ----------------------------------------------------------
    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def set_isr(self, isr: tuple[int, ...] | list[int] | frozenset[int],
                version: int | None = None) -> None:
        """Adopt a new ISR (decided elsewhere: the ISR rules, or the store on a change), then
        let the high watermark move if the shrink allows it. `version`: the state znode's
        version the leader's write of it made."""
        self.isr = _isr(isr)
        if version is not None:
            self.state_version = version
        self.maybe_increment_high_watermark()

    def update_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int,
                              log_start_offset: int = -1) -> bool:
        """A follower fetched from `fetch_offset`, so it has everything below it. Returns True
        if the high watermark moved."""
        state = self.followers.get(replica_id)
        if state is None:
            return False
        state.log_end_offset = fetch_offset
        state.log_start_offset = log_start_offset
        if fetch_offset >= self.log.log_end_offset:
            state.last_caught_up_ms = now_ms
        return self.maybe_increment_high_watermark()

    def follow_leader_high_watermark(self, leader_high_watermark: int) -> bool:
        """As a follower: the high watermark is the leader's, as far as this log reaches
        (Kafka's ReplicaFetcherThread), never moved backwards here (truncation does that).
        True if it moved: consumers reading from this follower (KIP-392) may be waiting."""
        hw = min(leader_high_watermark, self.log.log_end_offset)
        if not self.is_leader and hw > self.log.high_watermark:
            self.log.update_high_watermark(hw)
            return True
        return False

    def out_of_sync_replicas(self, now_ms: int, lag_time_max_ms: int) -> set[int]:
        """ISR followers to drop (Kafka's getOutOfSyncReplicas): not at the log end, and not
        caught up with it for longer than replica.lag.time.max.ms."""
        leo = self.log.log_end_offset
        out = set()
        for replica in self.isr:
            state = self.followers.get(replica)
            if replica == self.local_id or state is None:
                continue
            if state.log_end_offset != leo and now_ms - state.last_caught_up_ms > lag_time_max_ms:
                out.add(replica)
        return out

    def can_join_isr(self, replica_id: int) -> bool:
        """A follower outside the ISR may join once it has everything committed and has
        reached the start of this leader's epoch (KAFKA-7128: else a follower that rejoins
        with an old epoch's tail could later be elected without the new epoch's data)."""
        state = self.followers.get(replica_id)
        if state is None or not self.is_leader:
            return False
        return (state.log_end_offset >= self.log.high_watermark
                and state.log_end_offset >= self.epoch_start_offset)

    def maybe_increment_high_watermark(self) -> bool:
        """Move the high watermark up to the smallest log end offset over the ISR (the leader
        included); True if it moved. The only place a leader's high watermark changes."""
        if not self.is_leader or self.under_min_isr:
            return False
        new_hw = self.log.log_end_offset
        for replica in self.isr:
            if replica != self.local_id:
                state = self.followers.get(replica)
                new_hw = min(new_hw, state.log_end_offset if state else -1)
        if new_hw <= self.log.high_watermark:
            return False
        self.log.update_high_watermark(new_hw)
        return True

    # -- min.insync.replicas ---------------------------------------------------------------------
    @property
    def under_min_isr(self) -> bool:
        """Whether the ISR is smaller than min.insync.replicas, capped at the replica count
        (Kafka's `isUnderMinIsr` with `effectiveMinIsr`)."""
        if self.min_isr_of is None:
            return False
        return len(self.isr) < min(self.min_isr_of(self.topic), max(1, len(self.replicas)))

    def check_min_isr(self, min_insync_replicas: int) -> tuple[ErrorCode, str | None]:
        """Before an acks=all append: refused, nothing written, when the ISR is too small."""
        if len(self.isr) >= min_insync_replicas:
            return ErrorCode.NONE, None
        return ErrorCode.NOT_ENOUGH_REPLICAS, (
            f"The size of the current ISR Set({', '.join(map(str, sorted(self.isr)))}) is "
            f"insufficient to satisfy the min.isr requirement of {min_insync_replicas} for "
            f"partition {self.topic}-{self.partition}")

    def check_enough_replicas_reach_offset(self, required_offset: int,
                                           min_insync_replicas: int) -> tuple[bool, ErrorCode]:
        """(done, error) for an acks=all produce waiting for `required_offset` (its last
        offset + 1) to be committed. Not done while the high watermark is below it; done with
        NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below min.insync.replicas meanwhile;
        NOT_LEADER_OR_FOLLOWER if this broker stopped leading."""
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark < required_offset:
            return False, ErrorCode.NONE
        if len(self.isr) < min_insync_replicas:
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return True, ErrorCode.NONE
