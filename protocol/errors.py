"""Kafka's error codes, named and numbered as Kafka does, with Kafka's retriable flag.

The int16 codes are part of the protocol: clients switch on the number (and on whether it is
retriable: retry, refresh metadata, or give up), so a wrong number or a wrong flag changes client
behaviour even when the bytes are well formed. The names are Kafka's enum names, so a code here
greps straight to Kafka's `Errors.java` and to client docs. `retriable` is True exactly where
Kafka's exception class for the code extends `RetriableException` (directly or through
`InvalidMetadataException` / `RefreshRetriableException`).

A peer may send a code newer than this table. Decoding must never fail on that, so
`ErrorCode(n)` for an unknown `n` returns a pseudo-member named `UNKNOWN_CODE_<n>` that is not
retriable (what Kafka's own clients do with a code they do not know) and is not listed among the
members.

`KafkaError` is how a handler reports a failure: the dispatcher turns it into the response's
error code, so handlers need not build error bodies for the common case.
"""
from __future__ import annotations

from enum import IntEnum

__all__ = ["ErrorCode", "KafkaError", "RETRIABLE_CODES"]


class ErrorCode(IntEnum):
    """Every error code Kafka defines, from -1 to 133 with no gaps."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132
    SHARE_SESSION_LIMIT_REACHED = 133

    @classmethod
    def _missing_(cls, value: object) -> ErrorCode | None:
        """Make `ErrorCode(n)` total over ints: an unknown code becomes a pseudo-member.

        Pseudo-members are cached (one object per code) outside the enum's own value map, so
        they never show up in iteration, `__members__` or membership tests. Non-int values
        still fail with ValueError, as for any enum.
        """
        if not isinstance(value, int):
            return None
        code = int(value)
        pseudo = _PSEUDO_MEMBERS.get(code)
        if pseudo is None:
            pseudo = int.__new__(cls, code)
            pseudo._name_ = f"UNKNOWN_CODE_{code}"
            pseudo._value_ = code
            if -0x8000 <= code <= 0x7FFF:  # only what fits the wire's int16 is worth keeping
                _PSEUDO_MEMBERS[code] = pseudo
        return pseudo

    @classmethod
    def from_wire(cls, code: int) -> ErrorCode:
        """The code as read from a frame; never raises for an int, known or not."""
        return cls(code)

    @property
    def is_known(self) -> bool:
        """False for a pseudo-member made from a code this table does not define."""
        return self._name_ in type(self).__members__

    @property
    def retriable(self) -> bool:
        """Whether Kafka's clients may retry the request unchanged (after a metadata refresh)."""
        return self in RETRIABLE_CODES

    @property
    def message(self) -> str:
        """A short human description, for logs and for responses' error_message fields."""
        return _MESSAGES.get(self, f"Unknown error code {int(self)}.")


_PSEUDO_MEMBERS: dict[int, ErrorCode] = {}

# Exactly the codes whose Kafka exception class is a RetriableException. Some look surprising
# (ELECTION_NOT_NEEDED, NETWORK_EXCEPTION) but come from the Java class hierarchy
# (InvalidMetadataException), which is what clients act on.
RETRIABLE_CODES: frozenset[ErrorCode] = frozenset({
    ErrorCode.CORRUPT_MESSAGE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.NOT_CONTROLLER,
    ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
    ErrorCode.INVALID_FETCH_SESSION_EPOCH,
    ErrorCode.LISTENER_NOT_FOUND,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.OFFSET_NOT_AVAILABLE,
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
    ErrorCode.ELECTION_NOT_NEEDED,
    ErrorCode.UNSTABLE_OFFSET_COMMIT,
    ErrorCode.THROTTLING_QUOTA_EXCEEDED,
    ErrorCode.UNKNOWN_TOPIC_ID,
    ErrorCode.INCONSISTENT_TOPIC_ID,
    ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
    ErrorCode.SHARE_SESSION_NOT_FOUND,
    ErrorCode.INVALID_SHARE_SESSION_EPOCH,
    ErrorCode.SHARE_SESSION_LIMIT_REACHED,
})

_E = ErrorCode
_MESSAGES: dict[ErrorCode, str] = {
    _E.UNKNOWN_SERVER_ERROR: "The broker hit an unexpected error while handling the request.",
    _E.NONE: "No error.",
    _E.OFFSET_OUT_OF_RANGE: "The offset is outside the range this partition holds.",
    _E.CORRUPT_MESSAGE: "A record failed its CRC check, is oversized, or is otherwise malformed.",
    _E.UNKNOWN_TOPIC_OR_PARTITION: "This broker has no such topic or partition.",
    _E.INVALID_FETCH_SIZE: "The fetch size asked for is not valid.",
    _E.LEADER_NOT_AVAILABLE: "The partition has no leader right now; an election may be running.",
    _E.NOT_LEADER_OR_FOLLOWER: "This broker is not the leader (or a replica) of the partition.",
    _E.REQUEST_TIMED_OUT: "The request did not complete in time.",
    _E.BROKER_NOT_AVAILABLE: "The broker is not available.",
    _E.REPLICA_NOT_AVAILABLE: "The replica asked for is not available.",
    _E.MESSAGE_TOO_LARGE: "A record batch is larger than the broker accepts.",
    _E.STALE_CONTROLLER_EPOCH: "The request came from a controller that has been replaced.",
    _E.OFFSET_METADATA_TOO_LARGE: "The metadata string committed with the offset is too long.",
    _E.NETWORK_EXCEPTION: "The connection dropped before a response arrived.",
    _E.COORDINATOR_LOAD_IN_PROGRESS: "The coordinator is still loading its state.",
    _E.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    _E.NOT_COORDINATOR: "This broker is not the coordinator for that group or transaction.",
    _E.INVALID_TOPIC_EXCEPTION:
        "The topic name is not valid, or the topic cannot be used this way.",
    _E.RECORD_LIST_TOO_LARGE: "A record batch is larger than the log segment size.",
    _E.NOT_ENOUGH_REPLICAS: "Fewer replicas are in sync than min.insync.replicas requires.",
    _E.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
        "The records were written, but fewer replicas than required are in sync.",
    _E.INVALID_REQUIRED_ACKS: "The produce request's acks value is not valid.",
    _E.ILLEGAL_GENERATION: "The group generation in the request is not the current one.",
    _E.INCONSISTENT_GROUP_PROTOCOL:
        "The member's protocols do not match the group's, or none were given.",
    _E.INVALID_GROUP_ID: "The group id is not valid.",
    _E.UNKNOWN_MEMBER_ID: "The coordinator does not know this member.",
    _E.INVALID_SESSION_TIMEOUT: "The session timeout is outside the range the broker allows.",
    _E.REBALANCE_IN_PROGRESS: "The group is rebalancing; the member must rejoin.",
    _E.INVALID_COMMIT_OFFSET_SIZE: "The size of the offset commit is not valid.",
    _E.TOPIC_AUTHORIZATION_FAILED: "Not authorized to access the topic.",
    _E.GROUP_AUTHORIZATION_FAILED: "Not authorized to access the group.",
    _E.CLUSTER_AUTHORIZATION_FAILED: "Not authorized for this cluster operation.",
    _E.INVALID_TIMESTAMP: "A record timestamp is outside the accepted range.",
    _E.UNSUPPORTED_SASL_MECHANISM: "The broker does not offer that SASL mechanism.",
    _E.ILLEGAL_SASL_STATE: "The request is not allowed in the current SASL state.",
    _E.UNSUPPORTED_VERSION: "The broker does not support this version of the API.",
    _E.TOPIC_ALREADY_EXISTS: "A topic with that name already exists.",
    _E.INVALID_PARTITIONS: "The number of partitions is not valid.",
    _E.INVALID_REPLICATION_FACTOR: "The replication factor is not valid for this cluster.",
    _E.INVALID_REPLICA_ASSIGNMENT: "The replica assignment is not valid.",
    _E.INVALID_CONFIG: "The configuration is not valid.",
    _E.NOT_CONTROLLER: "This broker is not the controller.",
    _E.INVALID_REQUEST: "The request is malformed or not valid for this broker.",
    _E.UNSUPPORTED_FOR_MESSAGE_FORMAT: "The topic's message format does not support this request.",
    _E.POLICY_VIOLATION: "The request breaks a configured policy.",
    _E.OUT_OF_ORDER_SEQUENCE_NUMBER: "The producer's sequence number is not the one expected next.",
    _E.DUPLICATE_SEQUENCE_NUMBER: "The producer's sequence number was already written.",
    _E.INVALID_PRODUCER_EPOCH: "The producer epoch is older than the current one.",
    _E.INVALID_TXN_STATE: "The transactional operation is not allowed in the current state.",
    _E.INVALID_PRODUCER_ID_MAPPING:
        "The producer id is not the one assigned to this transactional id.",
    _E.INVALID_TRANSACTION_TIMEOUT: "The transaction timeout exceeds transaction.max.timeout.ms.",
    _E.CONCURRENT_TRANSACTIONS: "Another operation on this transaction is still in progress.",
    _E.TRANSACTION_COORDINATOR_FENCED: "The transaction coordinator sending markers was replaced.",
    _E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Not authorized to use the transactional id.",
    _E.SECURITY_DISABLED: "Security features are disabled on this broker.",
    _E.OPERATION_NOT_ATTEMPTED: "The operation was skipped because another in the batch failed.",
    _E.KAFKA_STORAGE_ERROR: "A disk error occurred while accessing the log.",
    _E.LOG_DIR_NOT_FOUND: "The log directory is not one the broker is configured with.",
    _E.SASL_AUTHENTICATION_FAILED: "SASL authentication failed.",
    _E.UNKNOWN_PRODUCER_ID: "The broker holds no state for this producer id.",
    _E.REASSIGNMENT_IN_PROGRESS: "A partition reassignment is in progress.",
    _E.DELEGATION_TOKEN_AUTH_DISABLED: "Delegation tokens are not enabled.",
    _E.DELEGATION_TOKEN_NOT_FOUND: "The delegation token was not found.",
    _E.DELEGATION_TOKEN_OWNER_MISMATCH: "The principal is not the token's owner or renewer.",
    _E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED:
        "Delegation token requests are not allowed on this kind of connection.",
    _E.DELEGATION_TOKEN_AUTHORIZATION_FAILED: "Not authorized for the delegation token.",
    _E.DELEGATION_TOKEN_EXPIRED: "The delegation token has expired.",
    _E.INVALID_PRINCIPAL_TYPE: "The principal type is not supported.",
    _E.NON_EMPTY_GROUP: "The group still has members.",
    _E.GROUP_ID_NOT_FOUND: "No group has that id.",
    _E.FETCH_SESSION_ID_NOT_FOUND: "The fetch session was not found.",
    _E.INVALID_FETCH_SESSION_EPOCH: "The fetch session epoch is not the expected one.",
    _E.LISTENER_NOT_FOUND: "The leader has no listener matching the one the request came on.",
    _E.TOPIC_DELETION_DISABLED: "Topic deletion is disabled.",
    _E.FENCED_LEADER_EPOCH: "The request's leader epoch is older than the broker's.",
    _E.UNKNOWN_LEADER_EPOCH: "The request's leader epoch is newer than the broker's.",
    _E.UNSUPPORTED_COMPRESSION_TYPE: "The client cannot read the partition's compression type.",
    _E.STALE_BROKER_EPOCH: "The broker epoch is out of date.",
    _E.OFFSET_NOT_AVAILABLE:
        "The new leader's high watermark has not caught up, so offsets are not yet reliable.",
    _E.MEMBER_ID_REQUIRED: "The member must join again with the member id it was given.",
    _E.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred leader is not available.",
    _E.GROUP_MAX_SIZE_REACHED: "The group is already at its maximum size.",
    _E.FENCED_INSTANCE_ID: "Another member has registered with this group.instance.id.",
    _E.ELIGIBLE_LEADERS_NOT_AVAILABLE: "No eligible leader is available for the partition.",
    _E.ELECTION_NOT_NEEDED: "The partition does not need a leader election.",
    _E.NO_REASSIGNMENT_IN_PROGRESS: "No partition reassignment is in progress.",
    _E.GROUP_SUBSCRIBED_TO_TOPIC:
        "The group is subscribed to the topic, so its offsets cannot be deleted.",
    _E.INVALID_RECORD: "A record failed the broker's validation.",
    _E.UNSTABLE_OFFSET_COMMIT: "Offsets are still pending in an open transaction.",
    _E.THROTTLING_QUOTA_EXCEEDED: "The throttling quota was exceeded.",
    _E.PRODUCER_FENCED: "A newer producer with the same transactional id has fenced this one.",
    _E.RESOURCE_NOT_FOUND: "The request names a resource that does not exist.",
    _E.DUPLICATE_RESOURCE: "The request names the same resource twice.",
    _E.UNACCEPTABLE_CREDENTIAL: "The credential does not meet the acceptance criteria.",
    _E.INCONSISTENT_VOTER_SET: "The sender or receiver is not one of the expected voters.",
    _E.INVALID_UPDATE_VERSION: "The update version is not valid.",
    _E.FEATURE_UPDATE_FAILED: "The finalized features could not be updated.",
    _E.PRINCIPAL_DESERIALIZATION_FAILURE: "The forwarded request's principal could not be read.",
    _E.SNAPSHOT_NOT_FOUND: "The snapshot was not found.",
    _E.POSITION_OUT_OF_RANGE: "The position is outside the snapshot.",
    _E.UNKNOWN_TOPIC_ID: "This broker has no topic with that id.",
    _E.DUPLICATE_BROKER_REGISTRATION: "That broker id is already registered.",
    _E.BROKER_ID_NOT_REGISTERED: "That broker id is not registered.",
    _E.INCONSISTENT_TOPIC_ID: "The topic id does not match the one in the log.",
    _E.INCONSISTENT_CLUSTER_ID: "The cluster id does not match this cluster's.",
    _E.TRANSACTIONAL_ID_NOT_FOUND: "The transactional id was not found.",
    _E.FETCH_SESSION_TOPIC_ID_ERROR: "The fetch session used topic ids inconsistently.",
    _E.INELIGIBLE_REPLICA: "The proposed ISR contains a replica that is not eligible.",
    _E.NEW_LEADER_ELECTED: "The partition state was updated, but the leader has changed.",
    _E.OFFSET_MOVED_TO_TIERED_STORAGE: "The offset now lives in tiered storage.",
    _E.FENCED_MEMBER_EPOCH: "The member epoch is fenced; the member must rejoin.",
    _E.UNRELEASED_INSTANCE_ID: "Another member still holds this instance id.",
    _E.UNSUPPORTED_ASSIGNOR: "The group does not support that assignor or version.",
    _E.STALE_MEMBER_EPOCH: "The member epoch is stale; retry with the current one.",
    _E.MISMATCHED_ENDPOINT_TYPE: "The request went to the wrong type of endpoint.",
    _E.UNSUPPORTED_ENDPOINT_TYPE: "This endpoint type is not supported.",
    _E.UNKNOWN_CONTROLLER_ID: "That controller id is not known.",
    _E.UNKNOWN_SUBSCRIPTION_ID: "The telemetry subscription id is unknown or out of date.",
    _E.TELEMETRY_TOO_LARGE: "The telemetry payload is larger than the broker accepts.",
    _E.INVALID_REGISTRATION: "The controller rejected the broker registration.",
    _E.TRANSACTION_ABORTABLE: "The transaction hit an error; abort it to go on.",
    _E.INVALID_RECORD_STATE: "The record's state does not allow that acknowledgement.",
    _E.SHARE_SESSION_NOT_FOUND: "The share session was not found.",
    _E.INVALID_SHARE_SESSION_EPOCH: "The share session epoch is not the expected one.",
    _E.FENCED_STATE_EPOCH: "The share-group state epoch does not match.",
    _E.INVALID_VOTER_KEY: "The voter key does not match the receiving replica.",
    _E.DUPLICATE_VOTER: "The voter is already in the voter set.",
    _E.VOTER_NOT_FOUND: "The voter is not in the voter set.",
    _E.INVALID_REGULAR_EXPRESSION: "The regular expression is not valid.",
    _E.REBOOTSTRAP_REQUIRED: "The client's metadata is stale; it must bootstrap again.",
    _E.STREAMS_INVALID_TOPOLOGY: "The streams topology is not valid.",
    _E.STREAMS_INVALID_TOPOLOGY_EPOCH: "The streams topology epoch is not valid.",
    _E.STREAMS_TOPOLOGY_FENCED: "The streams topology epoch is out of date.",
    _E.SHARE_SESSION_LIMIT_REACHED: "No more share sessions can be opened.",
}
del _E


class KafkaError(Exception):
    """A failure a handler reports to the client as an error code (and optional message).

    Raising `ErrorCode.NONE` is a bug (it would report success), so it is refused with
    ValueError. An int is accepted and decoded like a code from the wire.
    """

    code: ErrorCode
    message: str | None

    def __init__(self, code: ErrorCode | int, message: str | None = None) -> None:
        code = ErrorCode.from_wire(code)
        if code == ErrorCode.NONE:
            raise ValueError("KafkaError needs an error code, not NONE")
        super().__init__(code, message)
        self.code = code
        self.message = message

    @property
    def retriable(self) -> bool:
        return self.code.retriable

    def __str__(self) -> str:
        return f"{self.code.name} ({int(self.code)}): {self.message or self.code.message}"
