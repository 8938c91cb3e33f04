"""What the controller writes when the cluster changes: the image-wide decisions.

Theory of operation. The controller's façade watches ZooKeeper and, on each event (brokers
died or started, a broker asked to shut down, the rebalance timer fired), hands the current
`MetadataImage` and the set of live brokers to one function here. It gets back the
partition states to write, `(topic, new_state)`, each one epoch later than the state it was
decided from, and writes each conditionally on the znode version it read. Nothing here keeps
state between calls, reads a clock or does I/O: every decision is a function of the image,
so the façade may re-run one after a lost write race or a missed watch and get the same
answer for the same image (Kafka's controller likewise acts on the partition states it
re-reads from ZooKeeper).

The per-partition rules are in `election.py`; this module chooses which partitions each
event concerns, as Kafka's `KafkaController` does (`onBrokerFailure`, `onBrokerStartup`,
`doControlledShutdown`, `checkAndTriggerAutoLeaderRebalance`). Topics being deleted are
skipped by every event, as Kafka skips topics queued for deletion.

`live` is the set of registered brokers (`/brokers/ids`), including any that are shutting
down: a shutting-down broker still serves until it has handed its leaderships over. A broker
whose registration was replaced (its czxid grew) has bounced: the façade runs
`on_brokers_failed` without it, then `on_brokers_started` with it, as Kafka does.

`offline` names, per broker, its replicas in a failed log dir (KIP-112; the broker lists
them in its registration). Such a replica counts as dead for its partition alone: it loses
the leadership and leaves the ISR as if its broker had died, and is never elected, while the
broker's other replicas go on as they were (Kafka's `onReplicasBecomeOffline` after a
`/log_dir_event_notification`).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Set

from pybroker.cluster.image import MetadataImage, PartitionState, TopicInfo
from pybroker.controller.election import (
    elect_for_shutdown, elect_offline, elect_preferred, has_live_leader, remove_from_isr,
)

# A decision: the topic, and the partition's next state to write.
Change = tuple[str, PartitionState]
# Whether a topic allows unclean leader election: the topic's
# `unclean.leader.election.enable`, over the broker default (the façade resolves it).
UncleanPolicy = Callable[[str], bool]
# Per broker, its replicas (topic, partition) in a failed log dir.
OfflineReplicas = Mapping[int, Set[tuple[str, int]]]

UNCLEAN_CONFIG = "unclean.leader.election.enable"
# leader.imbalance.per.broker.percentage's default (Kafka's ReplicationConfigs).
DEFAULT_IMBALANCE_PERCENT = 10


def never_unclean(topic: str) -> bool:
    return False


def unclean_from_configs(image: MetadataImage, default: bool) -> UncleanPolicy:
    """An `UncleanPolicy` reading each topic's override of `unclean.leader.election.enable`
    from the image, over the broker's `default`; for façades that resolve nothing else."""
    def policy(topic: str) -> bool:
        info = image.topics.get(topic)
        value = info.configs.get(UNCLEAN_CONFIG) if info is not None else None
        return default if value is None else value.strip().lower() == "true"
    return policy


def _partitions(image: MetadataImage, deleting: Set[str]
                ) -> Iterator[tuple[TopicInfo, PartitionState]]:
    """Every partition of every topic not being deleted, in a stable order (topic name,
    then partition), so the same image always gives the same list of writes."""
    for name in sorted(image.topics):
        if name in deleting:
            continue
        info = image.topics[name]
        for state in info.partitions:
            yield info, state


def _live_for(topic: str, state: PartitionState, live: Set[int],
              offline: OfflineReplicas) -> Set[int]:
    """The live brokers whose replica of this partition is not in a failed log dir."""
    if not offline:
        return live
    tp = (topic, state.partition)
    return frozenset(b for b in live if tp not in offline.get(b, ()))


def on_brokers_failed(image: MetadataImage, live: Set[int],
                      unclean: UncleanPolicy = never_unclean,
                      deleting: Set[str] = frozenset(),
                      offline: OfflineReplicas | None = None) -> list[Change]:
    """After brokers died (their znodes went away): every partition without a live leader
    gets the offline election (a new leader from the live ISR, unclean if its topic allows,
    or it stays offline keeping its last ISR member), and every partition whose leader lives
    loses its dead in-sync followers (never the last ISR member). Kafka's
    `onReplicasBecomeOffline`: the offline election, then `OfflineReplica` for each dead
    replica, which Kafka writes as two epochs and this writes as one.

    Partitions that were offline before the failure are retried too (Kafka's
    `triggerOnlinePartitionStateChange`), so the answer does not depend on which brokers
    died just now, only on who is live."""
    changes: list[Change] = []
    for info, state in _partitions(image, deleting):
        serving = _live_for(info.name, state, live, offline or {})
        if has_live_leader(state, serving):
            new = remove_from_isr(state, frozenset(state.isr) - serving)
        else:
            new = elect_offline(state, serving, unclean(info.name))
        if new is not None:
            changes.append((info.name, new))
    return changes


def on_brokers_started(image: MetadataImage, live: Set[int],
                       unclean: UncleanPolicy = never_unclean,
                       deleting: Set[str] = frozenset(),
                       offline: OfflineReplicas | None = None) -> list[Change]:
    """After brokers registered: every partition without a live leader that can now get one
    (a live ISR member, or any live replica where unclean election is allowed) is elected
    (Kafka's `onBrokerStartup` -> `triggerOnlinePartitionStateChange`). A restarted broker
    is not put back in any ISR here: the leader adds it once it has caught up."""
    changes: list[Change] = []
    for info, state in _partitions(image, deleting):
        serving = _live_for(info.name, state, live, offline or {})
        if not has_live_leader(state, serving):
            new = elect_offline(state, serving, unclean(info.name))
            if new is not None and new.leader in serving:
                changes.append((info.name, new))
    return changes


def controlled_shutdown_moves(image: MetadataImage, shutting_down: int | Set[int],
                              live: Set[int], deleting: Set[str] = frozenset()
                              ) -> list[Change]:
    """A broker asked to shut down (R6: `"shutting_down": true` in its znode). Of the
    partitions with more than one replica that it hosts, those it leads move to the first
    replica in assignment order that is live, in the ISR and not shutting down, and it
    leaves their ISR; those it follows in sync drop it from the ISR (never the last member).
    Kafka's `doControlledShutdown`. A led partition with no such replica is left as it is:
    the broker waits and asks again (`controlled.shutdown.max.retries`), and it exits once
    it leads no partition that another live in-sync replica could take
    (`Broker.controlled_shutdown`). `shutting_down` may name several brokers shutting down at
    once: none of them is chosen as a leader."""
    going = frozenset({shutting_down}) if isinstance(shutting_down, int) \
        else frozenset(shutting_down)
    changes: list[Change] = []
    for info, state in _partitions(image, deleting):
        hosted = going.intersection(state.replicas)
        if len(state.replicas) <= 1 or not hosted:
            continue
        if state.leader in hosted:
            new = elect_for_shutdown(state, live, going)
        else:
            new = remove_from_isr(state, hosted)
        if new is not None:
            changes.append((info.name, new))
    return changes


def partitions_led_by(image: MetadataImage, broker: int) -> list[tuple[str, int]]:
    """(topic, partition) of every partition `broker` leads: what a controlled shutdown
    still has to move (Kafka answers it to the broker, which retries until it is empty)."""
    return [(info.name, state.partition) for info, state in _partitions(image, frozenset())
            if state.leader == broker]


def imbalance(image: MetadataImage, deleting: Set[str] = frozenset()) -> dict[int, float]:
    """For each broker that is some partition's preferred replica (the first assigned): the
    share of those partitions it does not lead (Kafka's `checkAndTriggerAutoLeaderRebalance`
    imbalance ratio). Liveness does not enter the ratio; it decides only which elections
    can be made."""
    preferred: dict[int, int] = {}
    not_leading: dict[int, int] = {}
    for _, state in _partitions(image, deleting):
        if not state.replicas:
            continue
        broker = state.replicas[0]
        preferred[broker] = preferred.get(broker, 0) + 1
        if state.leader != broker:
            not_leading[broker] = not_leading.get(broker, 0) + 1
    return {broker: not_leading.get(broker, 0) / count
            for broker, count in sorted(preferred.items())}


def rebalance_moves(image: MetadataImage, live: Set[int],
                    threshold_percent: float = DEFAULT_IMBALANCE_PERCENT,
                    deleting: Set[str] = frozenset()) -> list[Change]:
    """The auto leader rebalance (every `leader.imbalance.check.interval.seconds`): for each
    broker whose imbalance exceeds `leader.imbalance.per.broker.percentage`, the preferred
    elections that can succeed (preferred replica live and in the ISR) among the partitions
    it should lead but does not. Kafka's `checkAndTriggerAutoLeaderRebalance`."""
    ratios = imbalance(image, deleting)
    over = {broker for broker, ratio in ratios.items() if ratio > threshold_percent / 100}
    changes: list[Change] = []
    for info, state in _partitions(image, deleting):
        if state.replicas and state.replicas[0] in over:
            new = elect_preferred(state, live).state
            if new is not None:
                changes.append((info.name, new))
    return changes
