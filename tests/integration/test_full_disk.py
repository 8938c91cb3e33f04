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
# node's worker K keeps its dirs at `<dir>-K`, beside the mount point, not on the disk.
ONE_BROKER = {"num.cores": "1"}


def value(i: int) -> bytes:
    return (b"%06d" % i) * (VALUE // 6)


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
            consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                                     consumer_timeout_ms=10_000)
            try:
                tp = TopicPartition("full", 1)
                consumer.assign([tp])
                consumer.seek_to_beginning(tp)
                read = {m.offset: m.value for m in consumer}
            finally:
                consumer.close()
            assert read == acked
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
