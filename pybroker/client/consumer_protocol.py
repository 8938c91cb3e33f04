"""The "consumer" embedded protocol: subscriptions and assignments inside group messages.

JoinGroup carries each member's subscription and SyncGroup each member's assignment as opaque
bytes; for `protocol_type = "consumer"` Kafka's clients agree on this layout
(`ConsumerProtocolSubscription.json`, `ConsumerProtocolAssignment.json`): an int16 version, then
classic (non-flexible) fields. Later versions only append fields, so a reader parses the fields
it knows and ignores the rest, which is how a v0 reader copes with a v3 writer and why decoding
here never fails on trailing bytes. Malformed bytes raise ValueError.

We write version 0 of both (what every consumer can read), except that a cooperative member's
subscription is version 2: its owned partitions (v1) and generation (v2) are what the
cooperative-sticky leader keeps partitions by. We read versions 0-3.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from pybroker.client.cluster import TopicPartition

__all__ = ["Subscription", "Assignment", "encode_subscription", "decode_subscription",
           "encode_assignment", "decode_assignment", "PROTOCOL_TYPE"]

PROTOCOL_TYPE = "consumer"
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


@dataclass(frozen=True)
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None
    version: int = 0


@dataclass(frozen=True)
class Assignment:
    partitions: tuple[TopicPartition, ...] = field(default_factory=tuple)
    user_data: bytes | None = None
    version: int = 0

    def by_topic(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for tp in self.partitions:
            out.setdefault(tp.topic, []).append(tp.partition)
        return {t: sorted(ps) for t, ps in out.items()}


# -- writing -----------------------------------------------------------------------------------

def _string(s: str) -> bytes:
    data = s.encode("utf-8")
    return _I16.pack(len(data)) + data


def _bytes(b: bytes | None) -> bytes:
    return _I32.pack(-1) if b is None else _I32.pack(len(b)) + b


def _topic_partitions(parts: Mapping[str, Iterable[int]]) -> bytes:
    out = [_I32.pack(len(parts))]
    for topic, partitions in parts.items():
        plist = list(partitions)
        out.append(_string(topic))
        out.append(_I32.pack(len(plist)))
        out.extend(_I32.pack(p) for p in plist)
    return b"".join(out)


def encode_subscription(topics: Iterable[str], user_data: bytes | None = None, *,
                        owned_partitions: Iterable[TopicPartition] | None = None,
                        generation_id: int = -1) -> bytes:
    """Subscription v0: the topics a member wants, for the leader's assignor; v2 when
    `owned_partitions` is given (a cooperative member), with them and `generation_id`."""
    names = sorted(set(topics))
    version = 0 if owned_partitions is None else 2
    out = (_I16.pack(version) + _I32.pack(len(names)) + b"".join(_string(t) for t in names)
           + _bytes(user_data))
    if owned_partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(owned_partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        out += _topic_partitions(by_topic) + _I32.pack(generation_id)
    return out


def encode_assignment(partitions: Mapping[str, Iterable[int]],
                      user_data: bytes | None = None) -> bytes:
    """Assignment v0: the partitions the leader gives one member."""
    return _I16.pack(0) + _topic_partitions(partitions) + _bytes(user_data)


# -- reading -----------------------------------------------------------------------------------

class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError(f"consumer protocol data ends early at byte {self.pos}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    @property
    def at_end(self) -> bool:
        return self.pos >= len(self.data)

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def string(self, nullable: bool = False) -> str | None:
        n = self.i16()
        if n < 0:
            if nullable:
                return None
            raise ValueError("null string where a string is required")
        return self._take(n).decode("utf-8")

    def bytes_(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self._take(n)

    def count(self) -> int:
        n = self.i32()
        if n < 0:
            return 0
        if n > len(self.data):
            raise ValueError(f"array of {n} elements in {len(self.data)} bytes")
        return n

    def topic_partitions(self) -> tuple[TopicPartition, ...]:
        out: list[TopicPartition] = []
        for _ in range(self.count()):
            topic = self.string() or ""
            out.extend(TopicPartition(topic, self.i32()) for _ in range(self.count()))
        return tuple(out)


def decode_subscription(data: bytes) -> Subscription:
    r = _Reader(data)
    version = r.i16()
    topics = tuple(r.string() or "" for _ in range(r.count()))
    user_data = r.bytes_()
    owned: tuple[TopicPartition, ...] = ()
    generation, rack = -1, None
    if version >= 1 and not r.at_end:
        owned = r.topic_partitions()
    if version >= 2 and not r.at_end:
        generation = r.i32()
    if version >= 3 and not r.at_end:
        rack = r.string(nullable=True)
    return Subscription(topics, user_data, owned, generation, rack, version)


def decode_assignment(data: bytes | None) -> Assignment:
    """An empty or missing assignment (a member not yet synced) is an empty Assignment."""
    if not data:
        return Assignment()
    r = _Reader(data)
    version = r.i16()
    partitions = r.topic_partitions()
    user_data = r.bytes_() if not r.at_end else None
    return Assignment(partitions, user_data, version)
