"""When a node's worker may count as ready: it sees its node and the node's partitions are led.

A broker that logs "listening" serves, but a worker of a node is one broker of a cluster that
is still forming: its siblings may not be registered in its image yet (a client bootstrapping
on it would see one broker), and after a restart of the node the controller has yet to elect
leaders again for the partitions whose leaders were the workers that registered after it (a
client gets LEADER_NOT_AVAILABLE, or UNKNOWN_TOPIC_OR_PARTITION from a broker whose image
is behind). A Kafka broker is ready when it has registered and caught up with the metadata
(KRaft: unfenced after replaying the log; ZooKeeper mode: after the controller's
UpdateMetadata); the node's supervisor says "ready" once each worker logged `IN_SYNC_LINE`:
its own image holds every broker of the node and a controller, and the controller would elect
nothing more, so every partition that can have a leader has one (the controller's own rule,
`decisions.on_brokers_started`, over the live brokers: a partition whose in-sync replicas are
all on brokers that are down stays offline in Kafka too, and is not waited for); and it has
loaded the groups and transactions of the internal partitions it leads, as a single broker
has before it listens (a restarted node's worker may be given them again only after its
start: COORDINATOR_LOAD_IN_PROGRESS meanwhile).
"""
from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Collection, Set
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pybroker.cluster.metadata import MetadataImage
    from pybroker.cluster.zk_store import ZkMetadataStore

log = logging.getLogger("pybroker.node")

# Set by the supervisor in each worker's environment: the broker ids of the node, comma-separated.
NODE_BROKERS_ENV = "PYBROKER_NODE_BROKERS"
# What a worker logs once `in_sync` holds for its image; the supervisor reads the broker id.
IN_SYNC_LINE = "is in sync with its node"


def node_brokers() -> frozenset[int] | None:
    """The node's broker ids from this worker's environment; None outside a node."""
    raw = os.environ.get(NODE_BROKERS_ENV)
    if not raw:
        return None
    return frozenset(int(item) for item in raw.split(","))


def in_sync(image: MetadataImage, brokers: Set[int], unclean_default: bool,
            deleting: Set[str]) -> bool:
    """Whether `image` holds every broker of `brokers` and a live controller, and leaves the
    controller no leader to elect (`unclean_default`: unclean.leader.election.enable, which a
    topic's config overrides; `deleting`: topics marked for deletion, which are not elected)."""
    from pybroker.controller import decisions
    live = frozenset(image.brokers)
    if not brokers <= live or image.controller_id not in live:
        return False
    offline = {b: info.offline_replicas for b, info in image.brokers.items()
               if info.offline_replicas}
    unclean = decisions.unclean_from_configs(image, unclean_default)
    return not decisions.on_brokers_started(image, live, unclean, deleting, offline)


def coordinators_loaded(image: MetadataImage, node_id: int, *, groups: Collection[int],
                        membership: Collection[int], transactions: Collection[int],
                        share_state: Collection[int]) -> bool:
    """Whether broker `node_id` has loaded every partition its image says it leads of
    __consumer_offsets (`groups`, and the share groups' `membership`), __transaction_state
    (`transactions`) and __share_group_state (`share_state`): the partitions each coordinator
    has loaded."""
    from pybroker.coordinator.group_coordinator import OFFSETS_TOPIC
    from pybroker.coordinator.share_state_store import SHARE_STATE_TOPIC
    from pybroker.coordinator.txn_coordinator import TXN_TOPIC

    def led(topic: str) -> set[int]:
        info = image.topics.get(topic)
        return set() if info is None else {p.partition for p in info.partitions
                                           if p.leader == node_id}
    offsets = led(OFFSETS_TOPIC)
    return (offsets <= set(groups) and offsets <= set(membership)
            and led(TXN_TOPIC) <= set(transactions) and led(SHARE_STATE_TOPIC) <= set(share_state))


async def announce_in_sync(store: ZkMetadataStore, node_id: int, brokers: Set[int],
                           unclean: bool, loaded: Callable[[MetadataImage], bool]) -> None:
    """Wait until this worker's image is `in_sync` with its node (`unclean`: its
    unclean.leader.election.enable) and `loaded(image)` says its coordinators have loaded what
    it leads (`coordinators_loaded`), then log `IN_SYNC_LINE`. The loads run in the store's
    listeners after an image is published (once the broker listens: its start loaded what
    its first image gave it), with no event of their own: checked again each time a change's
    listeners have run (`wait_listeners`), the only time one can have finished; not on a
    tick (it was every 50 ms: 20 wakeups a second of a worker that waits)."""
    def done(image: MetadataImage) -> bool:
        return in_sync(image, brokers, unclean, store.deleting)
    while True:
        await store.wait_for(done, math.inf)
        if loaded(store.image):
            break
        await store.wait_listeners()
    log.info("broker %d %s: brokers %s registered, controller %d, a leader for every "
             "partition that can have one", node_id, IN_SYNC_LINE,
             ", ".join(map(str, sorted(brokers))), store.image.controller_id)
