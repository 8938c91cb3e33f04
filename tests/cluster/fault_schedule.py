"""A randomized fault schedule against a three-broker cluster, checked like Jepsen's Kafka
analyses. Runnable as a script (the long version) and imported by the default test run (a
short one):

    python -m tests.cluster.fault_schedule --rounds 20 --seed 7

Each round picks one fault — kill -9 of a leader, of the controller or of any broker, SIGTERM
of a leader (controlled shutdown), SIGSTOP of a leader past its ZooKeeper session, SIGSTOP of
a follower past the replica lag time, a ZooKeeper restart, and network partitions (a leader
or a follower isolated, a leader or the controller cut from ZooKeeper, a leader cut from
one follower; pybroker/testing/network.py) — applies it under an acks=all
idempotent load (RF 3, min.insync.replicas 2), heals it, and waits until every partition has
its full ISR again. At the end every acknowledged record must be read back at the offset it
was acknowledged at, once and in order, and the replicas must hold identical bytes below
the high watermark. One fault at a time: the promise holds while at most one broker is faulty
(REPLICATION.md §4). The partitions need root (network namespaces); `--faults` without them
runs on loopback.
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

from kafka import KafkaConsumer, TopicPartition

from pybroker.testing.network import ZOOKEEPER, Network
from tests.cluster.brokers import LAG_TIME_MS, SESSION_TIMEOUT_MS, Cluster, running_cluster
from tests.cluster.checker import check, replicas_differ
from tests.cluster.workload import AckedProducer, read_all

TOPIC = "schedule"
PARTITIONS = 3
CRASHES = ("kill-leader", "kill-controller", "kill-any", "term-leader", "pause-leader",
           "pause-follower", "restart-zookeeper")
PARTITIONS_FAULTS = ("isolate-leader", "isolate-follower", "zk-cut-leader",
                     "zk-cut-controller", "cut-leader-follower")
FAULTS = CRASHES + PARTITIONS_FAULTS


def _create(cluster: Cluster) -> None:
    from tests.cluster.test_failover import create_topic
    create_topic(cluster, TOPIC, partitions=PARTITIONS)


def _healed(cluster: Cluster) -> None:
    for p in range(PARTITIONS):
        cluster.wait_isr(TOPIC, p, set(cluster.ids), timeout=90)


def apply_fault(fault: str, cluster: Cluster, zookeeper, rng: random.Random) -> None:  # type: ignore[no-untyped-def]
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


def run(work_dir: Path, zookeeper, rounds: int, seed: int,  # type: ignore[no-untyped-def]
        faults: tuple[str, ...] = FAULTS, rate: float = 200.0,
        out=sys.stdout, network: Network | None = None) -> dict:  # type: ignore[no-untyped-def]
    """Run the schedule; returns the summary (also printed). The partition faults need
    `network` (ZooKeeper runs in its ZOOKEEPER member)."""
    if network is None and set(faults) & set(PARTITIONS_FAULTS):
        raise ValueError("the partition faults need a network")
    rng = random.Random(seed)
    done: Counter[str] = Counter()
    started = time.monotonic()
    with running_cluster(work_dir, zookeeper.connect, network=network) as cluster:
        _create(cluster)
        producer = AckedProducer(cluster.bootstrap(), TOPIC, rate=rate).start()
        try:
            producer.wait_acked(100)
            for i in range(rounds):
                fault = rng.choice(faults)
                print(f"round {i + 1}/{rounds}: {fault}", file=out, flush=True)
                apply_fault(fault, cluster, zookeeper, rng)
                _healed(cluster)
                before = producer.acked_count()
                producer.wait_acked(before + 50, timeout=60)
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
        where: dict = {}  # type: ignore[type-arg]
        if set(faults) & set(PARTITIONS_FAULTS):
            network = stack.enter_context(Network([ZOOKEEPER, 1, 2, 3]))
            where = {"host": network.address(ZOOKEEPER),
                     "wrap": partial(network.command, ZOOKEEPER)}
        zookeeper = stack.enter_context(run_zookeeper(Path(tmp) / "zk", **where))
        summary = run(Path(tmp), zookeeper, args.rounds, args.seed, faults, args.rate,
                      network=network)
    return 0 if not summary["problems"] and summary["replicas_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
