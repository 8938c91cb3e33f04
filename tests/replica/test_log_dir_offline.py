"""A broker with two log dirs, one on an ext4 file system the kernel takes read-only (as on a
disk error): that dir's partitions answer KAFKA_STORAGE_ERROR, the other dir's go on serving,
DescribeLogDirs and kafka-log-dirs show the dir offline, and a restart with the disk repaired
brings it back with everything written before the failure."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from compat import wire
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.records.record import Record, build_batch
from pybroker.testing import broker_in_thread
from pybroker.testing.disk_faults import MountedDisk
from pybroker.tools import log_dirs

STORAGE = int(ErrorCode.KAFKA_STORAGE_ERROR)


def produce(bootstrap: str, topic: str, partition: int, value: bytes) -> int:
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
        {"name": topic, "partition_data": [
            {"index": partition, "records": build_batch([Record(None, value)])}]}]}
    answer = wire.request(bootstrap, ApiKey.PRODUCE, 9, body)
    return int(answer.responses[0].partition_responses[0].error_code)


def fetch_error(bootstrap: str, topic: str, partition: int) -> int:
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "topics": [{"topic": topic, "partitions": [
                {"partition": partition, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}
    return int(wire.request(bootstrap, ApiKey.FETCH, 12, body).responses[0].partitions[0]
               .error_code)


def list_offsets_error(bootstrap: str, topic: str, partition: int) -> int:
    body = {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "timestamp": -1}]}]}
    return int(wire.request(bootstrap, ApiKey.LIST_OFFSETS, 7, body).topics[0].partitions[0]
               .error_code)


def describe_log_dirs(bootstrap: str) -> dict[str, Any]:
    answer = wire.request(bootstrap, ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})
    return {r.log_dir: r for r in answer.results}


def values(bootstrap: str, topic: str, partition: int) -> list[bytes]:
    return [r.value for _, records in wire.batches(bootstrap, topic, partition)
            for r in records]


def test_one_failed_dir_goes_offline_and_the_broker_serves_the_other(
        tmp_path: Path, ext4_disk: MountedDisk, tool: Any) -> None:  # tool: tests/conftest.py
    healthy = tmp_path / "healthy"
    dirs = f"{healthy},{ext4_disk.path}"
    with broker_in_thread(healthy, log_dirs=dirs) as info:
        bootstrap = info.bootstrap
        wire.create_topic(bootstrap, "t", partitions=2)
        # New logs go to the least-loaded dir, in order: t-0 healthy, t-1 on the disk.
        assert (ext4_disk.path / "t-1").is_dir() and (healthy / "t-0").is_dir()
        for i in range(3):
            assert produce(bootstrap, "t", 0, b"a%d" % i) == 0
            assert produce(bootstrap, "t", 1, b"b%d" % i) == 0
        os.sync()  # what the test checks after the repair is on the disk, not only cached
        ext4_disk.fail()
        assert produce(bootstrap, "t", 1, b"lost") == STORAGE
        assert produce(bootstrap, "t", 1, b"lost") == STORAGE  # the dir stays offline
        assert fetch_error(bootstrap, "t", 1) == STORAGE
        assert list_offsets_error(bootstrap, "t", 1) == STORAGE
        assert produce(bootstrap, "t", 0, b"a3") == 0
        assert values(bootstrap, "t", 0) == [b"a0", b"a1", b"a2", b"a3"]
        described = describe_log_dirs(bootstrap)
        down, up = described[str(ext4_disk.path)], described[str(healthy)]
        assert (down.error_code, down.topics, down.total_bytes, down.usable_bytes) == \
            (STORAGE, [], -1, -1)
        assert up.error_code == 0 and up.total_bytes > 0
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in up.topics
                if t.name == "t"] == [("t", [0])]
        printed = tool(log_dirs.main, "--bootstrap-server", bootstrap, "--describe",
                       "--topic-list", "t")
        assert printed.rc == 0, printed.err
        shown = {d["logDir"]: d for d in
                 json.loads(printed.out.splitlines()[2])["brokers"][0]["logDirs"]}
        assert shown[str(ext4_disk.path)]["error"] == "KAFKA_STORAGE_ERROR"
        assert shown[str(ext4_disk.path)]["partitions"] == []
        assert shown[str(healthy)]["error"] is None
    assert not (ext4_disk.path / ".kafka_cleanshutdown").exists()

    ext4_disk.repair()
    with broker_in_thread(healthy, log_dirs=dirs) as info:
        assert describe_log_dirs(info.bootstrap)[str(ext4_disk.path)].error_code == 0
        assert values(info.bootstrap, "t", 1) == [b"b0", b"b1", b"b2"]
        assert values(info.bootstrap, "t", 0) == [b"a0", b"a1", b"a2", b"a3"]
        assert produce(info.bootstrap, "t", 1, b"b3") == 0


def test_a_cleaning_that_fails_takes_the_dir_offline(tmp_path: Path,
                                                     ext4_disk: MountedDisk) -> None:
    """The log cleaner writes cleaned segments in the log's dir, in a worker thread: an
    OSError there takes the dir offline too (Kafka's cleaner reports to the same channel)."""
    import trio

    from pybroker.server import serve
    from pybroker.testing import broker_config

    healthy = tmp_path / "healthy"
    config = broker_config(healthy, log_dirs=f"{healthy},{ext4_disk.path}",
                           log_cleaner_backoff_ms="3600000")  # only the pass run below

    def write(bootstrap: str) -> None:
        wire.create_topic(bootstrap, "kept", partitions=2, configs={
            "cleanup.policy": "compact", "segment.bytes": "2048",
            "min.cleanable.dirty.ratio": "0.01"})
        for i in range(40):  # several segments of the same five keys
            wire.produce(bootstrap, "kept", 1, [Record(b"k%d" % (i % 5), b"v" * 200)])

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            info = await nursery.start(serve, config)
            await trio.to_thread.run_sync(write, info.bootstrap)
            assert info.broker.logs.log_dir_of("kept", 1) == ext4_disk.path
            ext4_disk.fail()
            assert await info.broker.log_jobs.clean_logs() == 0
            assert info.broker.logs.offline_dirs.keys() == {ext4_disk.path}
            assert await trio.to_thread.run_sync(produce, info.bootstrap, "kept", 1,
                                                 b"x") == STORAGE
            nursery.cancel_scope.cancel()

    trio.run(main)
