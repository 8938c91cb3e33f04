"""A full disk is an error, never corruption (#32 item 2): a broker subprocess with one of its
log dirs on a tmpfs of a few MB, kafka-python producing to a partition there until the disk
is full. The producer gets KAFKA_STORAGE_ERROR; every segment file on the disk holds whole,
CRC-valid batches and nothing after them; with space freed and the broker restarted, every
acknowledged record reads back intact, at its offset."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError, KafkaStorageError

from protocol.records.batch import walk_batches
from pybroker.testing import BrokerProcess
from pybroker.testing.disk_faults import MountedDisk, available

VALUE = 2000
# One broker process: these tests put a log dir on a small disk of its own (a mount), and a
# node's worker K keeps its dirs at `<dir>-K`, beside the mount point, not on the disk. The
# node's own test is the last.
ONE_BROKER = {"num.cores": "1"}


def value(i: int) -> bytes:
    return (b"%06d" % i) * (VALUE // 6)


def read_back(bootstrap: str, topic: str, partition: int) -> dict[int, bytes]:
    """Every record of the partition, by offset."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=10_000)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        return {m.offset: m.value for m in consumer}
    finally:
        consumer.close()


def test_producing_until_the_disk_is_full(tmp_path: Path) -> None:
    why = available("tmpfs")
    if why:
        pytest.skip(why)
    healthy = tmp_path / "healthy"
    with MountedDisk.tmpfs(3) as disk:
        dirs = f"{healthy},{disk.path}"
        broker = BrokerProcess(healthy, **ONE_BROKER,
                               **{"log.dirs": dirs, "log.segment.bytes": "524288"})
        broker.start(60)
        try:
            admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
            try:  # partition 0 in the first dir, partition 1 on the small disk
                admin.create_topics([NewTopic("full", 2, 1)])
            finally:
                admin.close()
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                                     retries=0, linger_ms=0, max_in_flight_requests_per_connection=1)
            acked: dict[int, bytes] = {}
            failure: KafkaError | None = None
            try:
                for i in range(10_000):
                    try:
                        meta = producer.send("full", value(i), partition=1).get(timeout=30)
                    except KafkaError as exc:
                        failure = exc
                        break
                    acked[meta.offset] = value(i)
                # The partition stays offline; the one in the healthy dir is served.
                with pytest.raises(KafkaStorageError):
                    producer.send("full", b"after", partition=1).get(timeout=30)
                producer.send("full", b"elsewhere", partition=0).get(timeout=30)
            finally:
                producer.close()
            assert isinstance(failure, KafkaStorageError), failure
            assert 500 < len(acked) and sorted(acked) == list(range(len(acked)))
            assert broker.stop() == 0
        finally:
            broker.kill()
        stderr = "".join(broker.stderr_lines)
        assert f"log dir {disk.path} failed" in stderr and "No space left" in stderr

        # The files: whole batches only, the offsets contiguous from 0 up to what was acked.
        segments = sorted((disk.path / "full-1").glob("*.log"))
        assert len(segments) >= 2, segments
        next_offset = 0
        for segment in segments:
            data = segment.read_bytes()
            batches, valid, reason = walk_batches(data)
            assert reason is None and valid == len(data), (segment.name, reason)
            assert int(segment.stem) == next_offset
            for _, header in batches:
                assert header.base_offset == next_offset
                next_offset = header.base_offset + header.last_offset_delta + 1
        assert next_offset == len(acked)
        assert not (disk.path / ".kafka_cleanshutdown").exists()

        subprocess.run(["mount", "-o", "remount,size=16m", str(disk.path)], check=True)
        broker = BrokerProcess(healthy, port=broker.port, **ONE_BROKER,
                               **{"log.dirs": dirs, "log.segment.bytes": "524288"})
        broker.start(60)
        try:
            assert read_back(broker.bootstrap, "full", 1) == acked
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
            try:
                assert producer.send("full", b"again", partition=1).get(timeout=30).offset == \
                    len(acked)
            finally:
                producer.close()
            assert broker.stop() == 0
        finally:
            broker.kill()


def test_a_broker_whose_every_log_dir_failed_stops_naming_them(tmp_path: Path) -> None:
    """Both log dirs fail (ext4 taken read-only by the kernel): the first failure takes its
    dir offline and the broker serves on; the second leaves none, and the broker stops with
    exit code 1 and Kafka's line naming both."""
    why = available("ext4")
    if why:
        pytest.skip(why)
    with MountedDisk.ext4(16) as first, MountedDisk.ext4(16) as second:
        broker = BrokerProcess(first.path, **ONE_BROKER,
                               **{"log.dirs": f"{first.path},{second.path}"})
        broker.start(60)
        try:
            admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
            try:  # partition 0 in the first dir, 1 in the second
                admin.create_topics([NewTopic("t", 2, 1)])
            finally:
                admin.close()
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                                     retries=0)
            try:
                for p in (0, 1):
                    producer.send("t", b"v", partition=p).get(timeout=30)
                second.fail()
                with pytest.raises(KafkaStorageError):
                    producer.send("t", b"v", partition=1).get(timeout=30)
                producer.send("t", b"v", partition=0).get(timeout=30)
                assert broker.proc is not None and broker.proc.poll() is None
                first.fail()
                with pytest.raises(KafkaError):
                    producer.send("t", b"v", partition=0).get(timeout=30)
            finally:
                producer.close(timeout=5)
            assert broker.wait(30) == 1  # its stderr read to the end
        finally:
            broker.kill()
        critical = [ln for ln in broker.stderr_lines if "CRITICAL" in ln]
        assert len(critical) == 1, broker.stderr_lines[-10:]
        assert "Shutdown broker because all log dirs in" in critical[0]
        assert str(first.path) in critical[0] and str(second.path) in critical[0]


def test_fill_disk_verb_on_ext4(tmp_path: Path) -> None:
    """The kit's `fill_disk` on an ext4 disk (delayed allocation: the filler is synced so the
    space is really gone): the broker's next write there fails, its dir goes offline, and it
    stays offline when space comes back until a restart, as in Kafka."""
    from pybroker.testing.disk_faults import DiskFaults

    why = available("ext4")
    if why:
        pytest.skip(why)
    healthy = tmp_path / "healthy"
    with DiskFaults() as faults:
        disk = faults.mount(0, "data", size_mb=16)
        dirs = f"{healthy},{disk}"
        broker = BrokerProcess(healthy, **ONE_BROKER, **{"log.dirs": dirs})
        broker.start(60)
        try:
            admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
            try:
                admin.create_topics([NewTopic("f", 2, 1)])  # f-1 on the disk
            finally:
                admin.close()
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                                     retries=0)
            try:
                first = producer.send("f", b"before", partition=1).get(timeout=30)
                assert faults.fill_disk(0, "data") > 0
                with pytest.raises(KafkaStorageError):
                    for _ in range(200):  # the segment's last block may take a few
                        producer.send("f", b"x" * 4096, partition=1).get(timeout=30)
                faults.free_disk(0, "data")
                with pytest.raises(KafkaStorageError):
                    producer.send("f", b"still offline", partition=1).get(timeout=30)
            finally:
                producer.close(timeout=5)
            assert broker.stop() == 0
        finally:
            broker.kill()
        broker = BrokerProcess(healthy, port=broker.port, **ONE_BROKER, **{"log.dirs": dirs})
        broker.start(60)
        try:
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
            try:
                assert producer.send("f", b"after", partition=1).get(timeout=30).offset > \
                    first.offset
            finally:
                producer.close(timeout=5)
            assert broker.stop() == 0
        finally:
            broker.kill()


def test_a_node_whose_worker_filled_its_only_disk_stops_rather_than_restart_it(
        tmp_path: Path) -> None:
    """A node of two brokers (num.cores=2) whose worker 1 has its one log dir on a small disk
    of its own (`<dir>-1` a link to a tmpfs), filled by a producer of a partition there:
    worker 1 stops with Kafka's one CRITICAL line, as a single broker does, and the node,
    rather than restart it onto the same full disk, stops (exit 1) with one line naming the
    worker, its dir and the reason; worker 0 hands over and shuts down cleanly. With space
    freed, the node's restart reads back every acknowledged record at its offset."""
    why = available("tmpfs")
    if why:
        pytest.skip(why)
    logs = tmp_path / "logs"
    node = {"num.cores": "2", "log.dirs": str(logs), "log.segment.bytes": "524288"}
    with MountedDisk.tmpfs(3) as disk:
        worker_dir = tmp_path / "logs-1"  # worker 1's copy of log.dirs (pybroker.node.worker)
        worker_dir.symlink_to(disk.path)
        broker = BrokerProcess(logs, **node).start(120)
        try:
            admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
            try:  # on worker 1 (broker 1000) alone
                admin.create_topics([NewTopic("full", replica_assignments={0: [1000]})])
            finally:
                admin.close()
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                                     retries=0, linger_ms=0,
                                     max_in_flight_requests_per_connection=1)
            acked: dict[int, bytes] = {}
            try:
                for i in range(10_000):
                    try:
                        meta = producer.send("full", value(i), partition=0).get(timeout=30)
                    except KafkaError:  # the disk filled: worker 1 is gone with the request
                        break
                    acked[meta.offset] = value(i)
            finally:
                producer.close(timeout=5)
            assert 500 < len(acked) and sorted(acked) == list(range(len(acked)))
            assert broker.wait(90) == 1
        finally:
            broker.kill()
        lines = broker.stderr_lines
        critical = [ln for ln in lines if "CRITICAL" in ln]
        assert len(critical) == 1, lines[-20:]
        assert f"Shutdown broker because all log dirs in {worker_dir} have failed" \
            in critical[0]
        # The supervisor's errors (its logger's): the one line.
        errors = [ln for ln in lines if " ERROR " in ln and ln.rstrip().endswith(
            "(pybroker.node)")]
        assert len(errors) == 1 and (
            f"stopping the node: worker 1 (broker 1000) stopped because every one of its log "
            f"dirs failed ({worker_dir}); a restart would meet the same failed disks"
            in errors[0]), errors
        assert len([ln for ln in lines if "worker 1 (broker 1000) started" in ln]) == 1
        assert any("pybroker node 0 shut down cleanly" in ln for ln in lines)
        assert (logs / ".kafka_cleanshutdown").exists()
        assert not (disk.path / ".kafka_cleanshutdown").exists()

        subprocess.run(["mount", "-o", "remount,size=16m", str(disk.path)], check=True)
        broker = BrokerProcess(logs, **node).start(120)
        try:
            assert read_back(broker.bootstrap, "full", 0) == acked
            assert broker.stop() == 0
        finally:
            broker.kill()


def test_a_node_whose_worker_restarts_onto_a_failed_disk_stops_rather_than_retry(
        tmp_path: Path) -> None:
    """Worker 1 of a node (its one log dir on an ext4 disk of its own) is killed, and its disk
    fails while it is down (the kernel takes it read-only). The supervisor restarts it, as
    any crashed worker, and the start finds no usable log dir (`Shutdown broker because none
    of the specified log dirs can be created or validated`): the node stops then (exit 1)
    instead of restarting it again onto the same disk, worker 0 stopping cleanly."""
    import os
    import signal

    why = available("ext4")
    if why:
        pytest.skip(why)
    logs = tmp_path / "logs"
    with MountedDisk.ext4(16) as disk:
        worker_dir = tmp_path / "logs-1"  # worker 1's copy of log.dirs (pybroker.node.worker)
        worker_dir.symlink_to(disk.path)
        broker = BrokerProcess(logs, **{"num.cores": "2", "log.dirs": str(logs)}).start(120)
        try:
            worker = broker.worker_pids()[1]
            os.kill(worker, signal.SIGSTOP)  # no write of its own meets the failure first
            disk.fail()
            os.kill(worker, signal.SIGKILL)
            assert broker.wait(90) == 1
        finally:
            broker.kill()
    lines = broker.stderr_lines
    assert len([ln for ln in lines if "worker 1 (broker 1000) started" in ln]) == 2
    assert any("worker 1 (broker 1000) died (killed by SIGKILL); restarting it" in ln
               for ln in lines)
    assert any(ln.startswith("pybroker-server: ") and "Shutdown broker because none of the "
               "specified log dirs can be created or validated" in ln for ln in lines), \
        "".join(lines[-20:])
    stopping = [ln for ln in lines if "stopping the node" in ln]
    assert len(stopping) == 1 and (
        f"stopping the node: worker 1 (broker 1000) stopped because every one of its log dirs "
        f"failed ({worker_dir}); a restart would meet the same failed disks" in stopping[0]), \
        stopping
    assert any("pybroker node 0 shut down cleanly" in ln for ln in lines)
