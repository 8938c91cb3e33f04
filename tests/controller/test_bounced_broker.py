"""A broker that re-registered between two reconciles (its registration's czxid changed: it
restarted within the session timeout) is handled as failed and then back, once: the
controller elects away from it and takes it out of the ISRs, and from then on it is a live
broker again, which a leader may add back to its ISR. It used to stay "bounced" for as long as
that controller lived, taking it out of every ISR its leaders added it to, with a new leader
epoch each time (the fault schedule's ISR that never filled, a flake in CI and here)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import trio

from pybroker.cluster.image import BrokerInfo, MetadataImage
from pybroker.controller.controller import Controller
from tests.controller.helpers import image, ps


class _Store:
    node_id = 1
    deleting: frozenset[str] = frozenset()

    def __init__(self, current: MetadataImage) -> None:
        self.image = current


class RecordingController(Controller):
    """The façade's reconcile with the ZooKeeper writes recorded instead of made."""

    def __init__(self, store: Any) -> None:
        super().__init__(store)
        self.written: list[list[tuple[str, Any]]] = []

    async def _write_states(self, changes: Any, *, create: bool = False) -> int:
        changes = list(changes)
        if changes:
            self.written.append(changes)
        return len(changes)

    async def _delete_marked(self, image: MetadataImage) -> None:
        pass

    async def _advance_reassignments(self, image: MetadataImage, live: Any) -> None:
        pass


def _cluster(isr: tuple[int, ...], epoch_of_2: int, leader_epoch: int) -> MetadataImage:
    base = image({"t": [ps(1, [1, 2, 3], isr, epoch=leader_epoch)]})
    brokers = {n: BrokerInfo(n, "h", 9000 + n, epoch=100 * n) for n in (1, 3)}
    brokers[2] = BrokerInfo(2, "h", 9002, epoch=epoch_of_2)
    return replace(base, brokers=brokers)


def test_a_bounced_broker_is_failed_once_then_live_again() -> None:
    store = _Store(_cluster((1, 2, 3), epoch_of_2=200, leader_epoch=5))
    controller = RecordingController(store)

    async def reconcile() -> None:
        await controller._reconcile(store.image)

    trio.run(reconcile)
    assert controller.written == []  # nothing to do: every replica in sync
    # Broker 2 re-registered (a new czxid) before the controller saw it gone.
    store.image = _cluster((1, 2, 3), epoch_of_2=201, leader_epoch=5)
    trio.run(reconcile)
    ((change,),) = controller.written
    assert change[1].isr == (1, 3) and change[1].leader == 1
    # The controller's write lands; the leader then adds the caught-up broker 2 back.
    store.image = _cluster((1, 3), epoch_of_2=201, leader_epoch=6)
    trio.run(reconcile)
    store.image = _cluster((1, 3, 2), epoch_of_2=201, leader_epoch=6)
    trio.run(reconcile)
    trio.run(reconcile)
    assert len(controller.written) == 1, controller.written  # left in the ISR
