"""KIP-112 on a real ZooKeeper with subprocess brokers: a leader's log dir fails (ext4 on a
loop device that the kernel takes read-only, `pybroker.testing.disk_faults`). Leadership of
its partitions there moves to an in-sync replica elsewhere and the broker leaves their ISR,
while it keeps leading the partitions of its healthy dir; with acks=all and
min.insync.replicas=2 nothing acknowledged is lost. Restarted with the disk repaired, the dir
comes back and the replica rejoins the ISR."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from compat import wire
from protocol.api_keys import ApiKey
from pybroker.testing.disk_faults import DiskFaults, available
from tests.cluster.brokers import Cluster
from tests.cluster.checker import check
from tests.cluster.workload import AckedProducer, read_all


def offline_replicas(cluster: Cluster, topic: str) -> list[int]:
    body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
    answer = wire.request(cluster.brokers[2].bootstrap, ApiKey.METADATA, 9, body)
    return list(answer.topics[0].partitions[0].offline_replicas)


def test_a_leaders_failed_log_dir_moves_leadership_and_loses_nothing(
        tmp_path: Path, zookeeper) -> None:  # type: ignore[no-untyped-def]
    why = available("ext4")
    if why:
        pytest.skip(why)
    cluster = Cluster(tmp_path, zookeeper.connect)
    with DiskFaults() as faults:
        try:
            disk = faults.mount(1, "d1")
            healthy = tmp_path / "broker-1"
            cluster.broker(1, **{"log.dirs": f"{healthy},{disk}"}).start(60)
            cluster.start(2)
            cluster.start(3)
            admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap().split(","))
            try:  # one at a time: the first lands in broker 1's first dir, the next on disk
                for name in ("steady", "ondisk"):
                    admin.create_topics([NewTopic(name, replica_assignments={0: [1, 2, 3]},
                                                  topic_configs={"min.insync.replicas": "2"})])
                    cluster.wait_isr(name, 0, {1, 2, 3})
            finally:
                admin.close()
            assert (healthy / "steady-0").is_dir() and (disk / "ondisk-0").is_dir()
            assert cluster.leader("ondisk", 0) == 1 == cluster.leader("steady", 0)
            producer = AckedProducer(cluster.bootstrap(), "ondisk", rate=200).start()
            try:
                producer.wait_acked(100)
                faults.fail_disk(1, "d1")
                cluster.wait_until(lambda: cluster.leader("ondisk", 0) in (2, 3), 30,
                                   "leadership of ondisk-0 to move off broker 1")
                cluster.wait_isr("ondisk", 0, {2, 3})
                # Metadata names the replica offline, as Kafka's does (KIP-112).
                cluster.wait_until(lambda: offline_replicas(cluster, "ondisk") == [1], 30,
                                   "Metadata to list broker 1's replica of ondisk-0 offline")
                assert offline_replicas(cluster, "steady") == []
                before = producer.acked_count()
                producer.wait_acked(before + 200, timeout=60)
            finally:
                history = producer.stop()
            assert cluster.brokers[1].proc is not None
            assert cluster.brokers[1].proc.poll() is None, "broker 1 stopped"
            # Its healthy dir serves on: it still leads steady-0, in sync with the others.
            assert cluster.leader("steady", 0) == 1
            assert set(cluster.state("steady", 0)["isr"]) == {1, 2, 3}
            errors = [ln for ln in cluster.brokers[1].stderr_lines if str(disk) in ln]
            assert any("offline" in ln for ln in errors), cluster.brokers[1].stderr_lines[-10:]
            told = [ln for n in (1, 2, 3) for ln in cluster.brokers[n].stderr_lines
                    if "replica(s) in failed log dirs" in ln]
            assert told and "ondisk" in told[0], told  # the controller heard of it
            read_all(cluster.bootstrap(), "ondisk", history, 1)
            assert not check(history)
            assert not cluster.zk.get_children("/log_dir_event_notification") or \
                cluster.wait_until(
                    lambda: not cluster.zk.get_children("/log_dir_event_notification"), 30,
                    "the controller to remove the log dir event")

            cluster.stop(1)
            faults.repair_disk(1, "d1")
            assert not os.path.exists(disk / ".kafka_cleanshutdown")
            cluster.broker(1, **{"log.dirs": f"{healthy},{disk}"}).start(60)
            cluster.wait_isr("ondisk", 0, {1, 2, 3}, timeout=60)
        finally:
            cluster.close()
