"""Unclean leader election on a cluster (pybroker.testing.Cluster, in-memory ZooKeeper): off
by default and honoured per topic (`unclean.leader.election.enable`); an unclean leader is
RECOVERING in its partition's state znode until its ISR grows, as Kafka writes it."""
from __future__ import annotations

import json

from pybroker.cluster import zk_data as zd
from pybroker.testing.cluster import Cluster


def _znode(cluster: Cluster, node: int, topic: str) -> dict[str, object]:
    zk = cluster.server(node).broker.zk_store.zk  # type: ignore[union-attr]
    raw, _ = zk.get(zd.state_path(topic, 0))
    return json.loads(raw)


def test_only_a_topic_that_allows_it_elects_uncleanly_and_recovers() -> None:
    with Cluster(3) as cluster:
        cluster.create_topic("dirty", 1, 3, {"unclean.leader.election.enable": "true"})
        cluster.create_topic("clean", 1, 3)
        cluster.move_leader("clean", 0, cluster.leader_of("dirty"))
        last = cluster.leader_of("dirty")
        first, second = (n for n in range(3) if n != last)
        for node in (first, second):
            cluster.stop_broker(node)
        for topic in ("dirty", "clean"):
            cluster.wait_for_isr(topic, 0, {last})
        cluster.stop_broker(last)  # the last in-sync replica of both goes
        cluster.start_broker(first)  # out of sync: only "dirty" may take it
        cluster.wait_until(lambda: cluster.leader_of("dirty") == first, "an unclean leader")
        state = _znode(cluster, first, "dirty")
        assert state["leader"] == first and state["isr"] == [first]
        assert state["leader_recovery_state"] == 1
        assert cluster._image().partition("dirty", 0).leader_recovery_state == 1
        clean = _znode(cluster, first, "clean")
        assert clean["leader"] == -1 and clean["isr"] == [last]  # waits for `last`
        assert "leader_recovery_state" not in clean
        cluster.start_broker(second)  # follows the unclean leader; the ISR grows
        cluster.wait_for_isr("dirty", 0, {first, second})
        cluster.wait_until(lambda: "leader_recovery_state" not in _znode(cluster, first,
                                                                          "dirty"),
                           "the leader to be RECOVERED once its ISR grew")
        assert cluster.leader_of("clean") == -1
