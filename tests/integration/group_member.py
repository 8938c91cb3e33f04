"""One consumer-group member in its own process, so a test can stop it (SIGTERM: close and
leave the group) or kill it (SIGKILL: it just dies, and only its session timeout tells).

    python -m tests.integration.group_member --client confluent --bootstrap HOST:PORT \
        --topic T --group G [--instance ID] [--session-ms 3000] [--strategy cooperative-sticky]

It consumes one record at a time and commits it (offset + 1) synchronously before taking the
next, printing JSON lines on stdout: `assigned` / `revoked` (partitions), `rec` when a record
is taken, `ok` once its commit succeeded, `commit_failed`, and `closed`.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from typing import Any

_stop = False


def _on_term(*_: Any) -> None:
    global _stop
    _stop = True


def emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def run_confluent(args: argparse.Namespace) -> None:
    from confluent_kafka import Consumer, KafkaException

    conf: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap, "group.id": args.group,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "session.timeout.ms": args.session_ms, "heartbeat.interval.ms": args.heartbeat_ms,
        "partition.assignment.strategy": args.strategy or "range",
        "fetch.wait.max.ms": 50, "topic.metadata.refresh.interval.ms": 1000,
    }
    if args.instance:
        conf["group.instance.id"] = args.instance
    consumer = Consumer(conf)

    def assigned(_c: Any, parts: list) -> None:
        emit(event="assigned", partitions=[p.partition for p in parts])

    def revoked(_c: Any, parts: list) -> None:
        emit(event="revoked", partitions=[p.partition for p in parts])

    consumer.subscribe([args.topic], on_assign=assigned, on_revoke=revoked, on_lost=revoked)
    while not _stop:
        msg = consumer.poll(0.05)
        if msg is None or msg.error():
            continue
        value = msg.value()
        rec = {"p": msg.partition(), "o": msg.offset(),
               "v": None if value is None else value.decode()}
        emit(event="rec", **rec)
        try:  # the record's partition, at its offset + 1
            consumer.commit(message=msg, asynchronous=False)
            emit(event="ok", **rec)
        except KafkaException as exc:
            emit(event="commit_failed", error=str(exc), **rec)
    consumer.close()
    emit(event="closed")


def _consumer_config(args: argparse.Namespace) -> dict[str, Any]:
    """The member's settings for kafka-python and aiokafka, which share their names."""
    extra = {"group_instance_id": args.instance} if args.instance else {}
    return dict(bootstrap_servers=args.bootstrap, group_id=args.group,
                auto_offset_reset="earliest", enable_auto_commit=False,
                session_timeout_ms=args.session_ms, heartbeat_interval_ms=args.heartbeat_ms,
                fetch_max_wait_ms=50, metadata_max_age_ms=1000, **extra)


def _listener(base: type) -> type:
    """A rebalance listener on `base` (kafka-python's or aiokafka's) that reports events."""
    class Listener(base):
        def on_partitions_revoked(self, revoked: Any) -> None:
            emit(event="revoked", partitions=[p.partition for p in revoked])

        def on_partitions_assigned(self, assigned: Any) -> None:
            emit(event="assigned", partitions=[p.partition for p in assigned])
    return Listener


def run_kafka_python(args: argparse.Namespace) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(**_consumer_config(args))
    consumer.subscribe([args.topic], listener=_listener(ConsumerRebalanceListener)())
    while not _stop:
        # A long poll timeout on purpose: kafka-python 3.0.12 can lose a JoinGroup/SyncGroup
        # result that completes between two polls whose timeouts expired during a slow
        # rebalance, leaving the member silently unjoined with heartbeats off.
        batch = consumer.poll(timeout_ms=5000, max_records=1)
        for tp, messages in batch.items():
            for msg in messages:
                rec = {"p": msg.partition, "o": msg.offset, "v": msg.value.decode()}
                emit(event="rec", **rec)
                try:
                    consumer.commit({TopicPartition(args.topic, msg.partition):
                                     OffsetAndMetadata(msg.offset + 1, "", -1)})
                    emit(event="ok", **rec)
                except KafkaError as exc:
                    emit(event="commit_failed", error=repr(exc), **rec)
    consumer.close()
    emit(event="closed")


async def _run_aiokafka(args: argparse.Namespace) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.errors import KafkaError

    consumer = AIOKafkaConsumer(**_consumer_config(args))
    await consumer.start()
    consumer.subscribe([args.topic], listener=_listener(ConsumerRebalanceListener)())
    while not _stop:
        batch = await consumer.getmany(timeout_ms=50, max_records=1)
        for tp, messages in batch.items():
            for msg in messages:
                rec = {"p": msg.partition, "o": msg.offset, "v": msg.value.decode()}
                emit(event="rec", **rec)
                try:
                    await consumer.commit({TopicPartition(args.topic, msg.partition):
                                           msg.offset + 1})
                    emit(event="ok", **rec)
                except KafkaError as exc:
                    emit(event="commit_failed", error=repr(exc), **rec)
    await consumer.stop()
    emit(event="closed")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", choices=("confluent", "kafka-python", "aiokafka"),
                        required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--instance")
    parser.add_argument("--strategy")
    parser.add_argument("--session-ms", type=int, default=3000)
    parser.add_argument("--heartbeat-ms", type=int, default=300)
    args = parser.parse_args()
    if os.environ.get("GROUP_MEMBER_DEBUG"):
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,
                            format="%(asctime)s %(name)s %(message)s")
    signal.signal(signal.SIGTERM, _on_term)
    if args.client == "confluent":
        run_confluent(args)
    elif args.client == "kafka-python":
        run_kafka_python(args)
    else:
        asyncio.run(_run_aiokafka(args))


if __name__ == "__main__":
    main()
