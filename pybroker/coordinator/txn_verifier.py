"""Produce verification across brokers (Kafka's KIP-890 part 1, its AddPartitionsToTxnManager).

A transactional batch may only go to a partition of its producer's ongoing transaction:
otherwise a producer that skipped AddPartitionsToTxn (or whose transaction was aborted
meanwhile) leaves a transaction open in the partition that no coordinator will ever end, and
read_committed consumers stall behind it. The leader asks the transaction coordinator:
- in process when this broker coordinates the id (the coordinator's own answer to a
  verify-only AddPartitionsToTxn: a lookup, no await), so the producer gets the same answer
  wherever the partition's leader is, as from Kafka, whose leader asks even itself over the
  wire;
- else with AddPartitionsToTxn v4 (verifyOnly, the broker-to-broker batch form: all of a
  Produce's unverified partitions in one request) on the inter-broker listener.
The answer is cached where Kafka keeps it, in the partition's producer state: once the
producer's transaction is open in a partition (its first batch appended), later batches of the
same epoch go without asking, until the marker that ends it. So a transaction costs one round
trip per partition led elsewhere than its coordinator, never one per produce.

Errors a client cannot act on are translated as Kafka 4.1.1 does, in two steps. The leader's
asking (its AddPartitionsToTxnManager, `verify`): PRODUCER_FENCED gives INVALID_PRODUCER_EPOCH;
the coordinator refusing the leader itself (CLUSTER_AUTHORIZATION_FAILED: the inter-broker
principal may not CLUSTER_ACTION) gives INVALID_TXN_STATE whatever the version, since the
client must not see an error about the broker's own rights; a coordinator that cannot answer
says why (COORDINATOR_NOT_AVAILABLE also where no `__transaction_state` exists yet: it is not
created for this, the producer's FindCoordinator creates it); a partition not in the
transaction stays the coordinator's TRANSACTION_ABORTABLE (the Produce handler answers
INVALID_TXN_STATE to clients before v11, which predate it); an id the coordinator does not
know, or a producer id not the id's, stays INVALID_PRODUCER_ID_MAPPING. Then the append
(ReplicaManager, `coordinator/verification_errors.py`): a coordinator that cannot answer now (loading, moving,
unreachable, CONCURRENT_TRANSACTIONS) gives NOT_ENOUGH_REPLICAS, which every client retries
without refreshing metadata, its message naming the coordinator's error.

A marker that lands on a partition while its batch waits for the coordinator's answer may be
the end of that very transaction; the batch would reopen it where no coordinator will end it
again. As Kafka's VerificationGuard refuses such an append, the batch is refused retriably
(NOT_ENOUGH_REPLICAS) when any marker was written to the partition meanwhile, and its retry is
asked about afresh. The answer is used at once: the append follows without yielding.
"""
from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError
from protocol.topic_partition import TopicPartition
from pybroker.cluster.metadata import MetadataStore
from pybroker.coordinator.broker_channels import BrokerChannels
from pybroker.coordinator.txn_coordinator import TXN_TOPIC, TransactionCoordinator
from pybroker.coordinator.verification_errors import VERIFICATION_RACED
from pybroker.replica.manager import ReplicaManager

__all__ = ["TxnVerifier", "VERIFY_VERSION"]

log = logging.getLogger(__name__)

# AddPartitionsToTxn's broker-to-broker form (v4+); v5 only adds transaction version 2.
VERIFY_VERSION = 4
# Transactional ids whose partition is remembered; past it the memory starts over.
_MAX_CACHED_IDS = 100_000
# What the coordinator's answer becomes at the leader (Kafka's AddPartitionsToTxnManager).
_AT_LEADER = {
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: ErrorCode.INVALID_TXN_STATE,
}


class TxnVerifier:
    def __init__(self, node_id: int, metadata: MetadataStore, replicas: ReplicaManager,
                 transactions: TransactionCoordinator, channels: BrokerChannels) -> None:
        self.node_id = node_id
        self.metadata = metadata
        self.replicas = replicas
        self.transactions = transactions
        self.channels = channels
        # Each transactional id's partition of __transaction_state (Java's string hash is
        # the costly part of a lookup, and the topic's partition count never changes).
        self._partition_of: dict[str, int] = {}

    def _index(self, transactional_id: str) -> int | None:
        if TXN_TOPIC not in self.metadata.image.topics:
            return None
        if len(self._partition_of) >= _MAX_CACHED_IDS:
            self._partition_of.clear()
        index = self._partition_of[transactional_id] = \
            self.transactions.partition_for(transactional_id)
        return index

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: Sequence[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """The error of each partition the producer may not write to now; the others are
        absent (an empty dict: all verified)."""
        index = self._partition_of.get(transactional_id)
        if index is None:
            index = self._index(transactional_id)
            if index is None:  # no __transaction_state: no coordinator to ask
                return {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE for tp in partitions}
        transactions = self.transactions
        if index in transactions.owned:  # in process: the answer a leader elsewhere gets
            return self._at_leader(transactions.verify_partitions(
                transactional_id, producer_id, producer_epoch, partitions))
        state = self.metadata.image.partition(TXN_TOPIC, index)
        if state is None or state.leader == self.node_id:  # this broker's, still loading
            return {tp: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS for tp in partitions}
        unverified = [tp for tp in partitions
                      if not self.replicas.in_ongoing_transaction(tp, producer_id,
                                                                  producer_epoch)]
        if not unverified:
            return {}
        if state.leader < 0:
            return {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE for tp in unverified}
        guards = [(tp, self.replicas.verification_guard(tp)) for tp in unverified]
        refused = await self._ask(state.leader, transactional_id, producer_id, producer_epoch,
                                  unverified)
        for tp, guard in guards:
            if tp not in refused and self.replicas.verification_guard(tp) != guard:
                # A marker landed meanwhile: perhaps this transaction's, which the batch must
                # not reopen. Asked again, the coordinator answers for the transaction now.
                refused[tp] = VERIFICATION_RACED
        return refused

    async def _ask(self, coordinator: int, transactional_id: str, producer_id: int,
                   producer_epoch: int, partitions: list[TopicPartition]
                   ) -> dict[TopicPartition, ErrorCode]:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in partitions:
            by_topic[topic].append(partition)
        request = {"transactions": [{
            "transactional_id": transactional_id, "producer_id": producer_id,
            "producer_epoch": producer_epoch, "verify_only": True,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}]}
        try:
            response = await self.channels.request(coordinator, ApiKey.ADD_PARTITIONS_TO_TXN,
                                                   request, version=VERIFY_VERSION)
        except KafkaError as exc:  # a coordinator that cannot verify: Kafka goes on unverified
            log.warning("broker %d cannot verify transactions (%s): produce unverified",
                        coordinator, exc)
            return {}
        if response is None:  # unreachable, or no answer in time
            return {tp: ErrorCode.NETWORK_EXCEPTION for tp in partitions}
        if response.error_code:
            top = ErrorCode(response.error_code)
            log.warning("AddPartitionsToTxn verification by broker %d refused: %s",
                        coordinator, top.name)
            return {tp: _AT_LEADER.get(top, top) for tp in partitions}
        answered = {(topic.name, p.partition_index): ErrorCode(p.partition_error_code)
                    for txn in response.results_by_transaction for topic in txn.topic_results
                    for p in topic.results_by_partition}
        # A partition the coordinator left out is not verified.
        return self._at_leader({tp: answered.get(tp, ErrorCode.TRANSACTION_ABORTABLE)
                                  for tp in partitions})

    @staticmethod
    def _at_leader(answered: dict[TopicPartition, ErrorCode]
                   ) -> dict[TopicPartition, ErrorCode]:
        """The coordinator's refusals as the leader takes them (Kafka's
        AddPartitionsToTxnManager); the partitions verified left out."""
        return {tp: _AT_LEADER.get(code, code) for tp, code in answered.items() if code}
