"""A randomized fault schedule against a three-broker cluster, checked like Jepsen's Kafka
analyses. Runnable as a script (the long version) and imported by the default test run (a
short one):

    python -m tests.cluster.fault_schedule --rounds 20 --seed 7

Each round deals one fault from a shuffled deck of the kinds (every kind once before any
repeats) — kill -9 of a leader, of the controller or of any broker, SIGTERM of a leader
(controlled shutdown), SIGSTOP of a leader past its ZooKeeper session, SIGSTOP of a follower
past the replica lag time, a ZooKeeper restart, network partitions (a leader or a follower
isolated, a leader or the controller cut from ZooKeeper, a leader cut from one follower;
pybroker/testing/network.py), and disk faults (the disk holding a leader's or a follower's
replica filled to ENOSPC or failed as on an I/O error; each broker's log.dirs are two small
ext4 disks, pybroker/testing/disk_faults.py) — applies it under an acks=all idempotent load
(RF 3, min.insync.replicas 2), heals it (a disk freed or repaired, its broker restarted), and
waits until every partition has its full ISR again. At the end every acknowledged record must
be read back at the offset it was acknowledged at, once and in order, and the replicas must
hold identical bytes below the high watermark. One fault at a time: the promise holds while
at most one broker is faulty (REPLICATION.md §4). The partitions and the disks need root
(network namespaces, mounts); `--faults` without them runs on loopback and plain dirs.
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any, TextIO

from kafka import KafkaConsumer, TopicPartition

from pybroker.testing import disk_faults
from pybroker.testing.disk_faults import DiskFaults
from pybroker.testing.network import ZOOKEEPER, Network
from pybroker.testing.zookeeper import ZooKeeperProcess
from tests.cluster.brokers import (
    LAG_TIME_MS, SESSION_TIMEOUT_MS, Cluster, create_topic, running_cluster,
)
from tests.cluster.checker import check, replicas_differ
from tests.cluster.workload import AckedProducer, read_all

TOPIC = "schedule"
PARTITIONS = 3
CRASHES = ("kill-leader", "kill-controller", "kill-any", "term-leader", "pause-leader",
           "pause-follower", "restart-zookeeper")
PARTITIONS_FAULTS = ("isolate-leader", "isolate-follower", "zk-cut-leader",
                     "zk-cut-controller", "cut-leader-follower")
DISK_FAULTS = ("fill-leader-disk", "fill-follower-disk", "fail-leader-disk",
               "fail-follower-disk")
FAULTS = CRASHES + PARTITIONS_FAULTS + DISK_FAULTS
# Each broker's log dirs: two ext4 disks of this size (MB), mounted by `run`.
DISK_MB = 32


def _create(cluster: Cluster) -> None:
    create_topic(cluster, TOPIC, partitions=PARTITIONS)


def _healed(cluster: Cluster) -> None:
    try:
        for p in range(PARTITIONS):
            cluster.wait_isr(TOPIC, p, set(cluster.ids), timeout=90)
    except AssertionError as exc:  # what the controller goes by: the registrations
        registrations = "\n".join(
            f"/brokers/ids/{n}: {cluster.zk.get(f'/brokers/ids/{n}')[0].decode()}"
            if cluster.zk.exists(f"/brokers/ids/{n}") else f"/brokers/ids/{n}: absent"
            for n in cluster.ids)
        raise AssertionError(f"{exc}\n{registrations}") from None


def apply_fault(fault: str, cluster: Cluster, zookeeper: ZooKeeperProcess, rng: random.Random,
                disks: DiskFaults | None = None) -> None:
    partition = rng.randrange(PARTITIONS)
    if fault == "kill-leader":
        victim = cluster.leader(TOPIC, partition)
        cluster.kill(victim)
        time.sleep(rng.uniform(0, 3))
        cluster.start(victim)
    elif fault == "kill-controller":
        victim = cluster.controller()
        cluster.kill(victim)
        time.sleep(rng.uniform(0, 3))
        cluster.start(victim)
    elif fault == "kill-any":
        victim = rng.choice(cluster.ids)
        cluster.kill(victim)
        cluster.start(victim)
    elif fault == "term-leader":
        victim = cluster.leader(TOPIC, partition)
        cluster.stop(victim)
        cluster.start(victim)
    elif fault == "pause-leader":
        victim = cluster.leader(TOPIC, partition)
        cluster.pause(victim)
        time.sleep(SESSION_TIMEOUT_MS / 1000 + rng.uniform(1, 4))
        cluster.resume(victim)
    elif fault == "pause-follower":
        leader = cluster.leader(TOPIC, partition)
        victim = rng.choice([n for n in cluster.ids if n != leader])
        cluster.pause(victim)
        time.sleep(LAG_TIME_MS / 1000 + rng.uniform(1, 2))
        cluster.resume(victim)
    elif fault == "restart-zookeeper":
        zookeeper.restart()
    elif fault in PARTITIONS_FAULTS:
        _partition(fault, cluster, partition, rng)
    elif fault in DISK_FAULTS:
        if disks is None:
            raise ValueError(f"{fault} needs the brokers' disks")
        _disk(fault, cluster, disks, partition, rng)
    else:
        raise ValueError(fault)


def _partition(fault: str, cluster: Cluster, partition: int, rng: random.Random) -> None:
    """Cut links for longer than the ZooKeeper session (a broker cut from ZooKeeper) or the
    replica lag time (a follower cut from its leader), then heal."""
    leader = cluster.leader(TOPIC, partition)
    follower = rng.choice([n for n in cluster.ids if n != leader])
    session_s = SESSION_TIMEOUT_MS / 1000 + rng.uniform(1, 4)
    lag_s = LAG_TIME_MS / 1000 + rng.uniform(1, 2)
    if fault == "isolate-leader":
        cluster.isolate(leader)
        wait = session_s
    elif fault == "isolate-follower":
        cluster.isolate(follower)
        wait = lag_s
    elif fault == "zk-cut-leader":
        cluster.partition_from_zookeeper(leader)
        wait = session_s
    elif fault == "zk-cut-controller":
        cluster.partition_from_zookeeper(cluster.controller())
        wait = session_s
    else:  # cut-leader-follower
        cluster.partition({leader}, {follower})
        wait = lag_s
    try:
        time.sleep(wait)
    finally:
        cluster.heal()


def _disk(fault: str, cluster: Cluster, disks: DiskFaults, partition: int,
          rng: random.Random) -> None:
    """Fill or fail the disk that holds a leader's or a follower's replica of `partition`,
    wait until that broker is out of the partition's ISR (its dir went offline at its next
    write: KIP-112), then heal as an operator would: free the space, or stop the broker and
    repair the file system (unmount, e2fsck, mount), and start the broker again, which brings
    the dir back (a dir stays offline until a restart, as in Kafka)."""
    leader = cluster.leader(TOPIC, partition)
    victim = leader if "leader" in fault else rng.choice([n for n in cluster.ids
                                                          if n != leader])
    log_dir = cluster.dir_holding(victim, TOPIC, partition)
    held = None if log_dir is None else disks.holding(log_dir)
    if held is None or held[0] != victim:
        raise AssertionError(f"broker {victim}'s replica of {TOPIC}-{partition} is on none "
                             f"of its disks ({cluster.dirs_of(victim)})")
    name = held[1]
    if fault.startswith("fill"):
        disks.fill_disk(victim, name)
    else:
        disks.fail_disk(victim, name)
    cluster.wait_until(lambda: victim not in map(cluster.node_of,
                                                 cluster.state(TOPIC, partition)["isr"]), 60,
                       f"broker {victim} to leave the ISR of {TOPIC}-{partition} after "
                       f"{fault} of {log_dir}")
    time.sleep(rng.uniform(0, 2))  # the load goes on without it for a while
    # Only the dirs on that disk went offline (KIP-112): every broker of the node has a dir
    # on each of its two disks, so none lost them all, and the node serves on
    # (pybroker.node.supervisor stops a node only for a broker whose every dir failed).
    lines = cluster.brokers[victim].stderr_lines
    proc = cluster.brokers[victim].proc
    assert proc is not None and proc.poll() is None, \
        f"broker {victim} stopped after {fault}:\n" + "".join(lines[-20:])
    assert not [ln for ln in lines if "CRITICAL" in ln], "".join(lines[-20:])
    if fault.startswith("fill"):
        disks.free_disk(victim, name)
        stopped = cluster.stop(victim)
    else:
        stopped = cluster.stop(victim)
        disks.repair_disk(victim, name)
    assert stopped == 0, f"broker {victim} stopped with exit code {stopped} after {fault}"
    cluster.start(victim)


def _deal(faults: tuple[str, ...], rounds: int, rng: random.Random) -> list[str]:
    """The faults of the rounds, dealt from a shuffled deck of `faults`: every kind once
    before any comes again, so a short run covers as many kinds as it has rounds."""
    dealt: list[str] = []
    while len(dealt) < rounds:
        deck = list(faults)
        rng.shuffle(deck)
        dealt += deck
    return dealt[:rounds]


def _replicas_differ(cluster: Cluster) -> list[str]:
    """Where the replicas differ below each partition's high watermark."""
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap().split(","))
    try:
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        ends = consumer.end_offsets(tps)
    finally:
        consumer.close()
    return [f"{TOPIC}-{tp.partition}: {problem}" for tp in tps
            for problem in replicas_differ({n: cluster.segment_bytes(n, TOPIC, tp.partition)
                                            for n in cluster.ids}, ends[tp])]


def run(work_dir: Path, zookeeper: ZooKeeperProcess, rounds: int, seed: int,
        faults: tuple[str, ...] = FAULTS, rate: float = 200.0,
        out: TextIO = sys.stdout, network: Network | None = None,
        disks: DiskFaults | None = None) -> dict[str, Any]:
    """Run the schedule; returns the summary (also printed). The partition faults need
    `network` (ZooKeeper runs in its ZOOKEEPER member); the disk faults `disks`, on which
    each broker gets two ext4 disks as its log dirs."""
    if network is None and set(faults) & set(PARTITIONS_FAULTS):
        raise ValueError("the partition faults need a network")
    if disks is None and set(faults) & set(DISK_FAULTS):
        raise ValueError("the disk faults need disks (pybroker.testing.disk_faults)")
    order = _deal(faults, rounds, random.Random(seed))
    rng = random.Random(seed + 1)  # each fault's choices, apart from the order
    done: Counter[str] = Counter()
    started = time.monotonic()
    log_dirs = None if disks is None or not set(faults) & set(DISK_FAULTS) else {
        n: [disks.mount(n, x, size_mb=DISK_MB) for x in "ab"] for n in (1, 2, 3)}
    with running_cluster(work_dir, zookeeper.connect, network=network,
                         log_dirs=log_dirs) as cluster:
        _create(cluster)
        producer = AckedProducer(cluster.bootstrap(), TOPIC, rate=rate).start()
        try:
            producer.wait_acked(100)
            for i, fault in enumerate(order):
                began = time.monotonic()
                apply_fault(fault, cluster, zookeeper, rng, disks)
                _healed(cluster)
                before = producer.acked_count()
                producer.wait_acked(before + 50, timeout=60)
                print(f"round {i + 1}/{rounds}: {fault} "
                      f"({time.monotonic() - began:.1f} s)", file=out, flush=True)
                done[fault] += 1
        finally:
            history = producer.stop()
        read_all(cluster.bootstrap(), TOPIC, history, PARTITIONS)
        problems = check(history)
        differ = _replicas_differ(cluster)
        identical = not differ
        problems += differ
    summary = {
        "rounds": rounds, "seed": seed, "faults": dict(done),
        "sent": producer.sent, "acknowledged": len(history.acked),
        "read": sum(len(r) for r in history.read.values()),
        "send_failures": dict(producer.errors), "anomalies": len(problems),
        "replicas_identical": identical, "seconds": round(time.monotonic() - started, 1)}
    print("summary: " + " ".join(f"{k}={v}" for k, v in summary.items()), file=out)
    for problem in problems[:20]:
        print("  " + problem, file=out)
    summary["problems"] = problems
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--rate", type=float, default=200.0, help="records a second")
    parser.add_argument("--faults", default=",".join(FAULTS),
                        help="comma-separated subset of " + ", ".join(FAULTS))
    args = parser.parse_args(argv)
    from pybroker.testing.zookeeper import run_zookeeper
    faults = tuple(args.faults.split(","))
    with tempfile.TemporaryDirectory(prefix="pybroker-faults-") as tmp, ExitStack() as stack:
        network = None
        where: dict[str, Any] = {}
        if set(faults) & set(PARTITIONS_FAULTS):
            network = stack.enter_context(Network([ZOOKEEPER, 1, 2, 3]))
            where = {"host": network.address(ZOOKEEPER),
                     "wrap": partial(network.command, ZOOKEEPER)}
        disks = None
        if set(faults) & set(DISK_FAULTS):
            why = disk_faults.available("ext4")
            if why:
                parser.error(f"the disk faults cannot run here: {why}")
            disks = stack.enter_context(DiskFaults())
        zookeeper = stack.enter_context(run_zookeeper(Path(tmp) / "zk", **where))
        summary = run(Path(tmp), zookeeper, args.rounds, args.seed, faults, args.rate,
                      network=network, disks=disks)
    return 0 if not summary["problems"] and summary["replicas_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
