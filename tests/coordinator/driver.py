"""Driving the pure group state machine the way the trio façade does, without an event loop.

`Driver` hands out request tokens, replays each outcome's records (as the façade does after
writing them), remembers every completion by token, and keeps the record stream so that tests
can replay it into a fresh machine.
"""
from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass, field
from typing import Any

from protocol.errors import ErrorCode
from pybroker.coordinator.group_records import GroupRecord, OffsetAndMetadata, record_group
from pybroker.coordinator.group_state import (
    GroupConfig, GroupStateMachine, JoinRequest, JoinResult, LeavingMember, Outcome,
    SyncRequest, SyncResult,
)

RANGE = (("range", b"r-meta"),)


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


@dataclass
class Driver:
    config: GroupConfig = field(default_factory=lambda: GroupConfig(
        min_session_timeout_ms=1000, initial_rebalance_delay_ms=0))
    now: int = 0

    def __post_init__(self) -> None:
        ids = itertools.count(1)
        self.m = GroupStateMachine(self.config, new_member_id=lambda p: f"{p}-{next(ids)}")
        self.tokens = itertools.count(1)
        self.answers: dict[int, Any] = {}
        self.log: list[GroupRecord] = []
        # While set, an outcome with records is held as unwritten, its answers with it.
        self.writes_held = False
        self.held: list[Outcome[Any]] = []

    def _run(self, outcome: Outcome[Any]) -> Any:
        if outcome.records and self.writes_held:
            self.held.append(outcome)
        else:
            self._written(outcome)
        return outcome.response

    def _written(self, outcome: Outcome[Any]) -> None:
        """What the façade does once an outcome's records are written: replay them, tell the
        machine, release the answers."""
        for record in outcome.records:
            self.m.replay(record, loading=False)
        self.log.extend(outcome.records)
        if outcome.records:
            self.m.written({record_group(r) for r in outcome.records}, self.now)
        for token, result in outcome.completions:
            assert token not in self.answers, f"token {token} answered twice"
            self.answers[token] = result

    def release_writes(self) -> None:
        """The held writes complete now (a paused follower of a cluster resumed)."""
        self.writes_held = False
        for outcome in self.held:
            self._written(outcome)
        self.held.clear()

    # -- requests -------------------------------------------------------------------------------
    def join(self, member_id: str = "", *, group: str = "g", protocols: Any = RANGE,
             session: int = 10_000, rebalance: int = 30_000, instance: str | None = None,
             v4: bool = False, client: str = "c", protocol_type: str = "consumer") -> int:
        """Send a JoinGroup; returns its token (the answer may come now or later)."""
        token = next(self.tokens)
        req = JoinRequest(group, member_id, protocol_type, tuple(protocols), session, rebalance,
                          instance, client, "/127.0.0.1", require_known_member_id=v4)
        response = self._run(self.m.join(req, self.now, token))
        if response is not None:
            self.answers[token] = response
        return token

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
             *, group: str = "g", instance: str | None = None) -> int:
        token = next(self.tokens)
        req = SyncRequest(group, member_id, generation, assignments or {}, instance)
        response = self._run(self.m.sync(req, self.now, token))
        if response is not None:
            self.answers[token] = response
        return token

    def heartbeat(self, member_id: str, generation: int, *, group: str = "g",
                  instance: str | None = None) -> ErrorCode:
        return self._run(self.m.heartbeat(group, member_id, instance, generation, self.now))

    def leave(self, *members: LeavingMember | str, group: str = "g") -> Any:
        leaving = [m if isinstance(m, LeavingMember) else LeavingMember(m) for m in members]
        return self._run(self.m.leave(group, leaving, self.now))

    def commit(self, offsets: dict[tuple[str, int], int], *, group: str = "g",
               member_id: str = "", generation: int = -1, instance: str | None = None,
               metadata: str = "") -> dict[tuple[str, int], ErrorCode]:
        values = {tp: OffsetAndMetadata(o, metadata, self.now) for tp, o in offsets.items()}
        return self._run(self.m.commit_offsets(group, member_id, instance, generation, values,
                                               self.now))

    def expire(self, until: int) -> None:
        """Advance the clock to `until`, firing every timer on the way, in deadline order."""
        while True:
            deadline = self.m.next_deadline()
            if deadline is None or deadline > until:
                break
            self.now = max(self.now, deadline)
            self._run(self.m.expire(self.now))
        self.now = until

    def run(self, outcome: Outcome[Any]) -> Any:
        return self._run(outcome)

    # -- answers --------------------------------------------------------------------------------
    def answer(self, token: int) -> Any:
        assert token in self.answers, f"request {token} is still waiting"
        return self.answers[token]

    def waiting(self, token: int) -> bool:
        return token not in self.answers

    def joined(self, token: int) -> JoinResult:
        result = self.answer(token)
        assert isinstance(result, JoinResult)
        return result

    def synced(self, token: int) -> SyncResult:
        result = self.answer(token)
        assert isinstance(result, SyncResult)
        return result

    # -- composite steps ------------------------------------------------------------------------
    def new_member(self, **kw: Any) -> str:
        """A v4 dynamic member's id, through the MEMBER_ID_REQUIRED round trip; the second
        join is left waiting (token in `self.last`)."""
        first = self.joined(self.join(v4=True, **kw))
        assert first.error == ErrorCode.MEMBER_ID_REQUIRED
        self.last = self.join(first.member_id, v4=True, **kw)
        return first.member_id

    def stable_group(self, n: int, **kw: Any) -> tuple[list[str], int]:
        """n members joined and synced (leader assigns b"a-<id>"); (member ids, generation)."""
        tokens = []
        ids: list[str] = []
        for i in range(n):
            new = self.new_member(client=f"c{i}", **kw)
            tokens = [self.last] + [self.join(m, **kw) for m in ids]  # the others rejoin
            ids.append(new)
        tokens = tokens[1:] + tokens[:1]  # in member order, like `ids`
        results = [self.joined(t) for t in tokens]
        assert all(r.error == ErrorCode.NONE for r in results), results
        generation = results[0].generation_id
        leader = results[0].leader_id
        syncs = {m: self.sync(m, generation, {x: f"a-{x}".encode() for x in ids}
                              if m == leader else None, **_group_kw(kw))
                 for m in sorted(ids, key=lambda x: x == leader)}
        assert all(self.synced(t).error == ErrorCode.NONE for t in syncs.values())
        return ids, generation


def _group_kw(kw: dict[str, Any]) -> dict[str, Any]:
    return {"group": kw["group"]} if "group" in kw else {}
