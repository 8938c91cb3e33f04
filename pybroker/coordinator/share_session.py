"""Share sessions (KIP-932): which partitions a member fetches from this broker, and the epoch
that orders its ShareFetch and ShareAcknowledge requests. Pure.

A session is keyed by (group, member) on each leader, as Kafka's `SharePartitionManager`
keys it. The request's ShareSessionEpoch decides:

    0   open a session (replacing one the member had); ShareFetch may not carry
        acknowledgements with it (INVALID_REQUEST: nothing is acquired in a new session),
        and ShareAcknowledge may not use it at all (INVALID_SHARE_SESSION_EPOCH)
    -1  close the session after this request: its acknowledgements are applied, then the
        member's acquired records are released; a ShareFetch may not ask for data with it
        (a partition listed without acknowledgements: INVALID_REQUEST)
    n   the session's next epoch, else INVALID_SHARE_SESSION_EPOCH; no session:
        SHARE_SESSION_NOT_FOUND. The epoch then rises, wrapping from 2**31-1 to 1.

A full cache (`group.share.max.share.sessions`) refuses a new session with
SHARE_SESSION_LIMIT_REACHED. Membership is not checked here (as in Kafka).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable
from uuid import UUID

from protocol.errors import ErrorCode

__all__ = ["INITIAL_EPOCH", "FINAL_EPOCH", "ShareSession", "SessionContext",
           "ShareSessionCache", "TopicIdPartition"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1

TopicIdPartition = tuple[UUID, int]


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int  # the epoch the next request must carry
    partitions: set[TopicIdPartition] = field(default_factory=set)
    # The connection the session was last used on (any object standing for it): when that
    # connection closes, the session closes (Kafka's ConnectionDisconnectListener).
    connection: object | None = None


@dataclass(frozen=True)
class SessionContext:
    error: ErrorCode
    session: ShareSession | None = None
    closing: bool = False


def _next(epoch: int) -> int:
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def fetch_context(self, group_id: str, member_id: str, epoch: int,
                      wanted: Iterable[TopicIdPartition], forgotten: Iterable[TopicIdPartition],
                      *, has_acks: bool, fetches_data: bool) -> SessionContext:
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            if has_acks:
                return SessionContext(ErrorCode.INVALID_REQUEST)
            if key not in self.sessions and len(self.sessions) >= self.max_sessions:
                return SessionContext(ErrorCode.SHARE_SESSION_LIMIT_REACHED)
            session = ShareSession(group_id, member_id, _next(INITIAL_EPOCH), set(wanted))
            self.sessions[key] = session
            return SessionContext(ErrorCode.NONE, session)
        context = self._existing(key, epoch)
        if context.session is None:
            return context
        if epoch == FINAL_EPOCH:
            if fetches_data:
                return SessionContext(ErrorCode.INVALID_REQUEST)
            return context
        context.session.partitions.difference_update(forgotten)
        context.session.partitions.update(wanted)
        return context

    def acknowledge_context(self, group_id: str, member_id: str, epoch: int) -> SessionContext:
        if epoch == INITIAL_EPOCH:
            return SessionContext(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        return self._existing((group_id, member_id), epoch)

    def _existing(self, key: tuple[str, str], epoch: int) -> SessionContext:
        session = self.sessions.get(key)
        if session is None:
            return SessionContext(ErrorCode.SHARE_SESSION_NOT_FOUND)
        if epoch == FINAL_EPOCH:
            return SessionContext(ErrorCode.NONE, session, closing=True)
        if epoch != session.epoch:
            return SessionContext(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        session.epoch = _next(session.epoch)
        return SessionContext(ErrorCode.NONE, session)

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def close_connection(self, connection: object) -> list[ShareSession]:
        """The sessions last used on `connection`, which closed: closed, and returned."""
        gone = [s for s in self.sessions.values() if s.connection is connection]
        for session in gone:
            del self.sessions[(session.group_id, session.member_id)]
        return gone
