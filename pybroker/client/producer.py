"""`Producer`: records into batches per partition, batches into Produce requests per leader.

Theory of operation. `send()` picks the partition (Kafka's murmur2 of the key, or a "sticky"
partition for keyless records that changes each time a batch is sent, as Kafka 2.4+ does),
appends the record to that partition's open batch and returns a `DeliveryFuture`. A sender task
(in the client's nursery) closes batches that are full, have waited `linger_ms`, or are being
flushed, groups them by leader and writes one Produce request per leader. Requests to one
broker are written in order and may be pipelined up to `max_in_flight`; a task per request waits
for the answer and settles its batches. A batch answered with a retriable error (the leader
moved) goes back to the front of its partition's queue after a metadata refresh, until
`delivery_timeout_ms`; any other error fails its records' futures. With acks=0 nothing is
answered: a batch counts as delivered (offset -1) once written.

Without `enable_idempotence` a retried batch may be written twice if the first answer was
lost, and may land after a later batch of the same partition (as Kafka with
`enable.idempotence=false`). With it (KIP-98), the producer first asks any broker for a producer
id and epoch (InitProducerId without a transactional id), stamps each batch with them and with
its partition's next sequence number (fixed when the batch is first sent, kept on retries),
so the leader drops a duplicate and refuses a gap (OUT_OF_ORDER_SEQUENCE_NUMBER). Kafka keeps up
to five batches of a partition in flight and re-sequences after a failure; this producer keeps
one per partition in flight, which gives the same guarantee (no duplicates, no reordering)
without that machinery. A batch that fails after it was sent leaves its partition's sequence
unknown to us, so the producer then takes a new producer id before sending more (Kafka bumps the
idempotent epoch). Idempotence needs acks=all, as in Kafka. No transactions.
"""
from __future__ import annotations

import random
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import trio

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError
from protocol.records.batch import Compression
from protocol.records.record import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, build_batch
from protocol.records.record import Record
from pybroker.client.client import REFRESH_CODES, KafkaClient
from pybroker.client.cluster import TopicPartition
from pybroker.client.errors import KafkaConnectionError, KafkaTimeoutError

__all__ = ["Producer", "DeliveryFuture", "RecordMetadata", "murmur2", "default_partition",
           "parse_compression", "parse_acks"]

Headers = Sequence[tuple[str, bytes | None]]
Callback = Callable[["RecordMetadata | None", "BaseException | None"], None]
_RECORD_OVERHEAD = 16  # rough per-record framing (varints, attributes) for batch sizing
_RETRY_BACKOFF = 0.1  # Kafka's retry.backoff.ms


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2` (signed 32-bit result), so keys land where Java puts them."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    end = length & ~3
    for i in range(0, end, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length & 3
    if rest == 3:
        h ^= data[end + 2] << 16
    if rest >= 2:
        h ^= data[end + 1] << 8
    if rest >= 1:
        h ^= data[end]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def default_partition(key: bytes, num_partitions: int) -> int:
    """Kafka's default partition for a keyed record: toPositive(murmur2(key)) % n."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def parse_compression(name: str | None) -> Compression:
    """A `compression.type` value (none, gzip, snappy, lz4, zstd); ValueError otherwise."""
    value = (name or "none").strip().lower()
    try:
        return Compression[value.upper()]
    except KeyError:
        raise ValueError(f"Invalid compression type '{name}': expected one of "
                         "none, gzip, snappy, lz4, zstd") from None


def parse_acks(value: str | int) -> int:
    """`acks`: all/-1, 0 or 1; ValueError otherwise."""
    text = str(value).strip().lower()
    if text == "all":
        return -1
    if text in ("-1", "0", "1"):
        return int(text)
    raise ValueError(f"Invalid value {value} for acks: expected all, -1, 0 or 1")


@dataclass(frozen=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int
    timestamp: int


@dataclass(eq=False)
class _Batch:
    tp: TopicPartition
    created: float
    records: list[Record] = field(default_factory=list)
    callbacks: list[Callback | None] = field(default_factory=list)
    size: int = 0
    done: trio.Event = field(default_factory=trio.Event)
    base_offset: int = -1
    append_time: int = -1
    error: BaseException | None = None
    attempts: int = 0
    not_before: float = 0.0  # retry backoff
    base_sequence: int = NO_SEQUENCE  # idempotence: fixed at the first send, kept on retries

    def settle(self, error: BaseException | None = None, base_offset: int = -1,
               append_time: int = -1) -> None:
        self.error, self.base_offset, self.append_time = error, base_offset, append_time
        self.done.set()
        if any(self.callbacks):
            for index, callback in enumerate(self.callbacks):
                if callback is not None:
                    fut = DeliveryFuture(self, index)
                    try:
                        callback(None if error else fut.result(), error)
                    except Exception:  # noqa: BLE001 - a callback must not stop the sender
                        pass


class DeliveryFuture:
    """The outcome of one `send()`: await `wait()` for its RecordMetadata (or the error)."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: _Batch, index: int) -> None:
        self._batch, self._index = batch, index

    def done(self) -> bool:
        return self._batch.done.is_set()

    async def wait(self) -> RecordMetadata:
        await self._batch.done.wait()
        return self.result()

    def result(self) -> RecordMetadata:
        """The outcome of a settled send (raises its error)."""
        batch = self._batch
        if not batch.done.is_set():
            raise RuntimeError("the record is not acknowledged yet")
        if batch.error is not None:
            raise batch.error
        offset = batch.base_offset + self._index if batch.base_offset >= 0 else -1
        record = batch.records[self._index]
        ts = batch.append_time if batch.append_time >= 0 else (record.timestamp or -1)
        return RecordMetadata(batch.tp.topic, batch.tp.partition, offset, ts)


class Producer:
    """Batching, pipelining producer; use `async with Producer(client, ...) as producer:`.

    Options follow Kafka's producer configs: `acks` (-1 = all), `compression`, `linger_ms`,
    `batch_size`, `max_in_flight` (per broker), `request_timeout_ms`, `delivery_timeout_ms`,
    `max_request_size`, `buffer_memory` (send() waits while this much is unacknowledged),
    `enable_idempotence` (needs acks=-1).
    """

    def __init__(self, client: KafkaClient, *, acks: int = -1,
                 compression: Compression | int = Compression.NONE, linger_ms: float = 5,
                 batch_size: int = 16384, max_in_flight: int = 5,
                 request_timeout_ms: int = 30000, delivery_timeout_ms: int = 120000,
                 max_request_size: int = 1048576, buffer_memory: int = 33554432,
                 enable_idempotence: bool = False) -> None:
        if enable_idempotence and acks != -1:
            raise ValueError("Must set acks to all in order to use the idempotent producer. "
                             "Otherwise we cannot guarantee idempotence.")
        self.client = client
        self.idempotent = enable_idempotence
        self.producer_id, self.producer_epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        self._next_sequence: dict[TopicPartition, int] = {}
        self._in_flight: set[TopicPartition] = set()  # idempotence: one batch per partition
        self._new_id_needed = False
        self.acks = acks
        self.compression = Compression(compression)
        self.linger = max(0.0, linger_ms / 1000)
        self.batch_size = max(1, batch_size)
        self.max_in_flight = max(1, max_in_flight)
        self.request_timeout_ms = request_timeout_ms
        self.delivery_timeout = delivery_timeout_ms / 1000
        self.max_request_size = max_request_size
        self.buffer_memory = buffer_memory
        self._open: dict[TopicPartition, _Batch] = {}
        self._queues: dict[TopicPartition, deque[_Batch]] = {}
        self._unsettled: set[_Batch] = set()
        self._buffered = 0
        self._space = trio.Event()
        self._wakeup = trio.Event()
        self._flushing = 0
        self._sticky: dict[str, int] = {}
        self._inflight: dict[int, trio.Semaphore] = {}
        self._scope: trio.CancelScope | None = None
        self._closed = False

    async def __aenter__(self) -> "Producer":
        await self.start()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        await self.close(flush=exc_type is None)

    async def start(self) -> None:
        if self.idempotent:
            await self._init_producer_id()
        self._scope = await self.client.nursery.start(self._sender)

    async def _init_producer_id(self) -> None:
        """A producer id and epoch for this producer's life (Kafka's TransactionManager
        without a transactional id), retried while the broker's id allocation is not ready."""
        async def attempt() -> Any:
            resp = await self.client.request(ApiKey.INIT_PRODUCER_ID, {
                "transactional_id": None, "transaction_timeout_ms": 60000,
                "producer_id": -1, "producer_epoch": -1},
                timeout=self.request_timeout_ms / 1000)
            if resp.error_code:
                raise KafkaError(resp.error_code, "InitProducerId")
            return resp

        resp = await self.client.retrying(attempt, timeout=self.delivery_timeout, refresh=False)
        self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
        self._next_sequence.clear()
        self._new_id_needed = False

    async def close(self, *, flush: bool = True) -> None:
        """Flush (unless told not to), then stop the sender; unsent records fail."""
        try:
            if flush and not self._closed:
                await self.flush()
        finally:
            self._closed = True
            if self._scope is not None:
                self._scope.cancel()
            for batch in list(self._unsettled):
                if not batch.done.is_set():
                    batch.settle(KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                            "the producer was closed before the record was sent"))

    # -- the caller's side ---------------------------------------------------------------------

    async def partitions_for(self, topic: str) -> list[int]:
        meta = await self.client.retrying(
            lambda: self.client.topic(topic, allow_auto_create=True,
                                      refresh=topic not in self.client.topics),
            codes=frozenset({ErrorCode.LEADER_NOT_AVAILABLE}), any_retriable=False,
            refresh=False, timeout=self.client.request_timeout)
        return sorted(meta.partitions)

    async def send(self, topic: str, value: bytes | None, key: bytes | None = None,
                   headers: Headers = (), *, partition: int | None = None,
                   timestamp: int | None = None, callback: Callback | None = None
                   ) -> DeliveryFuture:
        """Queue one record; raises at once for an unknown topic or partition, or a record
        larger than `max_request_size` (Kafka's RecordTooLargeException).

        `callback(metadata, error)`, if given, is called from the sender task when the record
        is settled (Kafka's send callback): cheap, synchronous, and its errors are ignored.
        """
        if self._closed:
            raise RuntimeError("send() on a closed producer")
        for what, data in (("key", key), ("value", value),
                           *((f"header {k!r}", v) for k, v in headers)):
            if data is not None and not isinstance(data, (bytes, bytearray)):
                raise TypeError(f"the record's {what} must be bytes or None, not "
                                f"{type(data).__name__}")
        if any(not isinstance(k, str) for k, _ in headers):
            raise TypeError("header keys must be str")
        partitions = await self.partitions_for(topic)
        if partition is None:
            partition = (default_partition(key, len(partitions)) if key is not None
                         else self._sticky_partition(topic, partitions))
        elif partition not in partitions:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"Partition {partition} of topic {topic} with partition count "
                             f"{len(partitions)} is not present in metadata.")
        size = (_RECORD_OVERHEAD + len(key or b"") + len(value or b"")
                + sum(len(k) + len(v or b"") + 4 for k, v in headers))
        if size > self.max_request_size:
            raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                             f"The message is {size} bytes when serialized which is larger "
                             f"than {self.max_request_size}, which is the value of the "
                             f"max.request.size configuration.")
        while self._buffered + size > self.buffer_memory and self._unsettled:
            self._space = trio.Event() if self._space.is_set() else self._space
            await self._space.wait()
        tp = TopicPartition(topic, partition)
        batch = self._open.get(tp)
        if batch is not None and batch.size + size > self.batch_size and batch.records:
            self._close_batch(tp)
            batch = None
        if batch is None:
            batch = _Batch(tp, trio.current_time())
            self._open[tp] = batch
            self._unsettled.add(batch)
            self._wakeup.set()  # the sender recomputes when its next linger deadline is
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        batch.records.append(Record(key, value, tuple(headers), timestamp))
        batch.callbacks.append(callback)
        batch.size += size
        self._buffered += size
        if batch.size >= self.batch_size:
            self._close_batch(tp)
        elif self.linger == 0:
            self._wakeup.set()  # sent as soon as the sender runs; records gather meanwhile
        return DeliveryFuture(batch, len(batch.records) - 1)

    async def flush(self) -> None:
        """Send everything queued now and wait until all of it is settled."""
        self._flushing += 1
        try:
            for tp in list(self._open):
                self._close_batch(tp)
            pending = list(self._unsettled)
            self._wakeup.set()
            for batch in pending:
                await batch.done.wait()
        finally:
            self._flushing -= 1

    def _sticky_partition(self, topic: str, partitions: list[int]) -> int:
        current = self._sticky.get(topic)
        if current is None or current not in partitions:
            meta = self.client.topics.get(topic)
            usable = [p for p in partitions
                      if meta is None or meta.partitions[p].leader >= 0] or partitions
            current = self._sticky[topic] = random.choice(usable)
        return current

    def _close_batch(self, tp: TopicPartition) -> None:
        batch = self._open.pop(tp, None)
        if batch is None:
            return
        self._queues.setdefault(tp, deque()).append(batch)
        if self._sticky.get(tp.topic) == tp.partition:
            meta = self.client.topics.get(tp.topic)
            if meta is not None and len(meta.partitions) > 1:
                others = [p for p in meta.partitions if p != tp.partition
                          and meta.partitions[p].leader >= 0]
                if others:
                    self._sticky[tp.topic] = random.choice(others)
        self._wakeup.set()

    def _settled(self, batch: _Batch) -> None:
        self._in_flight.discard(batch.tp)
        self._wakeup.set()  # the partition's next batch may go
        self._unsettled.discard(batch)
        self._buffered -= batch.size
        self._space.set()

    # -- the sender ----------------------------------------------------------------------------

    async def _sender(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        with trio.CancelScope() as scope:
            task_status.started(scope)
            async with trio.open_nursery() as waiters:
                while True:
                    now = trio.current_time()
                    for tp, batch in list(self._open.items()):
                        if self._flushing or now - batch.created >= self.linger:
                            self._close_batch(tp)
                    ready = {tp: q.popleft() for tp, q in self._queues.items()
                             if q and q[0].not_before <= now and tp not in self._in_flight}
                    self._queues = {tp: q for tp, q in self._queues.items() if q}
                    if not ready:
                        self._wakeup = trio.Event()
                        deadline = min(
                            [b.created + self.linger for b in self._open.values()]
                            + [q[0].not_before for q in self._queues.values()],
                            default=float("inf"))
                        with trio.move_on_at(deadline):
                            await self._wakeup.wait()
                        continue
                    if self._new_id_needed:
                        await self._renew_producer_id(ready)
                    await self._dispatch(ready, waiters)

    async def _dispatch(self, ready: dict[TopicPartition, _Batch], waiters: trio.Nursery
                        ) -> None:
        by_leader: dict[int, list[_Batch]] = {}
        for tp, batch in ready.items():
            if trio.current_time() - batch.created > self.delivery_timeout:
                self._fail(batch, KafkaTimeoutError(
                    f"Expiring records for {tp}: {self.delivery_timeout:g}s have passed "
                    "since the batch was created"))
                continue
            try:
                leader = await self.client.leader(tp.topic, tp.partition,
                                                  refresh=batch.attempts > 0)
            except (KafkaError, KafkaConnectionError, KafkaTimeoutError) as exc:
                self._retry_or_fail(batch, exc)
                continue
            by_leader.setdefault(leader, []).append(batch)
            if self.idempotent:
                self._in_flight.add(tp)
        for node_id, batches in by_leader.items():
            sem = self._inflight.setdefault(node_id, trio.Semaphore(self.max_in_flight))
            await sem.acquire()
            try:
                body = self._request_body(batches)
            except Exception as exc:  # noqa: BLE001 - e.g. a codec failing: fail, don't crash
                sem.release()
                for batch in batches:
                    self._fail(batch, exc)
                continue
            try:
                conn = await self.client.connection(node_id)
                pending = await conn.start_request(
                    ApiKey.PRODUCE, body, min_version=3, expect_response=self.acks != 0,
                    timeout=self.request_timeout_ms / 1000 + 5)
            except (KafkaError, KafkaConnectionError, KafkaTimeoutError) as exc:
                sem.release()
                for batch in batches:
                    self._retry_or_fail(batch, exc)
                continue
            waiters.start_soon(self._await_response, pending, batches, sem)

    async def _renew_producer_id(self, ready: dict[TopicPartition, _Batch]) -> None:
        """After a sent batch failed: wait for the batches in flight, then take a new id; the
        batches not yet written are sequenced afresh under it."""
        while self._in_flight:
            self._wakeup = trio.Event()
            await self._wakeup.wait()
        try:
            await self._init_producer_id()
        except (KafkaError, KafkaConnectionError, KafkaTimeoutError) as exc:
            for batch in ready.values():
                self._fail(batch, exc)
            ready.clear()
            return
        for batch in list(self._unsettled):
            batch.base_sequence = NO_SEQUENCE

    def _request_body(self, batches: list[_Batch]) -> dict:
        topics: dict[str, list[dict]] = {}
        for batch in batches:
            batch.attempts += 1
            producer_id, producer_epoch, sequence = NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE
            if self.idempotent:
                if batch.base_sequence == NO_SEQUENCE:
                    batch.base_sequence = self._next_sequence.get(batch.tp, 0)
                    self._next_sequence[batch.tp] = \
                        (batch.base_sequence + len(batch.records)) & 0x7FFFFFFF
                producer_id, producer_epoch = self.producer_id, self.producer_epoch
                sequence = batch.base_sequence
            records = build_batch(batch.records, compression=self.compression,
                                  producer_id=producer_id, producer_epoch=producer_epoch,
                                  base_sequence=sequence)
            topics.setdefault(batch.tp.topic, []).append(
                {"index": batch.tp.partition, "records": records})
        return {"transactional_id": None, "acks": self.acks,
                "timeout_ms": self.request_timeout_ms,
                "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()]}

    async def _await_response(self, pending: Any, batches: list[_Batch],
                              sem: trio.Semaphore) -> None:
        try:
            resp = await pending.response()
        except (KafkaError, KafkaConnectionError, KafkaTimeoutError) as exc:
            for batch in batches:
                self._retry_or_fail(batch, exc)
            return
        finally:
            sem.release()
        if resp is None:  # acks=0
            for batch in batches:
                batch.settle()
                self._settled(batch)
            return
        answers = {(t.name, p.index): p for t in resp.responses for p in t.partition_responses}
        for batch in batches:
            p = answers.get(batch.tp)
            if p is None:
                self._fail(batch, KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                             f"the broker did not answer for {batch.tp}"))
            elif p.error_code:
                self._retry_or_fail(batch, KafkaError(p.error_code, p.error_message or None))
            else:
                batch.settle(None, p.base_offset, p.log_append_time_ms)
                self._settled(batch)

    def _retry_or_fail(self, batch: _Batch, exc: BaseException) -> None:
        retriable = (isinstance(exc, KafkaConnectionError)
                     or (isinstance(exc, KafkaError)
                         and (exc.code in REFRESH_CODES or exc.retriable)
                         and exc.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        self._in_flight.discard(batch.tp)
        if retriable and not self._closed \
                and trio.current_time() - batch.created < self.delivery_timeout:
            batch.not_before = trio.current_time() + _RETRY_BACKOFF
            self._queues.setdefault(batch.tp, deque()).appendleft(batch)
            self._wakeup.set()
            return
        self._fail(batch, exc)

    def _fail(self, batch: _Batch, exc: BaseException) -> None:
        if batch.base_sequence != NO_SEQUENCE:
            self._new_id_needed = True
        batch.settle(exc)
        self._settled(batch)
