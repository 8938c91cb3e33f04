"""kafka-python: KafkaProducer, KafkaConsumer, KafkaAdminClient."""
from __future__ import annotations

import time
import warnings
from typing import Any, Callable, NoReturn

from compat.base import (
    TIMEOUT_S, Adapter, GroupView, Got, Member, NotApplicable, ProduceFailed, Rec, Settings,
    ThreadMember, Txn, next_offsets,
)

# How long the scenarios give a new group member to join (they wait 60 s for its records).
JOIN_S = 60.0

# kafka-python 3.0.12 loads its schemas with deprecated importlib calls.
warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"kafka\..*")


def _read(consumer: Any, count: int) -> list[Got]:
    """Up to `count` records within TIMEOUT_S. Each poll may wait for the rest of it, as a
    poll returns with the first records: kafka-python 3.0.12 drops a join round that
    completes after a poll has given up on it when its metadata, not the coordinator, asked
    for the round (a topic's partitions learned after a first join that assigned nothing),
    and the member then reads nothing (tests/integration/test_groups.py
    `_first_consumed`; commit-resume lost its second read to it 2 times in 30 under load)."""
    got: list[Got] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < count and (left := deadline - time.monotonic()) > 0:
        for msgs in consumer.poll(timeout_ms=max(1, int(left * 1000)),
                                  max_records=count - len(got)).values():
            got += [Got(m.partition, m.offset, m.key, m.value, tuple(m.headers), m.timestamp)
                    for m in msgs]
    return got


def await_first_assignment(consumer: Any, deadline: float,
                           stopping: Callable[[], bool] = lambda: False) -> None:
    """Drive a subscribed kafka-python consumer's group join, without fetching, until it has
    partitions, `deadline` (time.monotonic()) passes or `stopping()`.

    kafka-python 3.0.12 joins before its topic's metadata is in, so a leader that joined
    first assigns nothing; the metadata then starts a second round, which it drops when that
    round completes after the poll waiting for it gave up: `need_rejoin()` is already False,
    so the assignment is never taken up, and the member, its heartbeat off, waits for the
    coordinator to expire it (tests/integration/test_groups.py `_first_consumed`). A poll
    for the rest of the deadline would wait that round out, but a poll ends only with
    records, which a member just assigned may not get for long, and its stop would be held.
    The coordinator's own poll awaits a due round whole and returns once the member is in
    the group (at once when no round is due), so `stopping` is looked at between rounds."""
    while not consumer.assignment() and not stopping() and \
            (left := deadline - time.monotonic()) > 0:
        consumer._coordinator.poll(timeout_ms=int(left * 1000))
        if not consumer.assignment():
            time.sleep(0.05)  # the IO thread takes in the metadata that starts the next round


NO_SHARE_CONSUMER = ("kafka-python {version} has no share consumer: its consumer is "
                     "KafkaConsumer alone, and it names the share-group APIs' keys "
                     "(kafka.protocol.api_key: ShareGroupHeartbeat, ShareFetch, "
                     "ShareAcknowledge) but defines none of their requests")


class KafkaPython(Adapter):
    name = "kafka-python"
    order = 20

    def versions(self) -> dict[str, str]:
        import kafka
        return {"kafka-python": kafka.__version__}

    def missing(self) -> str | None:
        try:
            import kafka  # noqa: F401
        except ImportError:
            return "kafka-python is not installed"
        return None

    def cannot(self, feature: str) -> str | None:
        if feature == "null-header-value":
            return "kafka-python's producer refuses a None header value"
        if feature.startswith("codec:"):
            codec = feature.split(":", 1)[1]
            from kafka import codec as kc
            has = {"gzip": kc.has_gzip, "snappy": kc.has_snappy, "lz4": kc.has_lz4,
                   "zstd": kc.has_zstd}[codec]
            if not has():
                library = {"snappy": "python-snappy", "lz4": "lz4",
                           "zstd": "zstandard"}.get(codec, codec)
                return (f"kafka-python needs the optional {library} library for {codec}, "
                        "which is not among the pinned test dependencies")
        return None

    # -- produce / consume ----------------------------------------------------------------------
    def produce(self, bootstrap: str, topic: str, recs: list[Rec], *, codec: str = "none",
                idempotent: bool = False, config: Settings = None) -> None:
        from kafka import KafkaProducer
        from kafka.errors import KafkaError
        settings: dict[str, Any] = {
            "bootstrap_servers": bootstrap, "linger_ms": 5, "request_timeout_ms": 10000,
            "compression_type": None if codec == "none" else codec}
        if idempotent:
            settings["enable_idempotence"] = True  # also its default, when the broker allows
        producer = KafkaProducer(**{**settings, **(config or {})})
        try:
            futures = [producer.send(topic, key=r.key, value=r.value, partition=r.partition,
                                     headers=list(r.headers), timestamp_ms=r.timestamp)
                       for r in recs]
            producer.flush(TIMEOUT_S)
            for fut in futures:
                try:
                    fut.get(TIMEOUT_S)
                except KafkaError as exc:
                    raise ProduceFailed(repr(exc)) from exc
        finally:
            producer.close(5)

    def produce_transactions(self, bootstrap: str, topic: str, txns: list[Txn],
                             transactional_id: str,
                             while_open: Callable[[int], None] | None = None) -> None:
        from kafka import KafkaProducer
        from kafka.errors import KafkaError
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5,
                                 request_timeout_ms=10000, transactional_id=transactional_id,
                                 enable_idempotence=True)
        try:
            producer.init_transactions()
            for i, txn in enumerate(txns):
                producer.begin_transaction()
                futures = [producer.send(topic, key=r.key, value=r.value, partition=r.partition,
                                         headers=list(r.headers)) for r in txn.recs]
                # Before an abort too: kafka-python drops the batches it has not sent yet
                # when a transaction aborts, and the broker would see nothing of it.
                producer.flush(TIMEOUT_S)
                for fut in futures:
                    try:
                        fut.get(TIMEOUT_S)
                    except KafkaError as exc:
                        raise ProduceFailed(repr(exc)) from exc
                if while_open is not None:
                    while_open(i)
                if txn.commit:
                    producer.commit_transaction()
                else:
                    producer.abort_transaction()
        finally:
            producer.close(5)

    def _consumer(self, bootstrap: str, **config: Any) -> Any:
        from kafka import KafkaConsumer
        return KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             fetch_max_wait_ms=100, request_timeout_ms=10000, **config)

    def consume(self, bootstrap: str, topic: str, partitions: list[int],
                count: int) -> list[Got]:
        from kafka import TopicPartition
        c = self._consumer(bootstrap, group_id=None)
        try:
            tps = [TopicPartition(topic, p) for p in partitions]
            c.assign(tps)
            c.seek_to_beginning(*tps)
            return _read(c, count)
        finally:
            c.close()

    def consume_to_end(self, bootstrap: str, topic: str, partitions: list[int], count: int,
                       isolation: str) -> tuple[list[Got], dict[int, int]]:
        from kafka import TopicPartition
        c = self._consumer(bootstrap, group_id=None, isolation_level=isolation)
        try:
            tps = [TopicPartition(topic, p) for p in partitions]
            c.assign(tps)
            c.seek_to_beginning(*tps)
            got = _read(c, count)
            end = c.end_offsets(tps)  # the last stable offset under read_committed
            deadline = time.monotonic() + 5
            while any(c.position(tp) < end[tp] for tp in tps) and time.monotonic() < deadline:
                for msgs in c.poll(timeout_ms=200).values():  # past the trailing markers
                    got += [Got(m.partition, m.offset, m.key, m.value, tuple(m.headers),
                                m.timestamp) for m in msgs]
            return got, {tp.partition: c.position(tp) for tp in tps}
        finally:
            c.close()

    def consume_from(self, bootstrap: str, topic: str, partition: int, offset: int,
                     count: int) -> list[Got]:
        from kafka import TopicPartition
        c = self._consumer(bootstrap, group_id=None)
        try:
            tp = TopicPartition(topic, partition)
            c.assign([tp])
            c.seek(tp, offset)
            return _read(c, count)
        finally:
            c.close()

    def consume_from_time(self, bootstrap: str, topic: str, partition: int, timestamp: int,
                          count: int) -> list[Got]:
        from kafka import TopicPartition
        c = self._consumer(bootstrap, group_id=None)
        try:
            tp = TopicPartition(topic, partition)
            found = c.offsets_for_times({tp: timestamp})[tp]
            assert found is not None, "offsets_for_times found nothing"
            c.assign([tp])
            c.seek(tp, found.offset)
            return _read(c, count)
        finally:
            c.close()

    def offsets_for_times(self, bootstrap: str, topic: str,
                          times: dict[int, int]) -> dict[int, tuple[int, int] | None]:
        from kafka import TopicPartition
        c = self._consumer(bootstrap, group_id=None)
        try:
            found = c.offsets_for_times({TopicPartition(topic, p): t for p, t in times.items()})
        finally:
            c.close()
        return {tp.partition: None if at is None else (at.offset, at.timestamp)
                for tp, at in found.items()}

    def consume_group(self, bootstrap: str, topic: str, group: str, count: int) -> list[Got]:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata
        c = self._consumer(bootstrap, group_id=group, auto_offset_reset="earliest")
        try:
            c.subscribe([topic])
            got = _read(c, count)
            commit = next_offsets(got)
            if commit:
                c.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1)
                          for p, o in commit.items()})
            return got
        finally:
            c.close(autocommit=False)

    def committed(self, bootstrap: str, group: str, topic: str,
                  partitions: list[int]) -> dict[int, int]:
        offsets = self._with_admin(bootstrap, lambda a: a.list_group_offsets(group))[group]
        return {p: next((o.offset for tp, o in offsets.items()
                         if tp.topic == topic and tp.partition == p), -1) for p in partitions}

    def start_member(self, bootstrap: str, topic: str, group: str) -> Member:
        return self.start_member_as(bootstrap, topic, group)

    def start_member_as(self, bootstrap: str, topic: str, group: str, *,
                        cooperative: bool = False, instance_id: str | None = None) -> Member:
        from kafka.errors import KafkaError
        from kafka.structs import OffsetAndMetadata
        settings: dict[str, Any] = {}
        if cooperative:
            from kafka.coordinator.assignors.cooperative_sticky import (
                CooperativeStickyAssignor,
            )
            settings["partition_assignment_strategy"] = (CooperativeStickyAssignor,)
        if instance_id is not None:
            settings["group_instance_id"] = instance_id
        label = f"kafka-python member {instance_id or ''} of {group}"

        def body(stopping: Any, take: Any) -> None:
            c = self._consumer(bootstrap, group_id=group, auto_offset_reset="earliest",
                               session_timeout_ms=10000, heartbeat_interval_ms=500,
                               metadata_max_age_ms=1000, **settings)
            c.subscribe([topic])
            try:
                await_first_assignment(c, time.monotonic() + JOIN_S, stopping)
                while not stopping():
                    # A long poll on purpose: kafka-python 3.0.12 can lose a JoinGroup/SyncGroup
                    # result completing between two short polls (see tests/integration).
                    for tp, msgs in c.poll(timeout_ms=2000, max_records=1).items():
                        for m in msgs:
                            take(m.value)
                            try:
                                c.commit({tp: OffsetAndMetadata(m.offset + 1, "", -1)})
                            except KafkaError:
                                pass  # rebalancing: the record comes again (at least once)
            finally:
                # A static member (group_instance_id) does not send LeaveGroup on close, as
                # the Java consumer: its partitions wait for it until the session times out.
                c.close(autocommit=False)

        return ThreadMember(label, body)

    # -- admin ----------------------------------------------------------------------------------
    def _admin(self, bootstrap: str) -> Any:
        from kafka.admin import KafkaAdminClient
        return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)

    def _with_admin(self, bootstrap: str, fn: Any) -> Any:
        admin = self._admin(bootstrap)
        try:
            return fn(admin)
        finally:
            admin.close()

    def create_topic(self, bootstrap: str, topic: str, partitions: int,
                     configs: dict[str, str]) -> None:
        from kafka.admin import NewTopic
        self._with_admin(bootstrap, lambda a: a.create_topics(
            [NewTopic(topic, partitions, 1, topic_configs=configs)]))

    def list_topics(self, bootstrap: str) -> set[str]:
        return set(self._with_admin(bootstrap, lambda a: a.list_topics()))

    def partition_count(self, bootstrap: str, topic: str) -> int:
        (described,) = self._with_admin(bootstrap, lambda a: a.describe_topics([topic]))
        assert described["error_code"] == 0, described
        return len(described["partitions"])

    def add_partitions(self, bootstrap: str, topic: str, total: int) -> None:
        self._with_admin(bootstrap, lambda a: a.create_partitions({topic: total}))

    def delete_topic(self, bootstrap: str, topic: str) -> None:
        self._with_admin(bootstrap, lambda a: a.delete_topics([topic]))

    def describe_configs(self, bootstrap: str, topic: str) -> dict[str, str]:
        from kafka.admin import ConfigResource
        result = self._with_admin(bootstrap, lambda a: a.describe_configs(
            [ConfigResource("TOPIC", topic)], config_filter="all"))
        return {name: entry["value"] for name, entry in result["topic"][topic].items()}

    def set_config(self, bootstrap: str, topic: str, name: str, value: str) -> None:
        from kafka.admin import ConfigResource
        result = self._with_admin(bootstrap, lambda a: a.alter_configs(
            [ConfigResource("TOPIC", topic, configs={name: value})]))
        assert result["topic"][topic] == "OK", result

    def delete_config(self, bootstrap: str, topic: str, name: str) -> None:
        from kafka.admin import ConfigResource
        result = self._with_admin(bootstrap, lambda a: a.reset_configs(
            [ConfigResource("TOPIC", topic, configs=[name])]))
        assert result["topic"][topic] == "OK", result

    def list_groups(self, bootstrap: str) -> set[str]:
        return {g["group_id"] for g in self._with_admin(bootstrap, lambda a: a.list_groups())}

    def describe_group(self, bootstrap: str, group: str) -> GroupView:
        d = self._with_admin(bootstrap, lambda a: a.describe_groups([group]))[group]
        assert d["error"] is None, d
        members = tuple({t["topic"]: list(t["partitions"])
                         for t in m["member_assignment"]["assigned_partitions"]}
                        for m in d["members"])
        return GroupView(d["group_state"], d["protocol_data"] or "", members)

    def alter_group_offsets(self, bootstrap: str, group: str, topic: str,
                            offsets: dict[int, int]) -> None:
        from kafka import TopicPartition
        from kafka.errors import NoError
        from kafka.structs import OffsetAndMetadata
        result = self._with_admin(bootstrap, lambda a: a.alter_group_offsets(
            group, {TopicPartition(topic, p): OffsetAndMetadata(o, "", -1)
                    for p, o in offsets.items()}))
        assert all(e is NoError for e in result.values()), result

    def delete_group(self, bootstrap: str, group: str) -> None:
        result = self._with_admin(bootstrap, lambda a: a.delete_groups([group]))
        assert dict(result) == {group: "OK"}, result

    def log_dir_sizes(self, bootstrap: str, topic: str) -> dict[int, int]:
        sizes: dict[int, int] = {}
        for broker in self._with_admin(bootstrap, lambda a: a.describe_log_dirs([topic])):
            for log_dir in broker["log_dirs"]:
                assert log_dir["error_code"] == 0, log_dir
                for t in log_dir["topics"]:
                    if t["name"] == topic:
                        for part in t["partitions"]:
                            sizes[part["partition_index"]] = part["partition_size"]
        return sizes

    def share_client(self) -> NoReturn:
        import kafka
        raise NotApplicable(NO_SHARE_CONSUMER.format(version=kafka.__version__))


ADAPTER = KafkaPython()
