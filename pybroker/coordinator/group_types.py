"""The group state machine's vocabulary: its config, the requests and results of its
operations, and the `Outcome` every operation returns.

Apart from `group_state` so that `group_offsets` (the durable half of the machine) can name
them without importing the machine that mixes it in.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar, Union

from protocol.errors import ErrorCode
from pybroker.coordinator.group_metadata import Protocols
from pybroker.coordinator.group_records import GroupRecord

__all__ = [
    "GroupConfig", "JoinRequest", "JoinedMember", "JoinResult", "SyncRequest", "SyncResult",
    "LeavingMember", "LeaveResult", "Completion", "Outcome",
]

T = TypeVar("T")


@dataclass(frozen=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000


# -- requests and responses --------------------------------------------------------------------

@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    protocol_type: str
    protocols: Protocols
    session_timeout_ms: int
    rebalance_timeout_ms: int
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = False  # JoinGroup v4+: hand out an id first
    reason: str | None = None


@dataclass(frozen=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[JoinedMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True)
class SyncRequest:
    group_id: str
    member_id: str
    generation_id: int
    assignments: dict[str, bytes] = field(default_factory=dict)
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class LeaveResult:
    error: ErrorCode
    members: tuple[tuple[LeavingMember, ErrorCode], ...] = ()


Completion = tuple[int, Union[JoinResult, SyncResult]]


@dataclass
class Outcome(Generic[T]):
    """What an operation produced: persist `records`, then answer `response` and completions."""

    response: T | None = None
    records: list[GroupRecord] = field(default_factory=list)
    completions: list[Completion] = field(default_factory=list)
