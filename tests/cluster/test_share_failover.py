"""Share groups (KIP-932) on a cluster: a failover keeps the share state (issue #34 item 2).

Three subprocess brokers on a real ZooKeeper, the topic and both internal topics
(`__consumer_offsets`, `__share_group_state`) with replication factor 3. A confluent-kafka
ShareConsumer (librdkafka's, unmodified) in its own process accepts some records, releases
others and holds the rest, then the broker that serves a part of the group's state is killed
-9: the leader of the data partition (whose share-partition lives there), or the leader of
the group's `__share_group_state` partition and `__consumer_offsets` partition (the share
coordinator and the group coordinator), followed, once it is back, by the data partition's
leader (so the state is read back from the coordinator elected at the first kill). A new
consumer in the group then reads exactly the records not acknowledged, none that were
accepted.

The group id is chosen so that the broker to be killed plays only the roles the case names
(the partition of a key is Kafka's hash, so it is found by trying ids).
"""
from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from compat.differential.share_scenarios import (
    CONSUMER_PROCESS, _drain, _fetching_consumer, _produce,
)
from protocol.api_keys import ApiKey
from pybroker.coordinator.internal_topic import partition_for
from tests.cluster.brokers import Cluster, running_cluster
from tests.cluster.share_cluster import OFFSETS_PARTITIONS, SETTINGS, _state_partition, share_topic
from tests.integration.raw import RawConnection

pytestmark = pytest.mark.cluster

RECORDS = [f"r{i}".encode() for i in range(10)]

# A member that accepts warm-ups, then takes the first other records it gets: accepts r0-r3,
# releases r4 and r5, holds the rest, commits, reports, and waits to be killed
# (argv: bootstrap, group, topic).
HOLDER = CONSUMER_PROCESS + """\
    payload = [m for m in msgs if m.value() != b"warm-up"]
    if payload:
        done = {"accepted": [], "released": [], "held": []}
        for m in payload:
            n = int(m.value()[1:])
            kind = "accepted" if n < 4 else "released" if n < 6 else "held"
            if kind != "held":
                c.acknowledge(m, AcknowledgeType.ACCEPT if n < 4 else AcknowledgeType.RELEASE)
            done[kind].append(m.value().decode())
        failed = {str(tp): str(e) for tp, e in c.commit_sync(30).items() if e is not None}
        print("failed:" + json.dumps(failed) if failed else "done:" + json.dumps(done), flush=True)
        time.sleep(600)
    for m in msgs:
        c.acknowledge(m, AcknowledgeType.ACCEPT)
    if msgs:
        c.commit_sync(30)
        print("warm", flush=True)
"""


def _lines(proc: subprocess.Popen[str], into: queue.Queue[str]) -> None:
    for line in proc.stdout or ():
        into.put(line.strip())


def _choose_group(cluster: Cluster, topic_id: uuid.UUID, data_leader: int, case: str) -> str:
    """A group id whose state and membership partitions are led as the case needs: by
    brokers other than the data partition's leader ("data leader": only it dies), or both
    by one broker that does not lead the data partition ("coordinators")."""
    for i in range(10_000):
        group = f"sg-{i}"
        state = cluster.leader("__share_group_state", _state_partition(group, topic_id))
        offsets = cluster.leader("__consumer_offsets", partition_for(group, OFFSETS_PARTITIONS))
        if case == "data leader" and data_leader not in (state, offsets):
            return group
        if case == "coordinators" and state == offsets != data_leader:
            return group
    raise AssertionError(f"no group id fits the case {case!r}")


def _wait_new_leader(cluster: Cluster, topic: str, partition: int, dead: int) -> int:
    return int(cluster.wait_until(
        lambda: (lead := cluster.leader(topic, partition)) not in (dead, -1) and lead, 60,
        f"a leader of {topic}-{partition} other than {dead}"))


def _membership(cluster: Cluster, group: str) -> tuple[int, list[str]]:
    """(group epoch, member ids) as the group's coordinator describes it (ShareGroupDescribe
    to the leader of its __consumer_offsets partition), once it answers without error."""
    def describe() -> tuple[int, list[str]] | None:
        with RawConnection(cluster.leader_address(
                "__consumer_offsets", partition_for(group, OFFSETS_PARTITIONS))) as conn:
            r = conn.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {
                "group_ids": [group], "include_authorized_operations": False})
        d = r.groups[0]
        return None if d.error_code else (d.group_epoch, sorted(m.member_id for m in d.members))
    return cluster.wait_until(describe, 30, f"the coordinator of {group} to describe it")


def _hold(cluster: Cluster, group: str) -> tuple[subprocess.Popen[str], dict[str, list[str]]]:
    """The holder member started, warmed up, given RECORDS: what it accepted, released and
    holds (committed: the commit's answer came back)."""
    lines: queue.Queue[str] = queue.Queue()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, cluster.bootstrap(), group, "q"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    threading.Thread(target=_lines, args=(holder, lines), daemon=True).start()
    line = ""
    deadline = time.monotonic() + 60
    while line != "warm" and time.monotonic() < deadline:
        _produce(cluster.bootstrap(), "q", [b"warm-up"])
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            pass
    assert line == "warm", "the holder got no warm-up record in 60 s"
    _produce(cluster.bootstrap(), "q", RECORDS)
    while not line.startswith(("done:", "failed:")):
        line = lines.get(timeout=60)
    assert line.startswith("done:"), f"the holder's acknowledgements: {line}"
    done: dict[str, list[str]] = json.loads(line[len("done:"):])
    return holder, done


@pytest.mark.parametrize("case", ["data leader", "coordinators"])
def test_a_failover_redelivers_nothing_acknowledged_and_loses_nothing_else(
        tmp_path: Path, zookeeper: Any, case: str) -> None:
    with running_cluster(tmp_path, zookeeper.connect, **SETTINGS) as cluster:
        data_leader, topic_id = share_topic(cluster)
        group = _choose_group(cluster, topic_id, data_leader, case)
        state_partition = _state_partition(group, topic_id)
        offsets_partition = partition_for(group, OFFSETS_PARTITIONS)
        coordinator = cluster.leader("__share_group_state", state_partition)
        holder, done = _hold(cluster, group)
        members = _membership(cluster, group)
        try:
            holder.send_signal(signal.SIGSTOP)  # its connections stay open
            if case == "data leader":
                cluster.kill(data_leader)
                _wait_new_leader(cluster, "q", 0, data_leader)
            else:
                cluster.kill(coordinator)
                _wait_new_leader(cluster, "__share_group_state", state_partition, coordinator)
                _wait_new_leader(cluster, "__consumer_offsets", offsets_partition, coordinator)
                # the new group coordinator loaded the membership on its election
                assert _membership(cluster, group) == members
            holder.kill()
            holder.wait(10)
            if case == "coordinators":
                # the killed coordinator comes back as a follower; then the data partition's
                # leader dies, and its successor reads the state from the new coordinator
                cluster.start(coordinator)
                cluster.wait_isr("q", 0, {1, 2, 3}, 60)
                cluster.wait_isr("__share_group_state", state_partition, {1, 2, 3}, 60)
                cluster.kill(data_leader)
                _wait_new_leader(cluster, "q", 0, data_leader)
        finally:
            if holder.poll() is None:
                holder.kill()
        unacknowledged = sorted(done["released"] + done["held"]
                                + [v.decode() for v in RECORDS
                                   if v.decode() not in sum(done.values(), [])])
        assert done["accepted"] and done["held"], f"the holder accepted or held nothing: {done}"
        got: list[tuple[bytes, int]] = []
        again = _fetching_consumer(cluster.bootstrap(), group, "q", early=got)
        try:
            got += _drain(again, lambda g: len(got) + len(g) >= len(unacknowledged), 60)
            got += _drain(again, lambda g: False, 3)  # and then nothing more
            again.commit_sync()
        finally:
            again.close()
        assert sorted(v.decode() for v, _ in got) == unacknowledged, (
            f"accepted {done['accepted']}, released {done['released']}, held {done['held']};"
            f" after the failover got {sorted(got)}")
