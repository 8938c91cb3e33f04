"""ErrorCode holds Kafka's numbers, names and retriable flags; unknown codes never crash.

The numbers and flags were taken from Kafka's `Errors.java` and the superclass of each exception
class it maps to; the spot checks pin them so an accidental edit shows up here.
"""
from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.errors import RETRIABLE_CODES, ErrorCode, KafkaError

HIGHEST = 133

SPOT_CHECKS = [
    (-1, "UNKNOWN_SERVER_ERROR"),
    (0, "NONE"),
    (1, "OFFSET_OUT_OF_RANGE"),
    (2, "CORRUPT_MESSAGE"),
    (3, "UNKNOWN_TOPIC_OR_PARTITION"),
    (6, "NOT_LEADER_OR_FOLLOWER"),
    (7, "REQUEST_TIMED_OUT"),
    (10, "MESSAGE_TOO_LARGE"),
    (16, "NOT_COORDINATOR"),
    (17, "INVALID_TOPIC_EXCEPTION"),
    (22, "ILLEGAL_GENERATION"),
    (25, "UNKNOWN_MEMBER_ID"),
    (27, "REBALANCE_IN_PROGRESS"),
    (35, "UNSUPPORTED_VERSION"),
    (36, "TOPIC_ALREADY_EXISTS"),
    (42, "INVALID_REQUEST"),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER"),
    (47, "INVALID_PRODUCER_EPOCH"),
    (51, "CONCURRENT_TRANSACTIONS"),
    (56, "KAFKA_STORAGE_ERROR"),
    (58, "SASL_AUTHENTICATION_FAILED"),
    (64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"),
    (68, "NON_EMPTY_GROUP"),
    (76, "UNSUPPORTED_COMPRESSION_TYPE"),
    (79, "MEMBER_ID_REQUIRED"),
    (82, "FENCED_INSTANCE_ID"),
    (87, "INVALID_RECORD"),
    (90, "PRODUCER_FENCED"),
    (100, "UNKNOWN_TOPIC_ID"),
    (106, "FETCH_SESSION_TOPIC_ID_ERROR"),
    (113, "STALE_MEMBER_EPOCH"),
    (119, "INVALID_REGISTRATION"),
    (120, "TRANSACTION_ABORTABLE"),
    (121, "INVALID_RECORD_STATE"),
    (124, "FENCED_STATE_EPOCH"),
    (129, "REBOOTSTRAP_REQUIRED"),
    (132, "STREAMS_TOPOLOGY_FENCED"),
    (133, "SHARE_SESSION_LIMIT_REACHED"),
]


@pytest.mark.parametrize(("code", "name"), SPOT_CHECKS)
def test_number_and_name(code: int, name: str) -> None:
    assert ErrorCode(code).name == name
    assert ErrorCode[name] == code
    assert ErrorCode.from_wire(code) is ErrorCode[name]


def test_every_code_from_minus_one_to_the_highest_is_a_member() -> None:
    values = [int(member) for member in ErrorCode]
    assert sorted(values) == list(range(-1, HIGHEST + 1))
    assert max(values) == HIGHEST


def test_no_aliases() -> None:
    # An alias (two names, one number) would make name lookups ambiguous.
    assert len(ErrorCode.__members__) == len(list(ErrorCode)) == HIGHEST + 2


RETRIABLE = [
    "CORRUPT_MESSAGE", "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT", "REPLICA_NOT_AVAILABLE", "NETWORK_EXCEPTION",
    "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR",
    "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "NOT_CONTROLLER",
    "CONCURRENT_TRANSACTIONS", "KAFKA_STORAGE_ERROR", "FETCH_SESSION_ID_NOT_FOUND",
    "INVALID_FETCH_SESSION_EPOCH", "LISTENER_NOT_FOUND", "FENCED_LEADER_EPOCH",
    "UNKNOWN_LEADER_EPOCH", "OFFSET_NOT_AVAILABLE", "PREFERRED_LEADER_NOT_AVAILABLE",
    "ELIGIBLE_LEADERS_NOT_AVAILABLE", "ELECTION_NOT_NEEDED", "UNSTABLE_OFFSET_COMMIT",
    "THROTTLING_QUOTA_EXCEEDED", "UNKNOWN_TOPIC_ID", "INCONSISTENT_TOPIC_ID",
    "FETCH_SESSION_TOPIC_ID_ERROR", "SHARE_SESSION_NOT_FOUND", "INVALID_SHARE_SESSION_EPOCH",
    "SHARE_SESSION_LIMIT_REACHED",
]

# Codes that sound transient but whose Java exception is not a RetriableException.
NOT_RETRIABLE = [
    "UNKNOWN_SERVER_ERROR", "NONE", "OFFSET_OUT_OF_RANGE", "BROKER_NOT_AVAILABLE",
    "MESSAGE_TOO_LARGE", "INVALID_TOPIC_EXCEPTION", "RECORD_LIST_TOO_LARGE", "ILLEGAL_GENERATION",
    "UNKNOWN_MEMBER_ID", "REBALANCE_IN_PROGRESS", "UNSUPPORTED_VERSION", "TOPIC_ALREADY_EXISTS",
    "OUT_OF_ORDER_SEQUENCE_NUMBER", "INVALID_PRODUCER_EPOCH", "REASSIGNMENT_IN_PROGRESS",
    "STALE_BROKER_EPOCH", "MEMBER_ID_REQUIRED", "PRODUCER_FENCED", "NEW_LEADER_ELECTED",
    "FENCED_MEMBER_EPOCH", "STALE_MEMBER_EPOCH", "TRANSACTION_ABORTABLE", "REBOOTSTRAP_REQUIRED",
]


@pytest.mark.parametrize("name", RETRIABLE)
def test_retriable(name: str) -> None:
    assert ErrorCode[name].retriable


@pytest.mark.parametrize("name", NOT_RETRIABLE)
def test_not_retriable(name: str) -> None:
    assert not ErrorCode[name].retriable


def test_retriable_set_is_exactly_the_flagged_members() -> None:
    assert RETRIABLE_CODES == {ErrorCode[name] for name in RETRIABLE}
    assert RETRIABLE_CODES == {member for member in ErrorCode if member.retriable}
    assert isinstance(RETRIABLE_CODES, frozenset)


def test_every_member_has_a_message() -> None:
    for member in ErrorCode:
        assert member.message and member.message.endswith("."), member


@pytest.mark.parametrize("code", [-32768, -2, HIGHEST + 1, 9999, 32767])
def test_unknown_code_decodes_to_a_pseudo_member(code: int) -> None:
    error = ErrorCode(code)
    assert isinstance(error, ErrorCode)
    assert error == code and int(error) == code
    assert error.name == f"UNKNOWN_CODE_{code}"
    assert not error.retriable
    assert not error.is_known
    assert str(code) in error.message
    assert ErrorCode.from_wire(code) is error  # one object per code
    assert error not in list(ErrorCode)
    assert error.name not in ErrorCode.__members__


def test_edges_of_the_table() -> None:
    assert ErrorCode.from_wire(HIGHEST).is_known
    assert not ErrorCode.from_wire(HIGHEST + 1).is_known
    assert ErrorCode.from_wire(-1).is_known
    assert not ErrorCode.from_wire(-2).is_known


def test_unknown_codes_do_not_become_members() -> None:
    ErrorCode(4242)
    assert sorted(int(member) for member in ErrorCode) == list(range(-1, HIGHEST + 1))


def test_pseudo_member_pickles() -> None:
    error = ErrorCode(777)
    assert pickle.loads(pickle.dumps(error)) is error


def test_non_int_still_raises() -> None:
    with pytest.raises(ValueError):
        ErrorCode("NOT_A_CODE")


def test_kafka_error_carries_code_and_message() -> None:
    exc = KafkaError(ErrorCode.NOT_COORDINATOR, "group g is elsewhere")
    assert exc.code is ErrorCode.NOT_COORDINATOR
    assert exc.message == "group g is elsewhere"
    assert exc.retriable
    assert "NOT_COORDINATOR (16)" in str(exc) and "group g is elsewhere" in str(exc)


def test_kafka_error_default_message_and_int_code() -> None:
    exc = KafkaError(17)
    assert exc.code is ErrorCode.INVALID_TOPIC_EXCEPTION
    assert exc.message is None
    assert not exc.retriable
    assert ErrorCode.INVALID_TOPIC_EXCEPTION.message in str(exc)


def test_kafka_error_accepts_unknown_code() -> None:
    exc = KafkaError(9999)
    assert exc.code == 9999 and exc.code.name == "UNKNOWN_CODE_9999"


def test_kafka_error_refuses_none() -> None:
    with pytest.raises(ValueError):
        KafkaError(ErrorCode.NONE)
    with pytest.raises(ValueError):
        KafkaError(0)


def test_module_imports_no_trio_and_no_broker() -> None:
    # A fresh interpreter: pytest-trio has already imported trio into this one.
    root = Path(__file__).resolve().parents[1]
    script = ("import sys, protocol.errors; "
              "bad = [m for m in sys.modules if m.split('.')[0] in ('trio', 'pybroker')]; "
              "assert not bad, bad")
    subprocess.run([sys.executable, "-c", script], cwd=root, check=True,
                   env={"PYTHONPATH": str(root)})
