"""The replica selector alone (KIP-392): Kafka's RackAwareReplicaSelector, and which replicas
the leader offers it (in the ISR, holding the fetch offset, reachable on the client's
listener). No broker, no clock: a real log under a Partition, time passed in."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pybroker.config import BROKER_CONFIG_DEFS, ConfigError, load_broker_config
from pybroker.replica.partition import Partition
from pybroker.replica.replica_selector import (
    RACK_AWARE_SELECTOR, SELECTOR_CLASSES, ClientMetadata, RackAwareReplicaSelector,
    ReplicaView, preferred_read_replica, replica_selector,
)
from pybroker.storage.partition_log import PartitionLog
from tests.storage.util import SMALL, batch

SELECTOR = RackAwareReplicaSelector()
RACKS = {0: "a", 1: "b", 2: "c"}


def _view(broker: int, rack: str | None, leo: int = 10, since_ms: int = 0) -> ReplicaView:
    return ReplicaView(broker, rack, leo, since_ms)


def test_no_client_rack_means_the_leader() -> None:
    leader = _view(0, "a")
    assert SELECTOR.select(ClientMetadata(""), leader, [leader, _view(1, "")]) is leader


def test_the_leader_in_the_clients_rack_is_kept() -> None:
    leader = _view(0, "a")
    chosen = SELECTOR.select(ClientMetadata("a"), leader, [leader, _view(1, "a", leo=99)])
    assert chosen is leader


def test_no_replica_in_the_clients_rack_means_the_leader() -> None:
    leader = _view(0, "a")
    assert SELECTOR.select(ClientMetadata("z"), leader, [leader, _view(1, "b")]) is leader


def test_the_most_caught_up_replica_of_the_rack_then_the_most_recently_caught_up() -> None:
    leader = _view(0, "a")
    behind, ahead = _view(1, "b", leo=5), _view(2, "b", leo=9, since_ms=400)
    assert SELECTOR.select(ClientMetadata("b"), leader, [leader, behind, ahead]) is ahead
    stale, fresh = _view(1, "b", leo=9, since_ms=500), _view(2, "b", leo=9, since_ms=20)
    assert SELECTOR.select(ClientMetadata("b"), leader, [leader, stale, fresh]) is fresh
    # A full tie: the lower broker id, whatever the order given.
    one, two = _view(2, "b"), _view(1, "b")
    assert SELECTOR.select(ClientMetadata("b"), leader, [leader, one, two]) is two


def test_the_config_key_names_exactly_the_selectors_served() -> None:
    key = BROKER_CONFIG_DEFS["replica.selector.class"]
    assert key.default is None and replica_selector(None) is None
    assert set(getattr(key.validator, "choices")) == set(SELECTOR_CLASSES) \
        == {RACK_AWARE_SELECTOR}
    config = load_broker_config(None, {"replica.selector.class": RACK_AWARE_SELECTOR})
    assert isinstance(replica_selector(config.replica_selector_class), RackAwareReplicaSelector)


def test_an_unknown_selector_class_is_refused_at_start() -> None:
    """Kafka fails to start on a class it cannot load; so does pybroker, naming what it has."""
    with pytest.raises(ConfigError, match="replica.selector.class: Class com.example.Nearest "
                                          "could not be found .pybroker serves org.apache"):
        load_broker_config(None, {"replica.selector.class": "com.example.Nearest"})


# -- what the leader offers the selector ---------------------------------------------------------
@pytest.fixture
def leader(tmp_path: Path) -> Iterator[Partition]:
    """Broker 0 leading t-0 with followers 1 (rack b) and 2 (rack c), 10 records committed,
    both followers caught up at 10 with their logs starting at 0."""
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    part = Partition("t", 0, plog, local_id=0)
    part.make_leader(0, [0, 1, 2], [0, 1, 2], now_ms=0)
    for _ in range(10):
        plog.append(batch(1), leader_epoch=0)
    part.update_follower_fetch(1, 10, now_ms=100, log_start_offset=0)
    part.update_follower_fetch(2, 10, now_ms=100, log_start_offset=0)
    yield part
    plog.close()


def _preferred(part: Partition, rack: str, offset: int = 5,
               racks: dict[int, str | None] = RACKS) -> int:
    return preferred_read_replica(SELECTOR, part, ClientMetadata(rack), offset, 200, racks)


def test_a_follower_in_the_clients_rack_is_preferred(leader: Partition) -> None:
    assert _preferred(leader, "b") == 1
    assert _preferred(leader, "c") == 2
    assert _preferred(leader, "a") == -1  # the leader's own rack: read here
    assert _preferred(leader, "") == -1


def test_a_follower_out_of_the_isr_is_never_preferred(leader: Partition) -> None:
    leader.set_isr([0, 2])
    assert _preferred(leader, "b") == -1
    assert _preferred(leader, "c") == 2


def test_a_follower_that_has_not_reached_the_offset_is_not_preferred(leader: Partition) -> None:
    leader.update_follower_fetch(1, 4, now_ms=150, log_start_offset=0)
    assert _preferred(leader, "b", offset=5) == -1
    assert _preferred(leader, "b", offset=4) == 1  # it has everything below 4: it can serve 4


def test_a_follower_whose_log_starts_after_the_offset_is_not_preferred(
        leader: Partition) -> None:
    leader.update_follower_fetch(1, 10, now_ms=150, log_start_offset=6)
    assert _preferred(leader, "b", offset=5) == -1
    assert _preferred(leader, "b", offset=6) == 1


def test_a_broker_unreachable_on_the_clients_listener_is_not_preferred(
        leader: Partition) -> None:
    # Broker 1 is gone from the image (dead), or has no endpoint on the client's listener.
    assert _preferred(leader, "b", racks={0: "a", 2: "c"}) == -1
