"""Transaction administration: list and describe transactions, describe a partition's
producers, and abort a hanging transaction -- what `kafka-transactions` needs.

Routing follows Kafka's admin client: ListTransactions goes to every broker (each lists the
transactions it coordinates) and the answers are kept per broker; DescribeTransactions goes to
each transactional id's coordinator (FindCoordinator key type 1); DescribeProducers and the
abort (WriteTxnMarkers with an ABORT result, as the coordinator would send it) go to the
partition's leader, because the producer state and the markers live in the partition's log.
A coordinator that moved or is loading is looked up again and asked again until the timeout;
every other error is reported with Kafka's wording, since the tool prints it as it is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable

import trio

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError
from pybroker.client.cluster import TopicPartition
from pybroker.client.errors import KafkaConnectionError, KafkaTimeoutError

if TYPE_CHECKING:
    from pybroker.client.client import KafkaClient

__all__ = ["TransactionAdminMixin", "TransactionListing", "TransactionDescription",
           "ProducerState", "AbortTransactionSpec", "TRANSACTION_KEY_TYPE"]

TRANSACTION_KEY_TYPE = 1  # FindCoordinator's key type for a transactional id
_COORDINATOR_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
_LEADER_MOVED = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REPLICA_NOT_AVAILABLE,
                           ErrorCode.BROKER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                           ErrorCode.LEADER_NOT_AVAILABLE})


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str  # Kafka's name: Empty, Ongoing, PrepareCommit, CompleteAbort, ...


@dataclass(frozen=True)
class TransactionDescription:
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int | None  # None when no transaction is open
    topic_partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class ProducerState:
    """One producer a partition's leader knows; the optional fields are None where Kafka's
    ProducerState has an empty Optional (negative on the wire)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int | None
    current_transaction_start_offset: int | None


@dataclass(frozen=True)
class AbortTransactionSpec:
    topic_partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int

    def __str__(self) -> str:  # Kafka's AbortTransactionSpec.toString, which errors quote
        return (f"AbortTransactionSpec(topicPartition={self.topic_partition}, "
                f"producerId={self.producer_id}, producerEpoch={self.producer_epoch}, "
                f"coordinatorEpoch={self.coordinator_epoch})")


class TransactionAdminMixin:
    """Mixed into Admin; needs `self.client`, `self.timeout` and Admin's `for_leaders`."""

    client: "KafkaClient"
    timeout: float
    for_leaders: Callable[..., Awaitable[dict]]

    async def list_transactions(self, states: Iterable[str] = (),
                                producer_ids: Iterable[int] = (), duration_ms: int = -1
                                ) -> dict[int, list[TransactionListing]]:
        """broker id -> the transactions it coordinates that pass the filters (Kafka's
        `allByBrokerId`). A broker still loading its coordinator state is asked again; any
        other failure of any broker raises, as Kafka's result fails as a whole."""
        await self.client.refresh_metadata([])
        body = {"state_filters": list(states), "producer_id_filters": list(producer_ids),
                "duration_filter": duration_ms}
        found: dict[int, list[TransactionListing]] = {}
        errors: list[BaseException] = []

        async def ask(node_id: int) -> None:
            async def attempt() -> Any:
                resp = await self.client.request(
                    ApiKey.LIST_TRANSACTIONS, body, node_id=node_id,
                    min_version=1 if duration_ms >= 0 else None)
                if resp.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                    raise KafkaError(resp.error_code)
                return resp
            try:
                resp = await self.client.retrying(
                    attempt, timeout=self.timeout, refresh=False, any_retriable=False,
                    codes=frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}))
            except (KafkaError, KafkaConnectionError, KafkaTimeoutError) as exc:
                errors.append(exc)
                return
            code = ErrorCode.from_wire(resp.error_code)
            if code == ErrorCode.COORDINATOR_NOT_AVAILABLE:
                errors.append(KafkaError(code, f"ListTransactions request sent to broker "
                                         f"{node_id} failed because the coordinator is "
                                         "shutting down"))
            elif code != ErrorCode.NONE:
                errors.append(KafkaError(code, f"ListTransactions request sent to broker "
                                         f"{node_id} failed with an unexpected exception"))
            else:
                found[node_id] = [TransactionListing(t.transactional_id, t.producer_id,
                                                     t.transaction_state)
                                  for t in resp.transaction_states]

        async with trio.open_nursery() as nursery:
            for node_id in sorted(self.client.brokers):
                nursery.start_soon(ask, node_id)
        if errors:
            raise errors[0]
        return dict(sorted(found.items()))

    async def describe_transactions(self, transactional_ids: Iterable[str]
                                    ) -> dict[str, TransactionDescription | BaseException]:
        """transactional id -> its coordinator's description, or the exception (KafkaError
        TRANSACTIONAL_ID_NOT_FOUND for an id no coordinator knows)."""
        out: dict[str, TransactionDescription | BaseException] = {}
        for tid in dict.fromkeys(transactional_ids):
            try:
                out[tid] = await self._describe_transaction(tid)
            except (KafkaError, KafkaConnectionError, KafkaTimeoutError) as exc:
                out[tid] = exc
        return out

    async def _describe_transaction(self, tid: str) -> TransactionDescription:
        deadline = trio.current_time() + self.timeout

        async def attempt() -> tuple[int, Any]:
            # find_coordinator retries on its own: within what is left of this call's time.
            node = await self.client.find_coordinator(
                tid, key_type=TRANSACTION_KEY_TYPE,
                timeout=max(0.0, deadline - trio.current_time()))
            conn = await self.client.connection_to(node)
            resp = await conn.request(ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [tid]})
            state = next((s for s in resp.transaction_states if s.transactional_id == tid),
                         None)
            if state is None:
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "DescribeTransactions response "
                                 f"did not include transactionalId `{tid}`")
            if state.error_code in _COORDINATOR_MOVED:
                raise KafkaError(state.error_code)
            return node.node_id, state

        node_id, s = await self.client.retrying(attempt, timeout=self.timeout, refresh=False,
                                                codes=_COORDINATOR_MOVED, any_retriable=False)
        code = ErrorCode.from_wire(s.error_code)
        if code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
            raise KafkaError(code, f"DescribeTransactions request for transactionalId `{tid}` "
                             "failed because the ID could not be found")
        if code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            raise KafkaError(code, f"DescribeTransactions request for transactionalId `{tid}` "
                             "failed due to authorization failure")
        if code != ErrorCode.NONE:
            raise KafkaError(code, f"DescribeTransactions request for transactionalId `{tid}` "
                             "failed due to unexpected error")
        return TransactionDescription(
            node_id, s.transaction_state, s.producer_id, s.producer_epoch,
            s.transaction_timeout_ms,
            s.transaction_start_time_ms if s.transaction_start_time_ms >= 0 else None,
            frozenset(TopicPartition(t.topic, p) for t in s.topics for p in t.partitions))

    async def describe_producers(self, partitions: Iterable[TopicPartition], *,
                                 broker_id: int | None = None
                                 ) -> dict[TopicPartition, list[ProducerState] | BaseException]:
        """tp -> the producers its leader (or replica `broker_id`) knows, or the exception."""
        wanted = {tp: None for tp in partitions}

        async def send(node_id: int, batch: dict[TopicPartition, None]) -> dict:
            by_topic: dict[str, list[int]] = {}
            for tp in batch:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            resp = await self.client.request(
                ApiKey.DESCRIBE_PRODUCERS,
                {"topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]},
                node_id=node_id)
            answered: dict[TopicPartition, Any] = {}
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code:
                        answered[tp] = KafkaError(p.error_code, p.error_message or None)
                    else:
                        answered[tp] = [_producer_state(a) for a in p.active_producers]
            return answered

        if broker_id is None:
            return await self.for_leaders(wanted, send)
        try:
            return await send(broker_id, wanted)
        except (KafkaError, KafkaConnectionError, KafkaTimeoutError) as exc:
            return {tp: exc for tp in wanted}

    async def abort_transaction(self, topic: str, partition: int, producer_id: int,
                                producer_epoch: int, coordinator_epoch: int) -> None:
        """Write an ABORT marker for the producer's open transaction on one partition, at its
        leader (WriteTxnMarkers v1, as Kafka's Admin.abortTransaction does). Raises KafkaError
        with Kafka's message when the leader refuses."""
        spec = AbortTransactionSpec(TopicPartition(topic, partition), producer_id,
                                    producer_epoch, coordinator_epoch)
        body = {"markers": [{"producer_id": producer_id, "producer_epoch": producer_epoch,
                             "transaction_result": False, "coordinator_epoch": coordinator_epoch,
                             "topics": [{"name": topic, "partition_indexes": [partition]}]}]}

        async def attempt() -> None:
            node_id = await self.client.leader(topic, partition)
            resp = await self.client.request(ApiKey.WRITE_TXN_MARKERS, body, node_id=node_id)
            codes = [p.error_code for m in resp.markers if m.producer_id == producer_id
                     for t in m.topics if t.name == topic
                     for p in t.partitions if p.partition_index == partition]
            if len(codes) != 1:
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "WriteTxnMarkers response did "
                                 f"not include exactly one entry for {spec}")
            code = ErrorCode.from_wire(codes[0])
            if code == ErrorCode.NONE:
                return
            if code in _LEADER_MOVED:
                raise KafkaError(code)
            raise KafkaError(code, _abort_error(spec, code))

        # A topic the metadata does not know fails at once; a leader that moved is retried.
        await self.client.leader(topic, partition, refresh=True)
        await self.client.retrying(attempt, timeout=self.timeout, codes=_LEADER_MOVED,
                                   any_retriable=False)


def _abort_error(spec: AbortTransactionSpec, code: ErrorCode) -> str:
    """Kafka's AbortTransactionHandler wording for a refused abort."""
    if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        return f"WriteTxnMarkers request with {spec} failed due to cluster authorization error"
    if code == ErrorCode.INVALID_PRODUCER_EPOCH:
        return f"WriteTxnMarkers request with {spec} failed due an invalid producer epoch"
    if code == ErrorCode.TRANSACTION_COORDINATOR_FENCED:
        return (f"WriteTxnMarkers request with {spec} failed since the provided coordinator "
                f"epoch {spec.coordinator_epoch} has been fenced by the active coordinator")
    return (f"WriteTxnMarkers request with {spec} failed due to unexpected error: "
            f"{code.message}")


def _producer_state(a: Any) -> ProducerState:
    return ProducerState(
        a.producer_id, a.producer_epoch, a.last_sequence, a.last_timestamp,
        a.coordinator_epoch if a.coordinator_epoch >= 0 else None,
        a.current_txn_start_offset if a.current_txn_start_offset >= 0 else None)
