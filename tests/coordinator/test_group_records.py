"""__consumer_offsets records: Kafka's byte layouts, round trips, and replay reproducing state."""
from __future__ import annotations

import struct

import pytest

from protocol.records.record import build_batch
from protocol.records.record import iter_records_in
from pybroker.coordinator.internal_topic import java_string_hash, partition_for
from pybroker.coordinator.group_records import (
    GroupMetadataRecord, GroupRecord, GroupSnapshot, MemberSnapshot, OffsetAndMetadata,
    OffsetCommitRecord, OffsetKey, consumer_subscription_topics, decode_record, encode_record,
)
from pybroker.coordinator.group_state import GroupStateMachine, LeavingMember
from tests.coordinator.driver import Driver, subscription


def _str(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def _nstr(s: str | None) -> bytes:
    return struct.pack(">h", -1) if s is None else _str(s)


def _bytes(b: bytes) -> bytes:
    return struct.pack(">i", len(b)) + b


MEMBER = MemberSnapshot("m-1", "inst", "client", "/10.0.0.1", 300_000, 45_000, b"sub", b"asg")
SNAPSHOT = GroupSnapshot("consumer", 7, "range", "m-1", 1_700_000_000_000, (MEMBER,))


# -- Kafka's layouts, byte for byte ------------------------------------------------------------

def test_offset_commit_key_and_value_v3_bytes() -> None:
    record = encode_record(OffsetCommitRecord(
        OffsetKey("grp", "topic", 4), OffsetAndMetadata(42, "meta", 1234, leader_epoch=5)))
    assert record.key == struct.pack(">h", 1) + _str("grp") + _str("topic") + \
        struct.pack(">i", 4)
    assert record.value == struct.pack(">hqi", 3, 42, 5) + _str("meta") + \
        struct.pack(">q", 1234)


def test_offset_value_with_expiry_is_v1() -> None:
    value = OffsetAndMetadata(42, "", 1000, expire_timestamp=9000)
    record = encode_record(OffsetCommitRecord(OffsetKey("g", "t", 0), value))
    assert record.value == struct.pack(">hq", 1, 42) + _str("") + struct.pack(">qq", 1000, 9000)
    assert decode_record(record.key, record.value) == OffsetCommitRecord(
        OffsetKey("g", "t", 0), value)


def test_group_metadata_key_and_value_v3_bytes() -> None:
    record = encode_record(GroupMetadataRecord("grp", SNAPSHOT))
    assert record.key == struct.pack(">h", 2) + _str("grp")
    member = (_str("m-1") + _nstr("inst") + _str("client") + _str("/10.0.0.1")
              + struct.pack(">ii", 300_000, 45_000) + _bytes(b"sub") + _bytes(b"asg"))
    assert record.value == (struct.pack(">h", 3) + _str("consumer") + struct.pack(">i", 7)
                            + _nstr("range") + _nstr("m-1")
                            + struct.pack(">qi", 1_700_000_000_000, 1) + member)


def test_older_value_versions_decode() -> None:
    key = struct.pack(">h", 0) + _str("g") + _str("t") + struct.pack(">i", 1)
    v0 = struct.pack(">hq", 0, 10) + _str("m") + struct.pack(">q", 55)
    assert decode_record(key, v0) == OffsetCommitRecord(
        OffsetKey("g", "t", 1), OffsetAndMetadata(10, "m", 55))
    gkey = struct.pack(">h", 2) + _str("g")
    member_v0 = (_str("m-1") + _str("c") + _str("/h") + struct.pack(">i", 10_000)
                 + _bytes(b"s") + _bytes(b"a"))
    v0_group = (struct.pack(">h", 0) + _str("consumer") + struct.pack(">i", 2)
                + _nstr("range") + _nstr("m-1") + struct.pack(">i", 1) + member_v0)
    decoded = decode_record(gkey, v0_group)
    assert isinstance(decoded, GroupMetadataRecord) and decoded.value is not None
    assert decoded.value.current_state_timestamp == -1
    m = decoded.value.members[0]
    assert (m.member_id, m.group_instance_id, m.rebalance_timeout, m.session_timeout) == \
        ("m-1", None, 10_000, 10_000)  # no rebalance timeout before v1: the session's


def test_flexible_v4_values_decode() -> None:
    # v4: compact strings (length + 1 as an unsigned varint) and empty tag sections.
    v4 = struct.pack(">hqi", 4, 9, 2) + b"\x03ab" + struct.pack(">q", 77) + b"\x00"
    key = encode_record(OffsetCommitRecord(OffsetKey("g", "t", 0), None)).key
    assert decode_record(key, v4) == OffsetCommitRecord(
        OffsetKey("g", "t", 0), OffsetAndMetadata(9, "ab", 77, leader_epoch=2))


def test_tombstones_and_unknown_keys() -> None:
    for rec in (OffsetCommitRecord(OffsetKey("g", "t", 0), None),
                GroupMetadataRecord("g", None)):
        encoded = encode_record(rec)
        assert encoded.value is None and decode_record(encoded.key, None) == rec
    assert decode_record(struct.pack(">h", 3) + _str("g"), b"whatever") is None  # KIP-848
    assert decode_record(None, b"x") is None
    with pytest.raises(Exception):
        decode_record(struct.pack(">h", 1) + b"\x00", None)


@pytest.mark.parametrize("record", [
    OffsetCommitRecord(OffsetKey("g", "t", 0), OffsetAndMetadata(0)),
    OffsetCommitRecord(OffsetKey("g\u00e9", "t.x_y", 2**31 - 1),
                       OffsetAndMetadata(2**62, "\u2603" * 10, -1, 3)),
    GroupMetadataRecord("g", GroupSnapshot("consumer", 1, None, None, -1)),
    GroupMetadataRecord("g", SNAPSHOT),
    GroupMetadataRecord("g", GroupSnapshot("connect", 3, "v1", "a", 5, (
        MEMBER, MemberSnapshot("b", None, "", "", 1, 2, b"", b"")))),
])
def test_round_trip(record: object) -> None:
    encoded = encode_record(record)  # type: ignore[arg-type]
    assert decode_record(encoded.key, encoded.value) == record


def test_consumer_subscription_topics() -> None:
    assert consumer_subscription_topics(subscription("a", "b")) == frozenset({"a", "b"})
    assert consumer_subscription_topics(subscription()) == frozenset()
    assert consumer_subscription_topics(b"\x00") is None
    assert consumer_subscription_topics(struct.pack(">hi", 0, 5)) is None


# -- partitioning like Kafka -------------------------------------------------------------------

def test_java_string_hash_and_partition() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("abc") == 96354
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00  # UTF-16 surrogates


# -- replay ------------------------------------------------------------------------------------

def _busy_history() -> Driver:
    """Groups in every durable shape: stable, emptied, static, standalone, deleted."""
    d = Driver()
    ids, gen = d.stable_group(3, protocols=(("range", subscription("t")),))
    d.commit({("t", p): 10 + p for p in range(3)}, member_id=ids[0], generation=gen,
             metadata="m")
    d.commit({("t", 0): 20}, member_id=ids[1], generation=gen)
    d.leave(ids[2])
    d.join(ids[0], protocols=(("range", subscription("t")),))
    d.join(ids[1], protocols=(("range", subscription("t")),))
    g2 = d.m.groups["g"].generation
    d.sync(ids[1], g2)
    d.sync(ids[0], g2, {ids[0]: b"x", ids[1]: b"y"})
    d.commit({("t", 1): 1}, group="solo")
    d.commit({("t", 1): 2, ("u", 0): 3}, group="solo")
    d.commit({("t", 0): 1}, group="gone")
    d.run(d.m.delete_groups(["gone"]))
    d.commit({("t", 0): 5}, group="emptied", member_id="", generation=-1)
    x = d.joined(d.join(group="emptied")).member_id
    d.leave(LeavingMember(x), group="emptied")
    s = d.joined(d.join(group="static", instance="inst-1")).member_id
    d.sync(s, 1, {s: b"S"}, group="static", instance="inst-1")
    d.joined(d.join(group="static", instance="inst-1"))  # restarted: new id persisted
    d.run(d.m.delete_offsets("solo", [("u", 0)]))
    return d


def _state(m: GroupStateMachine) -> tuple:
    groups = {gid: (g.state, g.snapshot()) for gid, g in m.groups.items()}
    return groups, m.offsets


def test_replaying_the_record_stream_reproduces_the_state() -> None:
    d = _busy_history()
    fresh = GroupStateMachine(d.config)
    for record in d.log:
        fresh.replay(record)
    assert _state(fresh) == _state(d.m)
    assert set(fresh.groups) == {"g", "solo", "emptied", "static"}
    assert fresh.groups["emptied"].state.value == "Empty"
    assert fresh.groups["g"].state.value == "Stable"


def test_replay_through_encoded_batches() -> None:
    """The same, through the bytes that go to the log: one batch per outcome."""
    d = _busy_history()
    blob = b"".join(build_batch([encode_record(r, 1)]) for r in d.log)
    fresh = GroupStateMachine(d.config)
    for rec in iter_records_in(blob):
        decoded = decode_record(rec.key, rec.value)
        assert decoded is not None
        fresh.replay(decoded)
    assert _state(fresh) == _state(d.m)


def test_compacted_stream_reproduces_the_state() -> None:
    """What compaction keeps (the last record per key, tombstones included) is enough."""
    d = _busy_history()
    last: dict[bytes | None, GroupRecord] = {}
    for record in d.log:
        key = encode_record(record).key
        last.pop(key, None)  # the survivor sits where the key was last written
        last[key] = record
    fresh = GroupStateMachine(d.config)
    for kept in last.values():
        fresh.replay(kept)
    assert _state(fresh) == _state(d.m)


def test_tombstones_remove_offsets_and_groups() -> None:
    """Each tombstone removes what its key names: an offset, or a group's metadata (its
    offsets go by their own tombstones, as in Kafka; an upgrade to a consumer group keeps
    them)."""
    m = GroupStateMachine()
    m.replay(OffsetCommitRecord(OffsetKey("g", "t", 0), OffsetAndMetadata(1)))
    m.replay(OffsetCommitRecord(OffsetKey("g", "t", 1), OffsetAndMetadata(2)))
    m.replay(GroupMetadataRecord("g", GroupSnapshot("consumer", 4, None, None, 99)))
    assert m.groups["g"].generation == 4 and len(m.offsets["g"]) == 2
    m.replay(OffsetCommitRecord(OffsetKey("g", "t", 0), None))
    assert set(m.offsets["g"]) == {("t", 1)}
    m.replay(GroupMetadataRecord("g", None))
    assert m.groups["g"].generation == 0 and set(m.offsets["g"]) == {("t", 1)}
    m.replay(OffsetCommitRecord(OffsetKey("g", "t", 1), None))
    m.replay(GroupMetadataRecord("g", None))
    assert "g" not in m.groups and "g" not in m.offsets
    m.replay(OffsetCommitRecord(OffsetKey("x", "t", 0), None))  # nothing to remove: fine


def test_loaded_members_expire_unless_they_return() -> None:
    m = GroupStateMachine()
    m.replay(GroupMetadataRecord("g", SNAPSHOT))
    group = m.groups["g"]
    assert group.state.value == "Stable" and group.static_members == {"inst": "m-1"}
    m.after_load(1000)
    assert m.next_deadline() == 1000 + MEMBER.session_timeout
    m.expire(1000 + MEMBER.session_timeout)
    # The only member is gone: the group empties (a new generation), and says so durably.
    assert group.state.value == "Empty" and not group.members and group.generation == 8
