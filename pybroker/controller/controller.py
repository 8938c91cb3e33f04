"""The controller of a ZooKeeper cluster: one broker elected to decide leaders.

Theory of operation
-------------------
Every broker runs this task; one at a time is the controller. It is elected as Kafka's is
(REPLICATION.md §2): `/controller` created as an ephemeral znode in the same ZooKeeper
multi-op that bumps `/controller_epoch` from the value it read, so two brokers cannot both
win; every later write of the controller is a multi-op that first checks `/controller_epoch`
is still at the version it wrote. A controller that lost its session, or was replaced while
paused, finds that check failing and resigns: a stale controller can write nothing.

The controller does not push requests to brokers (Kafka's LeaderAndIsr RPCs): it writes
partition-state znodes, each conditional on the version it read, and brokers follow them by
their watches. What to write is decided by `decisions`, pure functions of the metadata image
and the live brokers; this façade only reconciles: after every change of the image it asks
what the image needs (a leader for a new or orphaned partition, dead brokers out of ISRs,
leaderships moved off a broker shutting down, topics marked for deletion removed) and writes
it. Acting on the latest snapshot, never on events, makes a missed or repeated watch harmless.

A broker that re-registered (its registration's czxid changed: it restarted within the
session timeout and waited for the old one to expire) is handled as failed and then back, as
Kafka's controller handles a bounced broker.

A broker whose log dir failed (KIP-112) lists its offline replicas in its registration and
writes a `/log_dir_event_notification/log_dir_event_<seq>` znode, as Kafka's does: each such
replica counts as dead for its own partition (`decisions`: leadership moved to an in-sync
replica elsewhere, the broker out of the ISR), and the controller removes the notifications
it has acted on, as Kafka's does.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import trio

from protocol.errors import ErrorCode
from pybroker.cluster import zk_data as zd
from pybroker.cluster.metadata import MetadataDelta, MetadataImage, PartitionState
from pybroker.cluster.zk_store import NO_STATE_EPOCH, ZkMetadataStore
from pybroker.controller import decisions
from pybroker.controller.election import elect_preferred, elect_unclean_for, initial_state
from pybroker.controller.reassignment import ReassignmentStep, origin_replicas, \
    reassignment_step, target_replicas, validate_target

log = logging.getLogger(__name__)

Change = tuple[str, PartitionState]
# How often a request the controller serves decides again after its write lost a race with a
# change its image did not have yet.
WRITE_ATTEMPTS = 5


class ControllerFenced(Exception):
    """Another broker became controller: this one's writes are refused."""


class Controller:
    def __init__(self, store: ZkMetadataStore, *, unclean_leader_election: bool = False,
                 auto_leader_rebalance: bool = True, imbalance_percent: int = 10,
                 imbalance_check_interval_s: float = 300.0) -> None:
        self.store = store
        self.node_id = store.node_id
        self.unclean = unclean_leader_election
        self.auto_rebalance = auto_leader_rebalance
        self.imbalance_percent = imbalance_percent
        self.imbalance_check_interval_s = imbalance_check_interval_s
        self.epoch = -1
        self._epoch_version = -1
        self.active = False
        self._changed = trio.Event()
        self._broker_epochs: dict[int, int] = {}
        self._lock = trio.Lock()
        # The offline replicas of the last reconcile: a change clears the notifications.
        self._offline_seen: dict[int, frozenset[tuple[str, int]]] = {}

    # -- following the store -----------------------------------------------------------------------
    async def apply_delta(self, image: MetadataImage, delta: MetadataDelta) -> None:
        self._changed.set()

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        next_rebalance = trio.current_time() + self.imbalance_check_interval_s
        while True:
            self._changed = trio.Event()
            try:
                was_active = self.active
                await self._step()
                if self.active and not was_active:
                    # As Kafka's onControllerFailover: the first check one interval after
                    # becoming controller, not at once because the broker is old.
                    next_rebalance = trio.current_time() + self.imbalance_check_interval_s
                if self.active and trio.current_time() >= next_rebalance:
                    next_rebalance = trio.current_time() + self.imbalance_check_interval_s
                    if self.auto_rebalance:
                        await self._rebalance()
            except ControllerFenced:
                self._resign("another broker is controller")
            except Exception:
                log.exception("controller step failed; retrying")
                await trio.sleep(0.5)
            with trio.move_on_after(1.0):
                await self._changed.wait()

    async def _step(self) -> None:
        store = self.store
        image = store.image
        if not store.session_valid:
            if self.active:
                self._resign("ZooKeeper session lost")
            return
        if self.active and image.controller_id not in (self.node_id, -1):
            self._resign(f"broker {image.controller_id} is controller")
        if not self.active and image.controller_id == -1:
            await self._try_elect()
        if self.active:
            async with self._lock:
                await self._reconcile(store.image)

    def _resign(self, why: str) -> None:
        if self.active:
            log.info("broker %d resigns as controller (epoch %d): %s", self.node_id,
                     self.epoch, why)
        self.active = False
        self._broker_epochs = {}

    async def _try_elect(self) -> None:
        won = await trio.to_thread.run_sync(self._elect)
        if won:
            self.active = True
            log.info("broker %d is the controller (controller epoch %d)", self.node_id,
                     self.epoch)
            await self.store.refresh_now(("controller",))

    def _elect(self) -> bool:
        """Create /controller and bump /controller_epoch in one multi-op (blocking)."""
        from kazoo.exceptions import NodeExistsError, NoNodeError

        zk = self.store.zk
        try:
            raw, stat = zk.get(zd.CONTROLLER_EPOCH)
        except NoNodeError:
            try:
                zk.create(zd.CONTROLLER_EPOCH, b"0", makepath=True)
            except NodeExistsError:
                pass
            raw, stat = zk.get(zd.CONTROLLER_EPOCH)
        epoch = int(raw.decode() or 0) + 1
        txn = zk.transaction()
        txn.create(zd.CONTROLLER, zd.encode_controller(self.node_id), ephemeral=True)
        txn.set_data(zd.CONTROLLER_EPOCH, str(epoch).encode(), version=stat.version)
        results = txn.commit()
        if any(isinstance(r, Exception) for r in results):
            return False
        self.epoch, self._epoch_version = epoch, stat.version + 1
        return True

    # -- writing (every write fenced by /controller_epoch) --------------------------------------
    def _commit(self, ops: list[Callable[..., Any]]) -> list[Any]:
        """Run `ops` (callables adding to a kazoo transaction) after the epoch check
        (blocking). ControllerFenced if the epoch moved; the other results are returned."""
        from kazoo.exceptions import BadVersionError, NoNodeError

        txn = self.store.zk.transaction()
        txn.check(zd.CONTROLLER_EPOCH, self._epoch_version)
        for op in ops:
            op(txn)
        results = txn.commit()
        if isinstance(results[0], (BadVersionError, NoNodeError)):
            raise ControllerFenced()
        return results[1:]

    async def _write_states(self, changes: Iterable[Change], *, create: bool = False) -> int:
        """Write each partition's new leader, epoch and ISR, conditionally on the version of
        the state it was decided from (`PartitionState.version`, which a decision keeps), as
        Kafka's controller writes against the zkVersion of what it decided from; returns how
        many landed (a lost race is retried at the next change, from the image that has what
        changed). Never against the version in the live cache: a worker thread refreshes it
        before the image that goes with it is published, so a decision from the older image
        written against it would overwrite a change (a leader's ISR expansion) it never saw
        (issue #31).

        New partitions (`create`) are written a topic at a time (`_create_states`). Changes
        of existing states (elections, ISR removals) stay one multi-op per partition: each is
        conditional on its own version, and they are decided when brokers fail, while the
        leaders write their own ISRs: in one multi-op, a single state that moved meanwhile
        would roll back all the others, and they are few per reconcile where new partitions
        come a topic of them at a time."""
        if create:
            return await self._create_all(list(changes))
        store = self.store
        written: list[tuple[str, str, int]] = []
        for topic, state in changes:
            data = zd.encode_state(zd.LeaderAndIsr(state.leader, state.leader_epoch,
                                                   tuple(state.isr), self.epoch,
                                                   state.leader_recovery_state))
            results = await trio.to_thread.run_sync(
                self._commit, [_set_state(topic, state, data)])
            if any(isinstance(r, Exception) for r in results):
                log.info("controller: state of %s-%d changed meanwhile; will retry", topic,
                         state.partition)
                continue
            written.append(("state", topic, state.partition))
            log.info("controller: %s-%d leader %d epoch %d ISR %s", topic, state.partition,
                     state.leader, state.leader_epoch, list(state.isr))
        if written:
            # Read back now, all at once, so the next decision starts from them rather than
            # from an image that waits for the watches.
            await store.refresh_now(*written)
        return len(written)

    async def _create_all(self, changes: list[Change]) -> int:
        """The first states of new partitions, each topic's in one multi-op or as few as
        MULTI_OP_BYTES allows (`_create_states`), all topics in one worker thread; then the
        read-back of what landed and of the states found already there."""
        by_topic: dict[str, list[PartitionState]] = {}
        for topic, state in changes:
            by_topic.setdefault(topic, []).append(state)
        if not by_topic:
            return 0
        versions = {topic: self.store.topic_version(topic) for topic in by_topic}

        def write_all() -> dict[str, tuple[list[PartitionState], list[int]]]:
            return {topic: self._create_states(topic, states, versions[topic])
                    for topic, states in by_topic.items()}
        outcome = await trio.to_thread.run_sync(write_all)
        read: list[tuple[str, str, int]] = []
        landed = 0
        for topic, (made, found) in outcome.items():
            landed += len(made)
            read += [("state", topic, state.partition) for state in made]
            read += [("state", topic, index) for index in found]
            if made:
                log.info("controller: %s: %d new partition(s) led: %s", topic, len(made),
                         _leaders(made))
            lost = len(by_topic[topic]) - len(made) - len(found)
            if found:
                log.info("controller: %s: state of partition(s) %s already written; reading it",
                         topic, found)
            if lost:
                log.info("controller: %s changed meanwhile; %d partition state(s) will be "
                         "retried", topic, lost)
        if read:
            # Read back now, all at once, so the next decision starts from them rather than
            # from an image that waits for the watches.
            await self.store.refresh_now(*read)
        return landed

    def _create_states(self, topic: str, states: list[PartitionState], version: int
                       ) -> tuple[list[PartitionState], list[int]]:
        """Create the state znodes of `states` (new partitions of `topic`) and their parents
        (blocking): each multi-op fenced by the controller epoch and conditional on the
        topic znode's `version`, the one the decisions were made from (never a state for a
        topic deleted meanwhile, nor for partitions added since by an assignment the
        decisions did not see). Returns the states that landed and the partitions whose
        state was there already (written by a controller before, or by this one for an
        image that had not caught up): those are read, not overwritten.

        A multi-op is all or nothing and says which op failed, so a failure teaches one
        fact and the rest is tried again: a parent made meanwhile is not made again, a
        partition whose state exists is dropped from the batch, and a changed or deleted
        topic ends the attempt (the next image decides again). Each failure removes a cause
        for good, so the attempts are bounded by the partitions."""
        from kazoo.exceptions import NodeExistsError, NoNodeError, RolledBackError, \
            RuntimeInconsistency

        zk = self.store.zk
        try:
            made = set(zk.get_children(zd.partitions_path(topic)))
            root = True
        except NoNodeError:
            made, root = set(), False
        pending = [(state, zd.encode_state(zd.LeaderAndIsr(
            state.leader, state.leader_epoch, tuple(state.isr), self.epoch,
            state.leader_recovery_state))) for state in states]
        landed: list[PartitionState] = []
        found: list[int] = []
        attempts = 3 * len(pending) + 3
        while pending and attempts:
            attempts -= 1
            chunk = _fitting(topic, pending)
            steps: list[tuple[str, int]] = [("topic", -1)]
            ops: list[Callable[..., Any]] = [
                lambda txn, t=zd.topic_path(topic), v=version: txn.check(t, v)]
            if not root:
                steps.append(("root", -1))
                ops.append(lambda txn, p=zd.partitions_path(topic): txn.create(p))
            for state, data in chunk:
                if str(state.partition) not in made:
                    steps.append(("dir", state.partition))
                    ops.append(lambda txn, p=zd.partition_path(topic, state.partition):
                               txn.create(p))
                steps.append(("state", state.partition))
                ops.append(lambda txn, p=zd.state_path(topic, state.partition), d=data:
                           txn.create(p, d))
            results = self._commit(ops)
            failed = next((i for i, r in enumerate(results) if isinstance(r, Exception)
                           and not isinstance(r, (RolledBackError, RuntimeInconsistency))),
                          None)
            if failed is None:
                landed += [state for state, _ in chunk]
                root = True
                made.update(str(state.partition) for state, _ in chunk)
                pending = pending[len(chunk):]
                continue
            (kind, index), error = steps[failed], results[failed]
            if kind == "root" and isinstance(error, NodeExistsError):
                root = True
            elif kind == "dir" and isinstance(error, NodeExistsError):
                made.add(str(index))
            elif kind == "state" and isinstance(error, NodeExistsError):
                found.append(index)
                pending = [(s, d) for s, d in pending if s.partition != index]
            else:  # the topic changed or went (or a parent went with it): decide again
                if kind != "topic":
                    log.info("controller: creating the states of %s failed at %s %d: %r",
                             topic, kind, index, error)
                break
        return landed, found

    # -- reconciling -------------------------------------------------------------------------------
    async def _reconcile(self, image: MetadataImage) -> None:
        live = frozenset(b for b, info in image.brokers.items())
        bounced = frozenset(b for b in live if b in self._broker_epochs
                            and self._broker_epochs[b] != image.brokers[b].epoch)
        deleting = self.store.deleting
        unclean = decisions.unclean_from_configs(image, self.unclean)
        await self._delete_marked(image)
        image = self.store.image
        await self._write_states(self._new_partitions(image, live), create=True)
        # Partitions without a state znode yet are the creation's business, above.
        image = _with_states_only(image)
        offline = {b: info.offline_replicas for b, info in image.brokers.items()
                   if info.offline_replicas}
        if bounced:  # failed, then back: elect away from it first
            await self._write_states(decisions.on_brokers_failed(
                image, live - bounced, unclean, deleting, offline))
            # Failed once: from now on a live broker again. Without this it stayed bounced
            # for this controller's life, taken out of every ISR its leaders added it to.
            for broker in bounced:
                self._broker_epochs[broker] = image.brokers[broker].epoch
            return  # the next image has those writes; decide the rest from it
        changes = decisions.on_brokers_failed(image, live, unclean, deleting, offline)
        changes += decisions.on_brokers_started(image, live, unclean, deleting, offline)
        shutting = frozenset(b for b, info in image.brokers.items() if info.shutting_down)
        if shutting:
            changes += decisions.controlled_shutdown_moves(image, shutting, live, deleting)
        await self._write_states(_last_per_partition(changes))
        self._broker_epochs = {b: info.epoch for b, info in image.brokers.items()}
        if offline != self._offline_seen:
            for broker, replicas in offline.items():
                if replicas != self._offline_seen.get(broker):
                    log.info("controller: broker %d has %d replica(s) in failed log dirs: %s",
                             broker, len(replicas), sorted(replicas))
            await trio.to_thread.run_sync(self._clear_log_dir_events)
            self._offline_seen = offline
        await self._advance_reassignments(self.store.image, live)

    def _clear_log_dir_events(self) -> None:
        """Remove the /log_dir_event_notification znodes, acted on (blocking; Kafka's
        controller deletes them once handled)."""
        from kazoo.exceptions import NoNodeError

        zk = self.store.zk
        try:
            children = zk.get_children(zd.LOG_DIR_EVENTS)
        except NoNodeError:
            return
        for child in children:
            try:
                zk.delete(f"{zd.LOG_DIR_EVENTS}/{child}")
            except NoNodeError:
                pass

    def _new_partitions(self, image: MetadataImage, live: frozenset[int]) -> list[Change]:
        """Kafka's initializeLeaderAndIsrForPartitions: the first live replica leads, the live
        replicas are the ISR, epoch 0; a partition with no live replica waits."""
        out = []
        for topic in image.topics.values():
            if topic.name in self.store.deleting:
                continue
            for p in topic.partitions:
                if p.leader_epoch != NO_STATE_EPOCH:
                    continue
                state = initial_state(p.partition, p.replicas, live)
                if state is not None:
                    out.append((topic.name, state))
        return out

    async def _delete_marked(self, image: MetadataImage) -> None:
        for name in sorted(self.store.deleting):
            info = image.topics.get(name)
            paths = ([zd.topic_path(name), zd.config_path(name)] if info is not None else [])
            await trio.to_thread.run_sync(self._delete_topic_znodes, name, paths)
            log.info("controller: deleted topic %s", name)
        if self.store.deleting:
            # Read back now: decisions made from an image that still had the topic would
            # give its partitions (their states gone) new states.
            await self.store.refresh_now(("topics",), ("deletes",))

    def _delete_topic_znodes(self, name: str, paths: list[str]) -> None:
        from kazoo.exceptions import NoNodeError

        zk = self.store.zk
        # Fenced first: a stale controller deletes nothing.
        self._commit([])
        for path in paths:
            try:
                zk.delete(path, recursive=True)
            except NoNodeError:
                pass
        try:
            zk.delete(zd.delete_path(name))
        except NoNodeError:
            pass

    async def _rebalance(self) -> None:
        image = self.store.image
        live = frozenset(image.brokers)
        moves = decisions.rebalance_moves(image, live, self.imbalance_percent,
                                          self.store.deleting)
        if moves:
            log.info("controller: preferred leader election for %d partition(s)", len(moves))
            await self._write_states(moves)

    # -- reassignments (KIP-455) ----------------------------------------------------------------
    async def _advance_reassignments(self, image: MetadataImage, live: frozenset[int]) -> None:
        """Every reassignment in progress takes its next step (Kafka re-runs
        onPartitionReassignment whenever the ISR changes): done once every target replica
        is in sync."""
        for topic in image.topics.values():
            steps = {}
            for p in topic.partitions:
                if not (p.adding_replicas or p.removing_replicas):
                    continue
                step = reassignment_step(p, target_replicas(p.replicas, p.removing_replicas),
                                         p.adding_replicas, p.removing_replicas, live)
                if (step.state is not p or step.adding != p.adding_replicas
                        or step.removing != p.removing_replicas):
                    steps[p.partition] = step
            if steps:
                await self._write_reassignment(topic.name, steps)

    async def _write_reassignment(self, topic: str, steps: dict[int, ReassignmentStep]) -> bool:
        """The topic znode (replicas, adding, removing) and the changed partition states, in
        one multi-op fenced by the controller epoch and both versions."""
        store = self.store
        current = store.assignment(topic)
        if current is None:
            return False
        partitions = dict(current.partitions)
        adding = {k: v for k, v in (current.adding or {}).items()}
        removing = {k: v for k, v in (current.removing or {}).items()}
        image = store.image
        ops: list[Callable[..., Any]] = []
        for index, step in steps.items():
            partitions[index] = tuple(step.state.replicas)
            for lists, values in ((adding, step.adding), (removing, step.removing)):
                if values:
                    lists[index] = tuple(values)
                else:
                    lists.pop(index, None)
            old = image.partition(topic, index)
            if old is not None and (step.state.leader, step.state.leader_epoch,
                                    step.state.isr) != (old.leader, old.leader_epoch, old.isr):
                data = zd.encode_state(zd.LeaderAndIsr(step.state.leader,
                                                       step.state.leader_epoch,
                                                       tuple(step.state.isr), self.epoch,
                                                       step.state.leader_recovery_state))
                ops.append(_set_state(topic, step.state, data))
        new = zd.TopicAssignment(partitions, current.topic_id, adding, removing)
        ops.insert(0, lambda txn, d=zd.encode_topic(new), v=store.topic_version(topic):
                   txn.set_data(zd.topic_path(topic), d, version=v))
        results = await trio.to_thread.run_sync(self._commit, ops)
        if any(isinstance(r, Exception) for r in results):
            log.info("controller: reassignment of %s raced a change; will retry", topic)
            return False
        await store.refresh_now(("topic", topic),
                                *(("state", topic, index) for index in steps))
        for index, step in steps.items():
            log.info("controller: %s-%d replicas %s%s", topic, index, list(step.state.replicas),
                     " (reassignment done)" if step.done else
                     f" adding {list(step.adding)} removing {list(step.removing)}")
        return True

    async def alter_reassignments(self, wanted: list[tuple[str, int, list[int] | None]]
                                  ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """AlterPartitionReassignments: start (or replace) a reassignment to the given
        replicas, or cancel one (None). A write that lost a race with a change the image did
        not have yet (a leader's ISR write) is decided again from a fresh read, as Kafka's
        controller retries its updatesToRetry."""
        async with self._lock:
            results: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
            by_topic: dict[str, list[tuple[int, list[int] | None]]] = {}
            for topic, index, target in wanted:
                by_topic.setdefault(topic, []).append((index, target))
            for topic, entries in by_topic.items():
                steps: dict[int, ReassignmentStep] = {}
                for _ in range(WRITE_ATTEMPTS):
                    outcome, steps = self._reassignment_steps(self.store.image, topic, entries)
                    results.update(outcome)
                    if not steps or await self._write_reassignment(topic, steps):
                        break
                    await self.store.refresh_now(("topic", topic), *(
                        ("state", topic, index) for index in steps))
                else:
                    for index in steps:
                        results[(topic, index)] = (ErrorCode.REQUEST_TIMED_OUT,
                                                   "The partition changed meanwhile; retry.")
            return results

    def _reassignment_steps(self, image: MetadataImage, topic: str,
                            entries: list[tuple[int, list[int] | None]]
                            ) -> tuple[dict[tuple[str, int], tuple[ErrorCode, str | None]],
                                       dict[int, ReassignmentStep]]:
        """Each partition's answer, and the first steps to write, from `image`."""
        live = frozenset(image.brokers)
        results: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
        steps: dict[int, ReassignmentStep] = {}
        for index, target in entries:
            state = image.partition(topic, index)
            if state is None or state.leader_epoch == NO_STATE_EPOCH:
                results[(topic, index)] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                           "The partition does not exist.")
                continue
            if target is None:
                if not (state.adding_replicas or state.removing_replicas):
                    results[(topic, index)] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
                    continue
                target = list(origin_replicas(state.replicas, state.adding_replicas))
            problem = validate_target(state, target, state.adding_replicas, live)
            if problem is not None:
                results[(topic, index)] = (problem.code, problem.message)
                continue
            steps[index] = reassignment_step(state, target, state.adding_replicas,
                                             state.removing_replicas, live)
            results[(topic, index)] = (ErrorCode.NONE, None)
        return results, steps

    def ongoing_reassignments(self) -> list[tuple[str, PartitionState]]:
        """ListPartitionReassignments: partitions with replicas being added or removed."""
        return [(t.name, p) for t in self.store.image.topics.values() for p in t.partitions
                if p.adding_replicas or p.removing_replicas]

    # -- requests the controller serves ------------------------------------------------------------
    async def elect_leaders(self, election_type: int,
                            partitions: list[tuple[str, int]] | None
                            ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """ElectLeaders (type 0 preferred, 1 unclean) for `partitions` (None: all). A write
        that lost a race is decided again from a fresh read (`alter_reassignments`)."""
        async with self._lock:
            if partitions is None:
                partitions = [(t.name, p.partition) for t in self.store.image.topics.values()
                              for p in t.partitions]
            results: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
            for topic, index in partitions:
                for _ in range(WRITE_ATTEMPTS):
                    image = self.store.image
                    state = image.partition(topic, index)
                    if state is None:
                        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        break
                    if election_type == 0:
                        new, code = elect_preferred(state, frozenset(image.brokers))
                    else:
                        new, code = elect_unclean_for(state, frozenset(image.brokers))
                    if new is None or await self._write_states([(topic, new)]):
                        break
                    await self.store.refresh_now(("state", topic, index))
                else:
                    code = ErrorCode.NOT_CONTROLLER
                if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    results[(topic, index)] = (code, None)
                    continue
                results[(topic, index)] = (code, None if code == ErrorCode.NONE
                                           else _election_message(code, topic, index))
            return results


def _set_state(topic: str, state: PartitionState, data: bytes) -> Callable[..., Any]:
    """The multi-op step that writes a decided state, conditionally on the version of the
    state it was decided from (`_write_states`); never unconditionally."""
    if state.version < 0:
        raise ValueError(f"a decision for {topic}-{state.partition} carries no state "
                         "version to write against")
    return lambda txn, p=zd.state_path(topic, state.partition), d=data, v=state.version: \
        txn.set_data(p, d, version=v)


def _election_message(code: ErrorCode, topic: str, partition: int) -> str:
    if code == ErrorCode.ELECTION_NOT_NEEDED:
        return "Leader election not needed for topic partition"
    if code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE:
        return (f"Failed to elect leader for partition {topic}-{partition} under strategy "
                "PreferredReplicaPartitionLeaderElectionStrategy")
    if code == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE:
        return (f"Failed to elect leader for partition {topic}-{partition} under strategy "
                "OfflinePartitionLeaderElectionStrategy")
    return code.name


def _last_per_partition(changes: list[Change]) -> list[Change]:
    """One write per partition: decisions made from one image for the same partition (a
    failure and a shutdown) — the later one wins, the next reconcile revisits it."""
    seen: dict[tuple[str, int], Change] = {}
    for topic, state in changes:
        seen[(topic, state.partition)] = (topic, state)
    return list(seen.values())


def _with_states_only(image: MetadataImage) -> MetadataImage:
    """The image without partitions that have no state znode yet (being created)."""
    topics = {}
    for name, info in image.topics.items():
        if any(p.leader_epoch == NO_STATE_EPOCH for p in info.partitions):
            continue
        topics[name] = info
    if len(topics) == len(image.topics):
        return image
    return replace(image, topics=topics)


# A multi-op's request stays under this many bytes (estimated): ZooKeeper refuses a request
# over jute.maxbuffer (1 MB by default) by closing the connection, so a topic with more
# partitions than fit is created in several multi-ops, each conditional on the topic.
MULTI_OP_BYTES = 512 * 1024
# A create op's bytes besides its path and data: header, lengths, the open ACL, flags.
_OP_OVERHEAD = 64


def _fitting(topic: str, pending: list[tuple[PartitionState, bytes]]
             ) -> list[tuple[PartitionState, bytes]]:
    """The first of `pending` whose creates (state and parent) fit MULTI_OP_BYTES; at least
    one."""
    size = len(zd.partitions_path(topic)) + 2 * _OP_OVERHEAD
    for count, (state, data) in enumerate(pending):
        size += (len(zd.state_path(topic, state.partition)) + len(data)
                 + len(zd.partition_path(topic, state.partition)) + 2 * _OP_OVERHEAD)
        if size > MULTI_OP_BYTES and count:
            return pending[:count]
    return pending


def _leaders(states: list[PartitionState]) -> str:
    """`broker 0: 50, broker 1: 50` (partitions each leads), for a line about many."""
    counts: dict[int, int] = {}
    for state in states:
        counts[state.leader] = counts.get(state.leader, 0) + 1
    return ", ".join(f"broker {leader}: {n}" for leader, n in sorted(counts.items()))
