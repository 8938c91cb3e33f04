"""Kafka's leader recovery state (KIP-704) in ZooKeeper mode: an unclean election writes
RECOVERING into the partition's state znode, as Kafka's TopicPartitionStateZNode does, every
later controller decision keeps it, and the leader's ISR expansion clears it (the znode then
reads as before Kafka 3.2, without the key)."""
from __future__ import annotations

import json

from pybroker.cluster import zk_data as zd
from pybroker.cluster.image import RECOVERED, RECOVERING
from pybroker.controller.election import elect_offline, elect_unclean_for, shrink_isr
from tests.controller.helpers import ps

L = frozenset


def test_an_unclean_election_leaves_the_leader_recovering() -> None:
    state = ps(-1, (1, 2, 3), (1,))  # 1 was the last in sync, and is gone
    new = elect_offline(state, L({2, 3}), unclean=True)
    assert new is not None and (new.leader, new.isr) == (2, (2,))
    assert new.leader_recovery_state == RECOVERING
    asked = elect_unclean_for(state, L({3}))
    assert asked.state is not None and asked.state.leader_recovery_state == RECOVERING


def test_a_clean_election_keeps_the_state_it_found() -> None:
    clean = elect_offline(ps(1, (1, 2, 3), (1, 2)), L({2, 3}), unclean=True)
    assert clean is not None and clean.leader == 2
    assert clean.leader_recovery_state == RECOVERED  # a live ISR member: not unclean
    recovering = elect_offline(ps(-1, (1, 2, 3), (1,)), L({2, 3}), unclean=True)
    assert recovering is not None
    again = elect_offline(recovering, L({3}), unclean=False)  # 2 fails, 3 not in sync
    assert again is not None and again.leader == -1
    assert again.leader_recovery_state == RECOVERING  # as Kafka's newLeaderAndIsr keeps it
    assert shrink_isr(recovering, {2}) == (2,)


def test_the_state_znode_is_kafkas() -> None:
    recovering = zd.LeaderAndIsr(2, 7, (2,), 3, RECOVERING)
    assert json.loads(zd.encode_state(recovering)) == {
        "version": 1, "leader": 2, "leader_epoch": 7, "isr": [2], "controller_epoch": 3,
        "leader_recovery_state": 1}
    assert zd.decode_state(zd.encode_state(recovering)) == recovering
    recovered = zd.LeaderAndIsr(2, 7, (2, 3), 3)
    assert "leader_recovery_state" not in json.loads(zd.encode_state(recovered))
    # A znode Kafka before 3.2 (or pybroker before this) wrote: RECOVERED.
    old = b'{"version":1,"leader":2,"leader_epoch":7,"isr":[2,3],"controller_epoch":3}'
    assert zd.decode_state(old).leader_recovery_state == RECOVERED
