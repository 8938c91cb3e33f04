"""Kafka 4.1.1's kafka-log-dirs.sh against a pybroker whose second log dir failed (ext4 that
the kernel took read-only, `pybroker.testing.disk_faults`): Kafka's tool shows the dir with
its storage error and no partitions, and the healthy dir as usual."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from compat import kafka_tools, wire
from compat.apache_kafka import ApacheKafkaUnavailable
from protocol.errors import ErrorCode
from protocol.records.record import Record
from pybroker.testing import broker_in_thread
from pybroker.testing.disk_faults import MountedDisk, available


def test_kafka_log_dirs_shows_the_failed_dir(tmp_path: Path) -> None:
    why = available("ext4")
    if why:
        pytest.skip(why)
    try:
        kafka_tools.classpath()
    except ApacheKafkaUnavailable as exc:
        pytest.fail(f"Kafka's tools are unavailable: {exc}", pytrace=False)
    healthy = tmp_path / "healthy"
    with MountedDisk.ext4(16) as disk, \
            broker_in_thread(healthy, log_dirs=f"{healthy},{disk.path}") as info:
        wire.create_topic(info.bootstrap, "kt-offline", partitions=2)  # p1 on the disk
        wire.produce(info.bootstrap, "kt-offline", 1, [Record(None, b"v")])
        disk.fail()
        with pytest.raises(AssertionError, match=f"error {int(ErrorCode.KAFKA_STORAGE_ERROR)}"):
            wire.produce(info.bootstrap, "kt-offline", 1, [Record(None, b"v")])
        done = kafka_tools.run("kafka-log-dirs", ["--bootstrap-server", info.bootstrap,
                                                  "--describe", "--topic-list", "kt-offline"],
                               timeout=60)
        assert done.returncode == 0, done.stderr[-2000:]
        found = json.loads(done.stdout.strip().splitlines()[-1])
        (broker,) = found["brokers"]
        dirs = {d["logDir"]: d for d in broker["logDirs"]}
        assert dirs[str(disk.path)]["error"] == \
            "org.apache.kafka.common.errors.KafkaStorageException", dirs
        assert dirs[str(disk.path)]["partitions"] == []
        assert dirs[str(healthy)]["error"] is None
        assert [p["partition"] for p in dirs[str(healthy)]["partitions"]] == ["kt-offline-0"]
