"""KIP-112 on a real ZooKeeper with subprocess brokers: a leader's log dir fails (ext4 on a
loop device that the kernel takes read-only, `pybroker.testing.disk_faults`). Leadership of
its partitions there moves to an in-sync replica elsewhere and the broker leaves their ISR,
while it keeps leading the partitions of its healthy dir; with acks=all and
min.insync.replicas=2 nothing acknowledged is lost. Restarted with the disk repaired, the dir
comes back and the replica rejoins the ISR."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from compat import wire
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.testing.disk_faults import DiskFaults, available
from tests.cluster.brokers import Cluster
from tests.cluster.checker import check
from tests.cluster.workload import AckedProducer, read_all
from tests.helpers import ROOT

STORAGE = int(ErrorCode.KAFKA_STORAGE_ERROR)


def offline_replicas(cluster: Cluster, topic: str) -> list[int]:
    body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
    answer = wire.request(cluster.brokers[2].bootstrap, ApiKey.METADATA, 9, body)
    return list(answer.topics[0].partitions[0].offline_replicas)


@contextmanager
def _cluster_with_a_disk(work_dir: Path, zk_connect: str
                         ) -> Iterator[tuple[Cluster, DiskFaults, Path, Path]]:
    """Brokers 1-3, broker 1 with a second log dir on an ext4 disk; topics `steady` (in
    broker 1's first dir) and `ondisk` (on the disk), RF 3, min.insync.replicas 2, both led
    by broker 1. Yields the cluster, its disks, and broker 1's first dir and disk; skips
    where ext4 cannot be mounted."""
    why = available("ext4")
    if why:
        pytest.skip(why)
    cluster = Cluster(work_dir, zk_connect)
    with DiskFaults() as faults:
        try:
            healthy, disk = _start_with_a_disk(cluster, faults)
            yield cluster, faults, healthy, disk
        except BaseException:
            # Shown with the failure: a failure under load once left nothing to read
            # (leadership never moved off broker 1, and after three KAFKA_STORAGE_ERRORs
            # broker 1 answered none of the producer's requests for 120 s, as if its event
            # loop were stuck), its brokers' logs gone with the run. Each live broker's
            # threads' stacks say where it stands.
            for node, broker in sorted(cluster.brokers.items()):
                print(f"--- broker {node}:\n" + "".join(broker.stderr_lines[-80:]))
                print(_stacks(broker))
            # A leader of -1 with ISR [1] says the ISR had shrunk to broker 1 alone before
            # its dir failed (no in-sync replica left to elect, as in Kafka), not that broker
            # 1 stopped: see docs/TESTING.md.
            for topic in ("steady", "ondisk"):
                try:
                    print(f"--- {topic}-0 in ZooKeeper: {cluster.state(topic, 0)}")
                except Exception as exc:  # what failed may be ZooKeeper itself
                    print(f"--- {topic}-0 in ZooKeeper: unreadable ({exc!r})")
            raise
        finally:
            cluster.close()


def _stacks(broker: Any) -> str:
    """py-spy's dump of a live broker process's threads (py-spy is in the test extras)."""
    if broker.proc is None or broker.proc.poll() is not None:
        return "(not running)"
    spy = Path(sys.executable).with_name("py-spy")
    try:
        done = subprocess.run([str(spy), "dump", "--pid", str(broker.proc.pid)],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"(py-spy: {exc})"
    return done.stdout + done.stderr


def _start_with_a_disk(cluster: Cluster, faults: DiskFaults) -> tuple[Path, Path]:
    disk = faults.mount(1, "d1")
    healthy = cluster.work_dir / "broker-1"
    cluster.broker(1, **{"log.dirs": f"{healthy},{disk}"}).start(60)
    cluster.start(2)
    cluster.start(3)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap().split(","))
    try:  # one at a time: the first lands in broker 1's first dir, the next on disk
        for name in ("steady", "ondisk"):
            admin.create_topics([NewTopic(name, replica_assignments={0: [1, 2, 3]},
                                          topic_configs={"min.insync.replicas": "2"})])
            cluster.wait_isr(name, 0, {1, 2, 3})
            # The ISR is written with the assignment, before broker 1 has made the log (a
            # node under load had not made ondisk-0's when the ISR read [1, 2, 3]), and the
            # next one is placed by where this one went.
            cluster.wait_until(lambda name=name: any(
                (d / f"{name}-0").is_dir() for d in (healthy, disk)), 30,
                f"broker 1 to create the log of {name}-0")
    finally:
        admin.close()
    assert (healthy / "steady-0").is_dir() and (disk / "ondisk-0").is_dir()
    assert cluster.leader("ondisk", 0) == 1 == cluster.leader("steady", 0)
    return healthy, disk


def test_a_leaders_failed_log_dir_moves_leadership_and_loses_nothing(
        tmp_path: Path, zookeeper) -> None:  # type: ignore[no-untyped-def]
    with _cluster_with_a_disk(tmp_path, zookeeper.connect) as (cluster, faults, healthy, disk):
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


def describe_log_dirs(bootstrap: str) -> dict[str, Any]:
    answer = wire.request(bootstrap, ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})
    return {r.log_dir: r for r in answer.results}


def test_a_dir_that_failed_while_its_broker_was_down_starts_offline(
        tmp_path: Path, zookeeper) -> None:  # type: ignore[no-untyped-def]
    """Broker 1 is killed, and its disk fails (read-only) while it is down. It starts all the
    same, with that dir offline (Kafka's LogManager: a dir it cannot lock or load), serves its
    other dir, and lists its replica there offline from its first registration, so the
    controller keeps it out of that partition's ISR; DescribeLogDirs and kafka-log-dirs show
    the dir offline. Repaired and restarted, the replica comes back."""
    with _cluster_with_a_disk(tmp_path, zookeeper.connect) as (cluster, faults, healthy, disk):
        dirs = {"log.dirs": f"{healthy},{disk}"}
        producer = AckedProducer(cluster.bootstrap(), "ondisk", rate=200).start()
        try:
            producer.wait_acked(100)
            cluster.kill(1)
            faults.fail_disk(1, "d1")
            cluster.wait_until(lambda: cluster.leader("ondisk", 0) in (2, 3), 30,
                               "leadership of ondisk-0 to move off broker 1")
            one = cluster.broker(1, **dirs).start(60)
            assert any("Failed to create or validate data directory" in ln
                       and str(disk) in ln for ln in one.stderr_lines), \
                "".join(one.stderr_lines[-20:])
            cluster.wait_isr("steady", 0, {1, 2, 3}, timeout=60)  # its healthy dir
            cluster.wait_until(lambda: offline_replicas(cluster, "ondisk") == [1], 30,
                               "Metadata to list broker 1's replica of ondisk-0 offline")
            assert set(cluster.state("ondisk", 0)["isr"]) <= {2, 3}
            # The controller logs it after its writes, a moment after Metadata shows it.
            cluster.wait_until(lambda: any(
                "replica(s) in failed log dirs" in ln and "ondisk" in ln
                for n in (1, 2, 3) for ln in cluster.brokers[n].stderr_lines), 30,
                "the controller to log broker 1's offline replica of ondisk-0")
            described = describe_log_dirs(one.bootstrap)
            assert described[str(disk)].error_code == STORAGE
            assert described[str(healthy)].error_code == 0
            printed = subprocess.run(
                [sys.executable, "-m", "pybroker.tools.log_dirs", "--bootstrap-server",
                 one.bootstrap, "--describe", "--broker-list", "1"],
                capture_output=True, text=True, timeout=60, cwd=ROOT)
            assert printed.returncode == 0, printed.stderr
            shown = {d["logDir"]: d for d in json.loads(
                printed.stdout.splitlines()[2])["brokers"][0]["logDirs"]}
            assert shown[str(disk)]["error"] == "KAFKA_STORAGE_ERROR"
            assert [p["partition"] for p in shown[str(healthy)]["partitions"]
                    if p["partition"].startswith("steady")] == ["steady-0"]
            before = producer.acked_count()
            producer.wait_acked(before + 200, timeout=60)
        finally:
            history = producer.stop()
        read_all(cluster.bootstrap(), "ondisk", history, 1)
        assert not check(history)

        cluster.stop(1)
        faults.repair_disk(1, "d1")
        cluster.broker(1, **dirs).start(60)
        cluster.wait_isr("ondisk", 0, {1, 2, 3}, timeout=60)
        assert describe_log_dirs(cluster.brokers[1].bootstrap)[str(disk)].error_code == 0
