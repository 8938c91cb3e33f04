"""aiokafka: AIOKafkaProducer, AIOKafkaConsumer, AIOKafkaAdminClient (each call its own loop)."""
from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable, NoReturn

from compat.base import (
    TIMEOUT_S, Adapter, GroupView, Got, Member, NotApplicable, ProduceFailed, Rec, Settings,
    ThreadMember, Txn, next_offsets,
)

DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs config_source of a topic override
NO_COOPERATIVE = ("aiokafka {version} has no cooperative rebalance protocol: its assignors "
                  "(aiokafka.coordinator.assignors: range, roundrobin, sticky) are all eager, "
                  "none is cooperative-sticky, and its coordinator revokes every partition "
                  "before each rejoin")
NO_LOG_DIRS = ("aiokafka {version} has no DescribeLogDirs: neither AIOKafkaAdminClient nor "
               "aiokafka.protocol defines it")
DELETE_BY_REQUEST = ("deleted with aiokafka's own DeleteGroupsRequest over AIOKafkaClient.send: "
                     "AIOKafkaAdminClient has no method that deletes a group")
ALTER_BY_COMMIT = ("offsets altered by AIOKafkaConsumer.commit on a consumer of the group with "
                   "assigned partitions (an OffsetCommit outside any generation, as Kafka's "
                   "Admin sends): AIOKafkaAdminClient has no alter-offsets method")
LEGACY_ALTER = ("aiokafka's admin has no IncrementalAlterConfigs: set and delete go through "
                "AlterConfigs v1, which replaces every override, so the others are sent again")


async def _read(consumer: Any, count: int) -> list[Got]:
    got: list[Got] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < count and time.monotonic() < deadline:
        batches = await consumer.getmany(timeout_ms=200, max_records=count - len(got))
        for msgs in batches.values():
            got += [Got(m.partition, m.offset, m.key, m.value, tuple(m.headers or ()),
                        m.timestamp) for m in msgs]
    return got


NO_SHARE_CONSUMER = ("aiokafka {version} has no share consumer: its consumer is "
                     "AIOKafkaConsumer alone, and aiokafka.protocol defines none of "
                     "ShareGroupHeartbeat, ShareFetch or ShareAcknowledge")


class AIOKafka(Adapter):
    name = "aiokafka"
    order = 30

    def versions(self) -> dict[str, str]:
        import aiokafka
        return {"aiokafka": aiokafka.__version__}

    def missing(self) -> str | None:
        try:
            import aiokafka  # noqa: F401
        except ImportError:
            return "aiokafka is not installed"
        return None

    def cannot(self, feature: str) -> str | None:
        if feature.startswith("codec:"):
            codec = feature.split(":", 1)[1]
            from aiokafka import codec as ac
            has = {"gzip": ac.has_gzip, "snappy": ac.has_snappy, "lz4": ac.has_lz4,
                   "zstd": ac.has_zstd}[codec]
            if not has():
                return f"aiokafka has no {codec} library installed here"
        return None

    # -- produce / consume ----------------------------------------------------------------------
    def produce(self, bootstrap: str, topic: str, recs: list[Rec], *, codec: str = "none",
                idempotent: bool = False, config: Settings = None) -> None:
        from aiokafka import AIOKafkaProducer
        from aiokafka.errors import KafkaError

        async def main() -> None:
            producer = AIOKafkaProducer(**{
                "bootstrap_servers": bootstrap, "linger_ms": 5, "request_timeout_ms": 10000,
                "compression_type": None if codec == "none" else codec,
                "enable_idempotence": idempotent, **(config or {})})
            await producer.start()
            try:
                futures = [await producer.send(topic, value=r.value, key=r.key,
                                               partition=r.partition, timestamp_ms=r.timestamp,
                                               headers=list(r.headers) or None)
                           for r in recs]
                try:
                    await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT_S)
                except KafkaError as exc:
                    raise ProduceFailed(repr(exc)) from exc
            finally:
                await producer.stop()

        asyncio.run(main())

    def produce_transactions(self, bootstrap: str, topic: str, txns: list[Txn],
                             transactional_id: str,
                             while_open: Callable[[int], None] | None = None) -> None:
        from aiokafka import AIOKafkaProducer
        from aiokafka.errors import KafkaError

        async def main() -> None:
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5,
                                        request_timeout_ms=10000,
                                        transactional_id=transactional_id)
            await producer.start()  # initialises the transactions too
            try:
                for i, txn in enumerate(txns):
                    await producer.begin_transaction()
                    futures = [await producer.send(topic, value=r.value, key=r.key,
                                                   partition=r.partition,
                                                   headers=list(r.headers) or None)
                               for r in txn.recs]
                    try:
                        await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT_S)
                    except KafkaError as exc:
                        raise ProduceFailed(repr(exc)) from exc
                    if while_open is not None:
                        while_open(i)
                    if txn.commit:
                        await producer.commit_transaction()
                    else:
                        await producer.abort_transaction()
            finally:
                await producer.stop()

        asyncio.run(main())

    def _with_consumer(self, bootstrap: str, use: Callable[[Any], Awaitable[Any]],
                       **config: Any) -> Any:
        from aiokafka import AIOKafkaConsumer

        async def main() -> Any:
            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                        fetch_max_wait_ms=100, request_timeout_ms=10000,
                                        **config)
            await consumer.start()
            try:
                return await use(consumer)
            finally:
                await consumer.stop()

        return asyncio.run(main())

    def consume(self, bootstrap: str, topic: str, partitions: list[int],
                count: int) -> list[Got]:
        from aiokafka import TopicPartition

        async def use(c: Any) -> list[Got]:
            tps = [TopicPartition(topic, p) for p in partitions]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            return await _read(c, count)

        return self._with_consumer(bootstrap, use, group_id=None)

    def consume_to_end(self, bootstrap: str, topic: str, partitions: list[int], count: int,
                       isolation: str) -> tuple[list[Got], dict[int, int]]:
        from aiokafka import TopicPartition

        async def use(c: Any) -> tuple[list[Got], dict[int, int]]:
            tps = [TopicPartition(topic, p) for p in partitions]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            got = await _read(c, count)
            end = await c.end_offsets(tps)  # the last stable offset under read_committed
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and \
                    any([await c.position(tp) < end[tp] for tp in tps]):
                # past the trailing markers (nothing more is expected)
                for msgs in (await c.getmany(timeout_ms=200)).values():
                    got += [Got(m.partition, m.offset, m.key, m.value, tuple(m.headers or ()),
                                m.timestamp) for m in msgs]
            return got, {tp.partition: await c.position(tp) for tp in tps}

        return self._with_consumer(bootstrap, use, group_id=None, isolation_level=isolation)

    def consume_from(self, bootstrap: str, topic: str, partition: int, offset: int,
                     count: int) -> list[Got]:
        from aiokafka import TopicPartition

        async def use(c: Any) -> list[Got]:
            tp = TopicPartition(topic, partition)
            c.assign([tp])
            c.seek(tp, offset)
            return await _read(c, count)

        return self._with_consumer(bootstrap, use, group_id=None)

    def consume_from_time(self, bootstrap: str, topic: str, partition: int, timestamp: int,
                          count: int) -> list[Got]:
        from aiokafka import TopicPartition

        async def use(c: Any) -> list[Got]:
            tp = TopicPartition(topic, partition)
            c.assign([tp])
            found = (await c.offsets_for_times({tp: timestamp}))[tp]
            assert found is not None, "offsets_for_times found nothing"
            c.seek(tp, found.offset)
            return await _read(c, count)

        return self._with_consumer(bootstrap, use, group_id=None)

    def offsets_for_times(self, bootstrap: str, topic: str,
                          times: dict[int, int]) -> dict[int, tuple[int, int] | None]:
        from aiokafka import TopicPartition

        async def use(c: Any) -> Any:
            return await c.offsets_for_times({TopicPartition(topic, p): t
                                              for p, t in times.items()})

        found = self._with_consumer(bootstrap, use, group_id=None)
        return {tp.partition: None if at is None else (at.offset, at.timestamp)
                for tp, at in found.items()}

    def consume_group(self, bootstrap: str, topic: str, group: str, count: int) -> list[Got]:
        from aiokafka import TopicPartition

        async def use(c: Any) -> list[Got]:
            c.subscribe([topic])
            got = await _read(c, count)
            commit = next_offsets(got)
            if commit:
                await c.commit({TopicPartition(topic, p): o for p, o in commit.items()})
            return got

        return self._with_consumer(bootstrap, use, group_id=group, auto_offset_reset="earliest")

    def committed(self, bootstrap: str, group: str, topic: str,
                  partitions: list[int]) -> dict[int, int]:
        async def use(a: Any) -> Any:
            return await a.list_consumer_group_offsets(group)
        offsets = self._with_admin(bootstrap, use)
        return {p: next((o.offset for tp, o in offsets.items()
                         if tp.topic == topic and tp.partition == p), -1) for p in partitions}

    def start_member(self, bootstrap: str, topic: str, group: str) -> Member:
        return self.start_member_as(bootstrap, topic, group)

    def start_member_as(self, bootstrap: str, topic: str, group: str, *,
                        cooperative: bool = False, instance_id: str | None = None) -> Member:
        import aiokafka
        from aiokafka import AIOKafkaConsumer, TopicPartition
        from aiokafka.errors import KafkaError

        if cooperative:
            raise NotApplicable(NO_COOPERATIVE.format(version=aiokafka.__version__))

        def body(stopping: Any, take: Any) -> None:
            async def main() -> None:
                c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                     auto_offset_reset="earliest", enable_auto_commit=False,
                                     fetch_max_wait_ms=100, session_timeout_ms=10000,
                                     heartbeat_interval_ms=500, metadata_max_age_ms=1000,
                                     # static: stop() closes without LeaveGroup
                                     group_instance_id=instance_id)
                await c.start()
                try:
                    c.subscribe([topic])
                    while not stopping():
                        batches = await c.getmany(timeout_ms=100, max_records=1)
                        for tp, msgs in batches.items():
                            for m in msgs:
                                take(m.value)
                                try:
                                    await c.commit({TopicPartition(tp.topic, tp.partition):
                                                    m.offset + 1})
                                except KafkaError:
                                    pass  # rebalancing: the record comes again
                finally:
                    await c.stop()

            asyncio.run(main())

        return ThreadMember(f"aiokafka member {instance_id or ''} of {group}", body)

    # -- admin ----------------------------------------------------------------------------------
    def _with_admin(self, bootstrap: str, use: Callable[[Any], Awaitable[Any]]) -> Any:
        from aiokafka.admin import AIOKafkaAdminClient

        async def main() -> Any:
            admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
            await admin.start()
            try:
                return await use(admin)
            finally:
                await admin.close()

        return asyncio.run(main())

    @staticmethod
    def _check(errors: list) -> None:
        for entry in errors:
            assert entry[1] == 0, f"error {entry[1]} for {entry[0]}: {entry}"

    def create_topic(self, bootstrap: str, topic: str, partitions: int,
                     configs: dict[str, str]) -> None:
        from aiokafka.admin import NewTopic

        async def use(a: Any) -> Any:
            return await a.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs)])

        self._check(self._with_admin(bootstrap, use).topic_errors)

    def list_topics(self, bootstrap: str) -> set[str]:
        async def use(a: Any) -> Any:
            return await a.list_topics()
        return set(self._with_admin(bootstrap, use))

    def partition_count(self, bootstrap: str, topic: str) -> int:
        async def use(a: Any) -> Any:
            return await a.describe_topics([topic])
        (described,) = self._with_admin(bootstrap, use)
        assert described["error_code"] == 0, described
        return len(described["partitions"])

    def add_partitions(self, bootstrap: str, topic: str, total: int) -> None:
        from aiokafka.admin import NewPartitions

        async def use(a: Any) -> Any:
            return await a.create_partitions({topic: NewPartitions(total)})

        self._check(self._with_admin(bootstrap, use).topic_errors)

    def delete_topic(self, bootstrap: str, topic: str) -> None:
        async def use(a: Any) -> Any:
            return await a.delete_topics([topic])
        self._check(self._with_admin(bootstrap, use).topic_error_codes)

    def _entries(self, bootstrap: str, topic: str) -> list[tuple]:
        from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

        async def use(a: Any) -> Any:
            return await a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])

        (response,) = self._with_admin(bootstrap, use)
        (resource,) = response.resources
        assert resource[0] == 0, f"DescribeConfigs error {resource[0]}: {resource[1]}"
        return list(resource[4])

    def describe_configs(self, bootstrap: str, topic: str) -> dict[str, str]:
        return {e[0]: e[1] for e in self._entries(bootstrap, topic)}

    def _alter(self, bootstrap: str, topic: str, overrides: dict[str, str]) -> None:
        """Legacy AlterConfigs (aiokafka has no incremental one): the topic's overrides become
        exactly `overrides`."""
        from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

        async def use(a: Any) -> Any:
            return await a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                         configs=overrides)])

        (response,) = self._with_admin(bootstrap, use)
        for resource in response.resources:
            assert resource[0] == 0, f"AlterConfigs error {resource[0]}: {resource[1]}"

    def _overrides(self, bootstrap: str, topic: str) -> dict[str, str]:
        return {e[0]: e[1] for e in self._entries(bootstrap, topic)
                if e[3] == DYNAMIC_TOPIC_CONFIG}

    def set_config(self, bootstrap: str, topic: str, name: str, value: str) -> None:
        self.note(LEGACY_ALTER)
        self._alter(bootstrap, topic, {**self._overrides(bootstrap, topic), name: value})

    def delete_config(self, bootstrap: str, topic: str, name: str) -> None:
        self.note(LEGACY_ALTER)
        overrides = self._overrides(bootstrap, topic)
        overrides.pop(name, None)
        self._alter(bootstrap, topic, overrides)

    def list_groups(self, bootstrap: str) -> set[str]:
        async def use(a: Any) -> Any:
            return await a.list_consumer_groups()
        return {g[0] for g in self._with_admin(bootstrap, use)}

    def describe_group(self, bootstrap: str, group: str) -> GroupView:
        from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment

        async def use(a: Any) -> Any:
            return await a.describe_consumer_groups([group])

        (response,) = self._with_admin(bootstrap, use)
        (d,) = response.to_object()["groups"]
        assert d["error_code"] == 0, d
        members = []
        for m in d["members"]:
            assignment = ConsumerProtocolMemberAssignment.decode(m["member_assignment"])
            members.append({t: list(ps) for t, ps in assignment.assignment})
        return GroupView(d["state"], d["protocol"] or "", tuple(members))

    def alter_group_offsets(self, bootstrap: str, group: str, topic: str,
                            offsets: dict[int, int]) -> None:
        from aiokafka import TopicPartition
        self.note(ALTER_BY_COMMIT)

        async def use(c: Any) -> None:
            tps = {TopicPartition(topic, p): o for p, o in offsets.items()}
            c.assign(list(tps))
            await c.commit(tps)

        self._with_consumer(bootstrap, use, group_id=group)

    def delete_group(self, bootstrap: str, group: str) -> None:
        from aiokafka import AIOKafkaClient
        from aiokafka.protocol.admin import DeleteGroupsRequest
        self.note(DELETE_BY_REQUEST)

        async def use(a: Any) -> Any:
            node = await a.find_coordinator(group)
            client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
            await client.bootstrap()
            try:
                return await client.send(node, DeleteGroupsRequest([group]))
            finally:
                await client.close()

        response = self._with_admin(bootstrap, use)
        results = [(r["group_id"], r["error_code"]) for r in response.to_object()["results"]]
        assert results == [(group, 0)], f"DeleteGroups answered {response}"

    def log_dir_sizes(self, bootstrap: str, topic: str) -> dict[int, int]:
        import aiokafka
        raise NotApplicable(NO_LOG_DIRS.format(version=aiokafka.__version__))

    def share_client(self) -> NoReturn:
        import aiokafka
        raise NotApplicable(NO_SHARE_CONSUMER.format(version=aiokafka.__version__))


ADAPTER = AIOKafka()
