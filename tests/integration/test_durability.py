"""Durability against a broker in a subprocess (issue #3): restarts, kill -9, damaged files,
retention.

Every test runs `python -m pybroker` through `tests.helpers.BrokerProcess`, so that it can be
stopped with SIGTERM or killed with SIGKILL and started again on the same log dir (and port).
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import BrokerProcess
from tests.integration.durability_kit import (
    CLEAN_SHUTDOWN_MARKER, _producer, consume, numbered, produce,
)

# -- helpers -------------------------------------------------------------------------------------

def watermarks(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """(log start offset, high watermark), by ListOffsets earliest/latest."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "durability-wm"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        consumer.close()


def segment_files(partition_dir: Path, suffix: str = ".log") -> list[Path]:
    return sorted(p for p in partition_dir.iterdir() if p.name.endswith(suffix))


def _stop_cleanly(bp: BrokerProcess) -> None:
    t0 = time.monotonic()
    rc = bp.stop()
    took = time.monotonic() - t0
    assert rc == 0, "".join(bp.stderr_lines)
    assert took < 5, f"clean shutdown took {took:.1f}s:\n" + "".join(bp.stderr_lines[-60:])


# -- restart -------------------------------------------------------------------------------------

def test_restart_keeps_data(brokers, log_dir: Path) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import Consumer, TopicPartition

    bp = brokers(log_dir)
    first = numbered("before", 300)
    assert produce(bp.bootstrap, "restart", first) == list(range(300))
    # A consumer at the end of the log keeps a long-polling Fetch open during the shutdown.
    tail = Consumer({"bootstrap.servers": bp.bootstrap, "group.id": "durability-tail",
                     "enable.auto.commit": False, "fetch.wait.max.ms": 5000})
    tail.assign([TopicPartition("restart", 0, 300)])
    tail.poll(1.0)
    try:
        _stop_cleanly(bp)
    finally:
        tail.close()
    assert (log_dir / CLEAN_SHUTDOWN_MARKER).exists()
    stderr = "".join(bp.stderr_lines)
    assert "shut down cleanly" in stderr
    assert "Traceback" not in stderr

    bp = brokers(log_dir)
    assert not (log_dir / CLEAN_SHUTDOWN_MARKER).exists()  # removed while running
    assert watermarks(bp.bootstrap, "restart") == (0, 300)
    assert consume(bp.bootstrap, "restart") == list(enumerate(first))
    second = numbered("after", 50)
    assert produce(bp.bootstrap, "restart", second) == list(range(300, 350))
    _stop_cleanly(bp)

    bp = brokers(log_dir)
    assert consume(bp.bootstrap, "restart") == list(enumerate(first + second))
    _stop_cleanly(bp)
    stderr = "".join(bp.stderr_lines)
    assert "no clean shutdown marker" not in stderr  # no recovery after a clean stop


def test_kill_9_then_acked_records_readable_without_new_writes(brokers,  # type: ignore[no-untyped-def]
                                                              log_dir: Path) -> None:
    """After an unclean restart the high watermark is the log end at once: a stale
    replication-offset-checkpoint must not hide acknowledged records until the next write."""
    bp = brokers(log_dir)
    values = numbered("acked", 200)
    assert produce(bp.bootstrap, "visible", values) == list(range(200))
    bp.kill()
    assert not (log_dir / CLEAN_SHUTDOWN_MARKER).exists()
    bp = brokers(log_dir)
    assert watermarks(bp.bootstrap, "visible") == (0, 200)
    assert consume(bp.bootstrap, "visible") == list(enumerate(values))
    _stop_cleanly(bp)


# -- kill -9 during acks=all production ----------------------------------------------------------

class ConfluentStream:
    """Produces numbered records from a thread; delivery callbacks record what was acked."""

    name = "confluent-kafka"

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer = _producer(bootstrap, **{"message.timeout.ms": 60000,
                                                "retry.backoff.ms": 50,
                                                "reconnect.backoff.ms": 50,
                                                "reconnect.backoff.max.ms": 200})
        self.topic = topic
        self.acked: dict[int, bytes] = {}
        self.failed = 0
        self.sent = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            self.acked[msg.offset()] = msg.value()
        else:
            self.failed += 1

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.producer.produce(self.topic, value=f"rec-{self.sent:07d}".encode(),
                                      partition=0, on_delivery=self._on_delivery)
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(0.001)

    def start(self) -> None:
        self.thread.start()

    def finish(self) -> None:
        self.stopping.set()
        self.thread.join(10)
        self.producer.flush(60)


class KafkaPythonStream(ConfluentStream):
    name = "kafka-python"

    def __init__(self, bootstrap: str, topic: str) -> None:
        from kafka import KafkaProducer

        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=100,
                                      retry_backoff_ms=50, reconnect_backoff_ms=50,
                                      reconnect_backoff_max_ms=200, linger_ms=0,
                                      request_timeout_ms=5000, delivery_timeout_ms=60000,
                                      max_in_flight_requests_per_connection=1)
        self.topic = topic
        self.acked = {}
        self.failed = 0
        self.sent = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stopping.is_set():
            value = f"rec-{self.sent:07d}".encode()
            future = self.producer.send(self.topic, value=value, partition=0)
            future.add_callback(lambda md, v=value: self.acked.__setitem__(md.offset, v))
            future.add_errback(lambda exc: setattr(self, "failed", self.failed + 1))
            self.sent += 1
            if self.sent % 50 == 0:
                time.sleep(0.005)

    def finish(self) -> None:
        self.stopping.set()
        self.thread.join(10)
        self.producer.flush(60)
        self.producer.close(5)


# Small segments and frequent checkpoints: the kill lands after several rolls, with a
# recovery point checkpointed mid-stream, so recovery starts inside the segment list.
SMALL_SEGMENTS = {"log_segment_bytes": "16384",
                  "log_flush_offset_checkpoint_interval_ms": "100"}


@pytest.mark.parametrize("stream_class,overrides", [
    (ConfluentStream, {}),
    (ConfluentStream, SMALL_SEGMENTS),
    (KafkaPythonStream, SMALL_SEGMENTS),
], ids=["confluent-kafka", "confluent-kafka-small-segments", "kafka-python-small-segments"])
def test_kill_9_loses_no_acknowledged_record(brokers, log_dir: Path,  # type: ignore[no-untyped-def]
                                             stream_class, overrides: dict) -> None:
    topic = "crash"
    bp = brokers(log_dir, **overrides)
    produce(bp.bootstrap, topic, [b"warm-up"])  # create the topic before the stream starts
    port = bp.port
    stream = stream_class(bp.bootstrap, topic)
    stream.start()
    try:
        deadline = time.monotonic() + 20
        while len(stream.acked) < 500 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(stream.acked) >= 500, f"only {len(stream.acked)} acked before the kill"
        bp.kill()
        acked_at_kill = len(stream.acked)
        time.sleep(0.3)
        bp = brokers(log_dir, port=port, **overrides)
        deadline = time.monotonic() + 30
        while len(stream.acked) < acked_at_kill + 300 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(stream.acked) >= acked_at_kill + 300, "production did not resume"
    finally:
        stream.finish()
    stderr = "".join(bp.stderr_lines)
    assert "no clean shutdown marker" in stderr  # the restart recovered the logs

    acked = dict(stream.acked)
    stored = dict(consume(bp.bootstrap, topic, timeout=60))
    assert stored.get(0) == b"warm-up"
    missing = {o: v for o, v in acked.items() if stored.get(o) != v}
    assert not missing, (f"{len(missing)} of {len(acked)} acknowledged records lost or changed, "
                         f"e.g. {sorted(missing.items())[:5]}")
    assert sorted(stored) == list(range(len(stored)))  # offsets are contiguous
    if overrides:
        assert len(segment_files(bp.partition_dir(f"{topic}-0"))) > 2
    _stop_cleanly(bp)


# -- damaged files -------------------------------------------------------------------------------

def _damage_setup(brokers, log_dir: Path, topic: str):  # type: ignore[no-untyped-def]
    """A partition with 100 records; the last one alone in the final batch."""
    bp = brokers(log_dir)
    values = numbered("v", 100)
    assert produce(bp.bootstrap, topic, values[:99]) == list(range(99))
    assert produce(bp.bootstrap, topic, values[99:]) == [99]
    return bp, values


def _stop(bp: BrokerProcess, how: str) -> None:
    if how == "sigterm":
        _stop_cleanly(bp)
    else:
        bp.kill()


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_garbage_after_the_last_batch_is_truncated(brokers, log_dir: Path,  # type: ignore[no-untyped-def]
                                                   how: str) -> None:
    topic = "garbage"
    bp, values = _damage_setup(brokers, log_dir, topic)
    _stop(bp, how)
    newest = segment_files(bp.partition_dir(f"{topic}-0"))[-1]
    good_size = newest.stat().st_size
    with open(newest, "ab") as f:
        f.write(os.urandom(3000))

    bp = brokers(log_dir)
    stderr = "".join(bp.stderr_lines)
    assert newest.name in stderr and "truncated" in stderr, stderr
    assert newest.stat().st_size == good_size
    assert watermarks(bp.bootstrap, topic) == (0, 100)
    more = numbered("more", 20)
    assert produce(bp.bootstrap, topic, more) == list(range(100, 120))
    assert consume(bp.bootstrap, topic) == list(enumerate(values + more))
    _stop_cleanly(bp)


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_torn_final_batch_is_truncated(brokers, log_dir: Path,  # type: ignore[no-untyped-def]
                                       how: str) -> None:
    topic = "torn"
    bp, values = _damage_setup(brokers, log_dir, topic)
    _stop(bp, how)
    newest = segment_files(bp.partition_dir(f"{topic}-0"))[-1]
    size = newest.stat().st_size
    os.truncate(newest, size - 7)  # cut the final batch (record 99) in the middle

    bp = brokers(log_dir)
    stderr = "".join(bp.stderr_lines)
    assert newest.name in stderr and "truncated" in stderr, stderr
    assert watermarks(bp.bootstrap, topic) == (0, 99)
    more = numbered("more", 20)
    assert produce(bp.bootstrap, topic, more) == list(range(99, 119))
    assert consume(bp.bootstrap, topic) == list(enumerate(values[:99] + more))
    _stop_cleanly(bp)


def test_deleted_index_files_are_rebuilt(brokers, log_dir: Path) -> None:  # type: ignore[no-untyped-def]
    topic = "reindex"
    overrides = {"log_segment_bytes": "4096", "log_index_interval_bytes": "256"}
    bp = brokers(log_dir, **overrides)
    values = numbered("x" * 40, 300)
    offsets = []
    for i in range(0, 300, 10):  # small batches: many index entries, several segments
        offsets += produce(bp.bootstrap, topic, values[i:i + 10])
    assert offsets == list(range(300))
    _stop_cleanly(bp)
    pdir = bp.partition_dir(f"{topic}-0")
    assert len(segment_files(pdir)) >= 3
    originals = {p.name: p.read_bytes() for p in segment_files(pdir, ".index")[:-1]}
    for suffix in (".index", ".timeindex"):
        for path in segment_files(pdir, suffix):
            path.unlink()

    bp = brokers(log_dir, **overrides)
    for log_file in segment_files(pdir):
        # A segment no larger than the index interval can hold no entry: like a new
        # segment's, its index files come with its first entry (AbstractIndex.mark_new).
        if log_file.stat().st_size > int(overrides["log_index_interval_bytes"]):
            assert log_file.with_suffix(".index").exists(), log_file.name
            assert log_file.with_suffix(".timeindex").exists(), log_file.name
    for name, content in originals.items():  # rolled segments: the same entries again
        assert (pdir / name).read_bytes() == content, name
    for start in (0, 1, 137, 250, 299):  # reads that go through the index
        assert consume(bp.bootstrap, topic, start=start, until=start + 1) == \
            [(start, values[start])]
    assert consume(bp.bootstrap, topic) == list(enumerate(values))
    _stop_cleanly(bp)


# -- retention -----------------------------------------------------------------------------------

def _create_topic(bootstrap: str, name: str, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, 1, 1, config=configs)], operation_timeout=10)
    futures[name].result(15)


def _alter_topic(bootstrap: str, name: str, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import (
        AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(15)


def _wait_for_log_start(bootstrap: str, topic: str, minimum: int, timeout: float = 15) -> int:
    deadline = time.monotonic() + timeout
    low = 0
    while time.monotonic() < deadline:
        low, _ = watermarks(bootstrap, topic)
        if low >= minimum:
            return low
        time.sleep(0.2)
    raise AssertionError(f"log start offset of {topic} stayed at {low}")


def _produce_in_batches(bootstrap: str, topic: str, values: list[bytes], *,
                        timestamp: int = 0, size: int = 10) -> list[int]:
    offsets = []
    for i in range(0, len(values), size):
        offsets += produce(bootstrap, topic, values[i:i + size], timestamp=timestamp)
    return offsets


def test_retention_deletes_old_segments(brokers, log_dir: Path) -> None:  # type: ignore[no-untyped-def]
    bp = brokers(log_dir, log_retention_check_interval_ms="200")
    segment = {"segment.bytes": "2048"}
    _create_topic(bp.bootstrap, "by-time", {**segment, "retention.ms": "60000"})
    # by-size's files go at once; by-time's wait, renamed `.deleted`, for Kafka's default
    # file.delete.delay.ms (a minute), so a reader holding them open can finish.
    _create_topic(bp.bootstrap, "by-size", {**segment, "retention.bytes": "6000",
                                            "file.delete.delay.ms": "0"})

    # by time: records stamped an hour ago, then fresh ones; the old segments must go.
    hour_ago = int(time.time() * 1000) - 3600_000
    old = numbered("old" + "o" * 80, 100)
    fresh = numbered("new" + "n" * 80, 40)
    assert _produce_in_batches(bp.bootstrap, "by-time", old, timestamp=hour_ago) == \
        list(range(100))
    assert _produce_in_batches(bp.bootstrap, "by-time", fresh) == list(range(100, 140))
    # by size: keep about 6000 bytes.
    sized = numbered("s" * 80, 200)
    assert _produce_in_batches(bp.bootstrap, "by-size", sized) == list(range(200))

    low_time = _wait_for_log_start(bp.bootstrap, "by-time", 1)
    low_size = _wait_for_log_start(bp.bootstrap, "by-size", 1)
    time.sleep(0.5)  # let retention settle, then read the final state
    low_time, high_time = watermarks(bp.bootstrap, "by-time")
    low_size, high_size = watermarks(bp.bootstrap, "by-size")
    assert high_time == 140 and high_size == 200
    assert 1 <= low_time <= 100  # nothing fresh deleted
    assert low_size >= 1

    def first_segment_files(topic: str) -> list[str]:
        return sorted(p.name for p in bp.partition_dir(f"{topic}-0").iterdir()
                      if p.name.startswith(f"{0:020d}."))

    for topic, low in (("by-time", low_time), ("by-size", low_size)):
        logs = segment_files(bp.partition_dir(f"{topic}-0"))
        assert int(logs[0].name.split(".")[0]) == low, logs  # oldest segments are gone
    # Renamed, not yet removed (an index file exists only once it has an entry).
    renamed = first_segment_files("by-time")
    assert f"{0:020d}.log.deleted" in renamed and f"{0:020d}.timeindex.deleted" in renamed
    assert all(name.endswith(".deleted") for name in renamed), renamed
    deadline = time.monotonic() + 10
    while first_segment_files("by-size") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not first_segment_files("by-size")
    by_size_bytes = sum(p.stat().st_size for p in segment_files(bp.partition_dir("by-size-0")))
    assert by_size_bytes <= 6000 + 2048

    # retention.bytes set later on a topic created without it (IncrementalAlterConfigs).
    altered = numbered("a" * 80, 100)
    assert _produce_in_batches(bp.bootstrap, "altered", altered) == list(range(100))
    assert watermarks(bp.bootstrap, "altered")[0] == 0
    _alter_topic(bp.bootstrap, "altered", {"segment.bytes": "2048", "retention.bytes": "3000"})
    more = numbered("b" * 80, 60)  # rolls into small segments under the new config
    assert _produce_in_batches(bp.bootstrap, "altered", more) == list(range(100, 160))
    low_altered = _wait_for_log_start(bp.bootstrap, "altered", 100)
    assert low_altered < 160

    # Reading below the log start: OFFSET_OUT_OF_RANGE, then the reset policy applies.
    assert consume(bp.bootstrap, "by-time", start=0, until=low_time + 1) == \
        [(low_time, (old + fresh)[low_time])]
    _check_kafka_python_reset(bp.bootstrap, "by-size", low_size, sized[low_size])
    _check_out_of_range_error(bp.bootstrap, "by-size")

    # The log start offset survives a restart.
    _stop_cleanly(bp)
    bp = brokers(log_dir, log_retention_check_interval_ms="200")
    assert watermarks(bp.bootstrap, "by-time") == (low_time, 140)
    assert watermarks(bp.bootstrap, "by-size")[0] >= low_size
    _stop_cleanly(bp)


def _check_kafka_python_reset(bootstrap: str, topic: str, low: int, value: bytes) -> None:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             consumer_timeout_ms=10000)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        first = next(iter(consumer))
        assert (first.offset, first.value) == (low, value)
    finally:
        consumer.close()


def _check_out_of_range_error(bootstrap: str, topic: str) -> None:
    """With auto.offset.reset=error the broker's OFFSET_OUT_OF_RANGE reaches the application."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "durability-oor",
                         "enable.auto.commit": False, "auto.offset.reset": "error"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is not None, f"read offset {msg.offset()} below the log start"
            if msg.error().code() == KafkaError._AUTO_OFFSET_RESET:
                assert "out of range" in msg.error().str().lower(), msg.error().str()
                return
        raise AssertionError("no offset-out-of-range error")
    finally:
        consumer.close()
