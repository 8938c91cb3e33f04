"""A Produce verification's refusal as the producer gets it (Kafka 4.1.1's ReplicaManager):
the verifier (`txn_verifier.py`) says why the coordinator refused or could not answer, and
this says what a producer is told, for the Produce handler and for TxnOffsetCommit's batch
alike. Kafka 4.1.1 answers a coordinator that cannot answer now as NOT_ENOUGH_REPLICAS, which
every client retries without refreshing metadata, naming the coordinator's error; a
partition not added as INVALID_TXN_STATE with its message; the others with no message.
"""
from __future__ import annotations

from protocol.errors import ErrorCode

__all__ = ["VERIFICATION_RACED", "produce_error"]

# A batch refused because a marker landed on its partition while it waited (Kafka's
# VerificationGuard): asked again, the coordinator answers for the transaction as it is now.
VERIFICATION_RACED = ErrorCode.NOT_ENOUGH_REPLICAS

# The coordinator could not answer now: the producer retries (Kafka's ReplicaManager).
_UNANSWERED = frozenset({
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR})
_RACED_MESSAGE = ("The partition's transaction changed while the coordinator was asked "
                  "(retriable)")


def produce_error(code: ErrorCode) -> tuple[ErrorCode, str | None]:
    """A verification refusal as the producer gets it, with Kafka's message where Kafka
    gives one (its ReplicaManager's custom messages; none for the others)."""
    if code in _UNANSWERED:
        return ErrorCode.NOT_ENOUGH_REPLICAS, ("Unable to verify the partition has been added "
                                               f"to the transaction. Underlying error: {code.name}")
    if code == ErrorCode.INVALID_TXN_STATE:
        return code, "Partition was not added to the transaction"
    if code == VERIFICATION_RACED:
        return code, _RACED_MESSAGE
    return code, None
