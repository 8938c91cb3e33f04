"""ISR upkeep as leader: shrink the ISR of led partitions whose followers fell behind, grow it
when one caught up (on its fetch, never from the periodic round), written to the store before it is used (Kafka's maybeShrinkIsr and
maybeExpandIsr, scheduled as its isr-expiration task).

A mixin of `ReplicaManager` (`manager.py`), which owns the state; the request path only marks
a partition as a candidate (`_isr_candidates`) and wakes the task.
"""
from __future__ import annotations

import logging
import time
from typing import Any

import trio

from protocol.topic_partition import TopicPartition
from pybroker.cluster.metadata import MetadataStore
from pybroker.replica.partition import Partition

__all__ = ["IsrUpkeep"]

log = logging.getLogger(__name__)


class IsrUpkeep:
    """The leader's ISR changes; see `ReplicaManager` for the state."""

    metadata: MetadataStore
    _partitions: dict[TopicPartition, Partition]
    _isr_candidates: set[TopicPartition]
    _isr_wakeup: trio.Event
    isr_shrinks: int
    isr_expands: int

    # -- the ISR (as leader) ---------------------------------------------------------------------
    async def run_isr_maintenance(self, lag_time_max_ms: int, *,
                                  task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Shrink the ISR of led partitions whose followers fell behind for longer than
        replica.lag.time.max.ms (checked every half of it, as Kafka), and grow it when a
        follower caught up (at once). The new ISR is written to the store by this broker as
        leader, conditionally on the version of the state it was decided from; only then is
        it used."""
        interval = max(lag_time_max_ms, 20) / 2000
        next_shrink = trio.current_time() + interval
        task_status.started()
        while True:
            with trio.move_on_at(next_shrink):
                await self._isr_wakeup.wait()
            self._isr_wakeup = trio.Event()
            now = trio.current_time()
            fetched = set(self._isr_candidates)
            self._isr_candidates.clear()
            candidates = list(fetched)
            if now >= next_shrink:
                candidates += [tp for tp, p in self._partitions.items() if p.is_leader
                               and len(p.replicas) > 1 and tp not in fetched]
                next_shrink = now + interval
            for tp in candidates:
                try:
                    await self._maybe_change_isr(tp, lag_time_max_ms, expand=tp in fetched)
                except Exception:  # never take the broker down; the next round retries
                    log.exception("ISR change of %s-%d failed", tp[0], tp[1])

    async def _maybe_change_isr(self, tp: TopicPartition, lag_time_max_ms: int, *,
                                expand: bool) -> None:
        """Shrink the ISR of a led partition; grow it too if `expand`, which only a
        follower's fetch since the last round gives (Kafka's maybeExpandIsr runs from
        updateFollowerFetchState). The periodic round must not readmit: a follower's last
        fetch can reach a high watermark that stopped moving (its dir failed, or the ISR
        shrank below min.insync.replicas) while the follower itself has not fetched for
        longer than replica.lag.time.max.ms, and readmitting it would make an unreachable
        replica electable."""
        part = self._partitions.get(tp)
        if part is None or not part.is_leader:
            return
        now_ms = int(time.time() * 1000)
        isr = set(part.isr) & set(part.replicas)  # a replica moved away leaves the ISR too
        isr -= part.out_of_sync_replicas(now_ms, lag_time_max_ms)
        if expand:
            # Only replicas outside the current ISR may join: one just found out of sync
            # still "has" the high watermark (it is what holds it back). Only a broker that
            # is registered and not in its controlled shutdown (Kafka's
            # isReplicaIsrEligible, KIP-841: hasAliveBroker and not shutting down). One
            # shutting down: the controller took it out of the ISR, and its fetches until it
            # closes would put it back, so a leader stopping after it would wait for it to go
            # (a node's next worker). One not registered: its session ended (the controller
            # took it out of the ISR for that), and a fetch of it that arrived before would
            # make a dead broker electable.
            brokers = self.metadata.image.brokers
            isr |= {r for r in part.replicas if r not in part.isr and part.can_join_isr(r)
                    and r in brokers and not brokers[r].shutting_down}
        if isr == set(part.isr) or not isr:
            return
        new_isr = tuple(r for r in part.replicas if r in isr)
        alter = getattr(self.metadata, "alter_isr", None)
        if alter is None:
            return
        old = sorted(part.isr)
        epoch, version = part.leader_epoch, part.state_version
        written = await alter(tp[0], tp[1], epoch, new_isr, version)
        if written is not None:
            # Adopt it now, as Kafka does on its AlterPartition answer: the image that carries
            # it back is applied by another task, and a wakeup before that would write (and
            # count) the same change again. Only if the partition is still at the state the
            # change was decided from: a later one taken up meanwhile (the controller's next
            # epoch, read back with the write) stands, and the leader decides again from it
            # (adopting over it left the leader believing an ISR ZooKeeper did not hold, and
            # never writing again: issue #31).
            if (self._partitions.get(tp) is part and part.is_leader
                    and (part.leader_epoch, part.state_version) == (epoch, version)):
                part.set_isr(new_isr, version=written)
            self.isr_shrinks += bool(set(old) - set(new_isr))
            self.isr_expands += bool(set(new_isr) - set(old))
            log.info("ISR of %s-%d %s from %s to %s", tp[0], tp[1],
                     "expands" if len(new_isr) > len(old) else "shrinks", old, list(new_isr))
