"""confluent-kafka (librdkafka): Producer, Consumer, AdminClient."""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from compat.base import (
    TIMEOUT_S, Adapter, Got, GroupView, Member, NotApplicable, ProcessMember, ProduceFailed, Rec,
    Settings, ThreadMember, Txn, next_offsets,
)

if TYPE_CHECKING:
    from compat.differential.share_scenarios import Client as ShareClient

ROOT = Path(__file__).resolve().parents[2]


def _got(m: Any) -> Got:
    return Got(m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ()),
               m.timestamp()[1])


def _produce_args(r: Rec) -> dict[str, Any]:
    """produce()'s keywords for a record, each only when set: librdkafka takes no None for a
    partition (its partitioner chooses when none is given) or a timestamp (it stamps one)."""
    kwargs: dict[str, Any] = {}
    if r.partition is not None:
        kwargs["partition"] = r.partition
    if r.headers:
        kwargs["headers"] = list(r.headers)
    if r.timestamp is not None:
        kwargs["timestamp"] = r.timestamp
    return kwargs


def _read(consumer: Any, count: int) -> list[Got]:
    got: list[Got] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < count and time.monotonic() < deadline:
        m = consumer.poll(0.2)
        if m is None:
            continue
        if m.error() is not None:
            if m.error().code() == -191:  # _PARTITION_EOF
                continue
            raise RuntimeError(f"consumer error: {m.error()}")
        got.append(_got(m))
    return got


class Confluent(Adapter):
    name = "confluent-kafka"
    order = 10

    def versions(self) -> dict[str, str]:
        from importlib.metadata import version

        import confluent_kafka
        # The package's own version: its stub types confluent_kafka.__version__ (set from
        # version()) as version()'s documented (str, int), but both are a str at run time.
        return {"confluent-kafka": version("confluent-kafka"),
                "librdkafka": confluent_kafka.libversion()[0]}

    def missing(self) -> str | None:
        try:
            import confluent_kafka  # noqa: F401
        except ImportError:
            return "confluent-kafka is not installed"
        return None

    # -- produce / consume ----------------------------------------------------------------------
    def produce(self, bootstrap: str, topic: str, recs: list[Rec], *, codec: str = "none",
                idempotent: bool = False, config: Settings = None) -> None:
        from confluent_kafka import Producer
        errors: list = []

        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(err)

        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                             "linger.ms": 5, "message.timeout.ms": 15000,
                             "enable.idempotence": idempotent, **(config or {})})
        for r in recs:
            producer.produce(topic, value=r.value, key=r.key, on_delivery=on_delivery,
                             **_produce_args(r))
            producer.poll(0)
        left = producer.flush(TIMEOUT_S)
        if errors:
            raise ProduceFailed(str(errors[0]))
        assert left == 0, f"{left} records not delivered"

    def produce_transactions(self, bootstrap: str, topic: str, txns: list[Txn],
                             transactional_id: str,
                             while_open: Callable[[int], None] | None = None) -> None:
        from confluent_kafka import Producer
        errors: list = []

        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(err)

        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                             "linger.ms": 5, "message.timeout.ms": 15000})
        producer.init_transactions(TIMEOUT_S)
        for i, txn in enumerate(txns):
            producer.begin_transaction()
            for r in txn.recs:
                producer.produce(topic, value=r.value, key=r.key, on_delivery=on_delivery,
                                 **_produce_args(r))
            left = producer.flush(TIMEOUT_S)
            if errors:
                raise ProduceFailed(str(errors[0]))
            assert left == 0, f"{left} records not delivered"
            if while_open is not None:
                while_open(i)
            if txn.commit:
                producer.commit_transaction(TIMEOUT_S)
            else:
                producer.abort_transaction(TIMEOUT_S)

    def _assigned(self, bootstrap: str, **config: Any) -> Any:
        from confluent_kafka import Consumer
        # librdkafka insists on a group.id even for assign(); nothing is committed to it.
        return Consumer({"bootstrap.servers": bootstrap, "group.id": "compat-assign-only",
                         "enable.auto.commit": False, "enable.auto.offset.store": False,
                         "fetch.wait.max.ms": 100, **config})

    def consume(self, bootstrap: str, topic: str, partitions: list[int],
                count: int) -> list[Got]:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition
        c = self._assigned(bootstrap)
        try:
            c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
            return _read(c, count)
        finally:
            c.close()

    def consume_to_end(self, bootstrap: str, topic: str, partitions: list[int], count: int,
                       isolation: str) -> tuple[list[Got], dict[int, int]]:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition
        c = self._assigned(bootstrap, **{"isolation.level": isolation,
                                         "enable.partition.eof": True})
        try:
            tps = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions]
            c.assign(tps)
            got: list[Got] = []
            at_eof: set[int] = set()
            deadline = time.monotonic() + TIMEOUT_S
            # The end is each partition's end-of-partition event, raised once the fetch
            # position reaches what the isolation level allows (markers skipped).
            while (len(got) < count or len(at_eof) < len(partitions)) and \
                    time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is None:
                    continue
                if m.error() is not None:
                    if m.error().code() == -191:  # _PARTITION_EOF
                        at_eof.add(m.partition())
                        continue
                    raise RuntimeError(f"consumer error: {m.error()}")
                at_eof.discard(m.partition())
                got.append(_got(m))
            return got, {tp.partition: tp.offset for tp in c.position(
                [TopicPartition(topic, p) for p in partitions])}
        finally:
            c.close()

    def consume_from(self, bootstrap: str, topic: str, partition: int, offset: int,
                     count: int) -> list[Got]:
        from confluent_kafka import TopicPartition
        c = self._assigned(bootstrap)
        try:
            c.assign([TopicPartition(topic, partition, offset)])
            return _read(c, count)
        finally:
            c.close()

    def consume_from_time(self, bootstrap: str, topic: str, partition: int, timestamp: int,
                          count: int) -> list[Got]:
        from confluent_kafka import TopicPartition
        c = self._assigned(bootstrap)
        try:
            (found,) = c.offsets_for_times([TopicPartition(topic, partition, timestamp)],
                                           timeout=TIMEOUT_S)
            assert found.error is None and found.offset >= 0, f"offsets_for_times: {found}"
            c.assign([TopicPartition(topic, partition, found.offset)])
            return _read(c, count)
        finally:
            c.close()

    def consume_group(self, bootstrap: str, topic: str, group: str, count: int, *,
                      protocol: str = "classic") -> list[Got]:
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                      "group.protocol": protocol, "auto.offset.reset": "earliest",
                      "enable.auto.commit": False, "fetch.wait.max.ms": 100})
        try:
            c.subscribe([topic])
            got = _read(c, count)
            commit = next_offsets(got)
            if commit:
                c.commit(offsets=[TopicPartition(topic, p, o) for p, o in commit.items()],
                         asynchronous=False)
            return got
        finally:
            c.close()

    def committed(self, bootstrap: str, group: str, topic: str,
                  partitions: list[int]) -> dict[int, int]:
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        try:
            found = c.committed([TopicPartition(topic, p) for p in partitions], timeout=TIMEOUT_S)
            return {tp.partition: tp.offset if tp.offset >= 0 else -1 for tp in found}
        finally:
            c.close()

    def start_member(self, bootstrap: str, topic: str, group: str) -> Member:
        return self.start_member_as(bootstrap, topic, group)

    def start_member_as(self, bootstrap: str, topic: str, group: str, *,
                        cooperative: bool = False, instance_id: str | None = None) -> Member:
        from confluent_kafka import Consumer, KafkaException
        config = {"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100, "session.timeout.ms": 10000,
                  "heartbeat.interval.ms": 500}
        if cooperative:  # with no rebalance callback librdkafka assigns incrementally itself
            config["partition.assignment.strategy"] = "cooperative-sticky"
        if instance_id is not None:  # closing a static member does not leave the group
            config["group.instance.id"] = instance_id

        def body(stopping: Any, take: Any) -> None:
            c = Consumer(config)
            c.subscribe([topic])
            try:
                while not stopping():
                    m = c.poll(0.1)
                    if m is None or m.error() is not None:
                        continue
                    take(m.value())
                    try:  # the message's partition, at its offset + 1
                        c.commit(message=m, asynchronous=False)
                    except KafkaException:
                        pass  # rebalancing: the record comes again (at least once)
            finally:
                c.close()

        return ThreadMember(f"confluent member {instance_id or ''} of {group}", body)

    def start_consumer_member(self, bootstrap: str, group: str, *,
                              topics: Sequence[str] = (), regex: str | None = None,
                              instance_id: str | None = None, killable: bool = False) -> Member:
        # Always a process of its own (compat/clients/confluent_member.py), killable or not.
        args = [sys.executable, "-m", "compat.clients.confluent_member", bootstrap, group]
        args += ["--regex", regex] if regex is not None else ["--topics", *topics]
        if instance_id is not None:
            args += ["--instance-id", instance_id]
        return ProcessMember(f"confluent consumer-protocol member {instance_id or ''} of "
                             f"{group}", args, cwd=ROOT)

    def consume_consumer_group(self, bootstrap: str, topic: str, group: str,
                               count: int) -> list[Got]:
        return self.consume_group(bootstrap, topic, group, count, protocol="consumer")

    def offsets_for_times(self, bootstrap: str, topic: str,
                          times: dict[int, int]) -> dict[int, tuple[int, int] | None]:
        from confluent_kafka import TopicPartition
        c = self._assigned(bootstrap)
        try:
            found = c.offsets_for_times([TopicPartition(topic, p, t) for p, t in times.items()],
                                        timeout=TIMEOUT_S)
        finally:
            c.close()
        out: dict[int, tuple[int, int] | None] = {}
        for tp in found:
            assert tp.error is None, f"offsets_for_times: {tp}"
            # librdkafka reports the offset only (-1: none), not the record's timestamp: read it.
            out[tp.partition] = None if tp.offset < 0 else \
                (tp.offset, self.consume_from(bootstrap, topic, tp.partition, tp.offset, 1)[0]
                 .timestamp)
        if any(v is not None for v in out.values()):
            self.note("librdkafka's offsets_for_times gives offsets only: timestamps read back")
        return out

    # -- admin ----------------------------------------------------------------------------------
    def _admin(self, bootstrap: str) -> Any:
        from confluent_kafka.admin import AdminClient
        return AdminClient({"bootstrap.servers": bootstrap})

    def create_topic(self, bootstrap: str, topic: str, partitions: int,
                     configs: dict[str, str]) -> None:
        from confluent_kafka.admin import NewTopic
        admin = self._admin(bootstrap)  # kept referenced until the futures are done
        fs = admin.create_topics([NewTopic(topic, partitions, 1, config=configs)])
        fs[topic].result(TIMEOUT_S)

    def list_topics(self, bootstrap: str) -> set[str]:
        return set(self._admin(bootstrap).list_topics(timeout=TIMEOUT_S).topics)

    def partition_count(self, bootstrap: str, topic: str) -> int:
        from confluent_kafka import TopicCollection
        admin = self._admin(bootstrap)
        fs = admin.describe_topics(TopicCollection([topic]))
        return len(fs[topic].result(TIMEOUT_S).partitions)

    def add_partitions(self, bootstrap: str, topic: str, total: int) -> None:
        from confluent_kafka.admin import NewPartitions
        admin = self._admin(bootstrap)
        fs = admin.create_partitions([NewPartitions(topic, total)])
        fs[topic].result(TIMEOUT_S)

    def delete_topic(self, bootstrap: str, topic: str) -> None:
        admin = self._admin(bootstrap)
        fs = admin.delete_topics([topic])
        fs[topic].result(TIMEOUT_S)

    def describe_configs(self, bootstrap: str, topic: str) -> dict[str, str]:
        from confluent_kafka.admin import ConfigResource, ResourceType
        admin = self._admin(bootstrap)
        fs = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
        entries = next(iter(fs.values())).result(TIMEOUT_S)
        return {name: entry.value for name, entry in entries.items()}

    def _incremental(self, bootstrap: str, topic: str, name: str, value: str | None,
                     op: Any) -> None:
        from confluent_kafka.admin import ConfigEntry, ConfigResource, ResourceType
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry(name, value, incremental_operation=op)])
        admin = self._admin(bootstrap)
        fs = admin.incremental_alter_configs([resource])
        next(iter(fs.values())).result(TIMEOUT_S)

    def set_config(self, bootstrap: str, topic: str, name: str, value: str) -> None:
        from confluent_kafka.admin import AlterConfigOpType
        self._incremental(bootstrap, topic, name, value, AlterConfigOpType.SET)

    def delete_config(self, bootstrap: str, topic: str, name: str) -> None:
        from confluent_kafka.admin import AlterConfigOpType
        self._incremental(bootstrap, topic, name, None, AlterConfigOpType.DELETE)


    def list_groups(self, bootstrap: str) -> set[str]:
        admin = self._admin(bootstrap)
        found = admin.list_consumer_groups().result(TIMEOUT_S)
        return {g.group_id for g in found.valid}

    def describe_group(self, bootstrap: str, group: str) -> GroupView:
        admin = self._admin(bootstrap)
        d = admin.describe_consumer_groups([group])[group].result(TIMEOUT_S)
        members = []
        for m in d.members:
            assigned: dict[str, list[int]] = {}
            for tp in m.assignment.topic_partitions:
                assigned.setdefault(tp.topic, []).append(tp.partition)
            members.append(assigned)
        return GroupView(d.state.name, d.partition_assignor or "", tuple(members))

    def alter_group_offsets(self, bootstrap: str, group: str, topic: str,
                            offsets: dict[int, int]) -> None:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
        admin = self._admin(bootstrap)
        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(topic, p, o) for p, o in offsets.items()])
        (future,) = admin.alter_consumer_group_offsets([request]).values()
        future.result(TIMEOUT_S)

    def delete_group(self, bootstrap: str, group: str) -> None:
        admin = self._admin(bootstrap)
        admin.delete_consumer_groups([group])[group].result(TIMEOUT_S)

    def share_client(self) -> "ShareClient":
        from compat.differential.share_scenarios import CONFLUENT
        return CONFLUENT

    def log_dir_sizes(self, bootstrap: str, topic: str) -> dict[int, int]:
        raise NotApplicable("confluent-kafka's AdminClient has no DescribeLogDirs (nor has "
                            "librdkafka)")


ADAPTER = Confluent()
