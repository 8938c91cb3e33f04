"""The consumer group protocol's scenarios (KIP-848, `group.protocol=consumer`): members that
heartbeat with ConsumerGroupHeartbeat and are assigned by the broker's assignor, for every
client whose adapter has `start_consumer_member` (issue #33 item 3).

The group is watched through ConsumerGroupDescribe (`wire.consumer_group`), the neutral ground:
a scenario first checks that the client really joined by the consumer protocol, since some
clients fall back to the classic protocol without a word (franz-go does when its balancer does
not name a server-side assignor). The timings are those of the brokers' defaults, the same on
pybroker and on Apache Kafka 4.1.1: a 45 s session (group.consumer.session.timeout.ms), a 5 s
heartbeat interval (group.consumer.heartbeat.interval.ms), so a reconciliation takes a few
heartbeats and a killed member is noticed after 40 to 50 s.
"""
from __future__ import annotations

import time
from collections import Counter
from contextlib import contextmanager
from typing import Iterator

from compat import wire
from compat.base import Adapter, Member, stop_all, wait_for
from compat.scenarios import (
    commit_and_resume, group_of_three, neutral_records, scenario, sticky, unique,
)

SESSION_S = 45.0  # group.consumer.session.timeout.ms, the default of both brokers
HEARTBEAT_S = 5.0  # group.consumer.heartbeat.interval.ms, the same


def consumer_look(bootstrap: str, group: str, topic: str
                  ) -> tuple[str, str, dict[str, set[int]]]:
    """A consumer-protocol group per ConsumerGroupDescribe; "Stable" only once every member
    has reconciled to the target assignment (its epoch is the assignment epoch). A group not
    there yet, or not a consumer group (a client that fell back to the classic protocol),
    is "error N" with no members, and so never settles."""
    g = wire.consumer_group(bootstrap, group)
    if g.error != 0:
        return f"error {g.error}", "", {}
    state = g.state
    if state == "Stable" and any(m.epoch != g.assignment_epoch for m in g.members.values()):
        state = "Reconciling"
    return state, g.assignor, {mid: set(m.assigned.get(topic, []))
                               for mid, m in g.members.items()}


def _settled(bootstrap: str, group: str, topic: str, partitions: int,
             sizes: list[int]) -> bool:
    """Stable, every partition of `topic` held once, the members holding `sizes` of them."""
    state, _, assigned = consumer_look(bootstrap, group, topic)
    held = sorted(p for parts in assigned.values() for p in parts)
    return state == "Stable" and held == list(range(partitions)) and \
        sorted(len(p) for p in assigned.values()) == sorted(sizes)


@contextmanager
def _running(members: list[Member] | dict[str, Member]) -> Iterator[None]:
    """Every member (the list or dict as it is at the end) stopped on the way out, and shown
    first when the scenario fails."""
    def now() -> list[Member]:
        return list(members.values() if isinstance(members, dict) else members)
    try:
        yield
    except BaseException:
        for m in now():
            print("member:", m.debug())
        raise
    finally:
        stop_all(now())


@scenario("consumer-join", "Consumer protocol (KIP-848): one member joins, is assigned all six "
          "partitions by the broker, takes 60 records and commits them", timeout=120)
def consumer_join(a: Adapter, bootstrap: str) -> str | None:
    topic, group = unique(a, "cjoin"), unique(a, "g")
    wire.create_topic(bootstrap, topic, 6)
    values = [f"a-{i}".encode() for i in range(60)]
    neutral_records(bootstrap, topic, values, 6)
    member = a.start_consumer_member(bootstrap, group, topics=[topic])
    with _running([member]):
        wait_for(lambda: set(values) <= set(member.values()), 60, "the member to take 60 records")
        wait_for(lambda: _settled(bootstrap, group, topic, 6, [6]), 30,
                 "a stable consumer group of one holding the six partitions")
        g = wire.consumer_group(bootstrap, group)
        assert g.assignor == "uniform", f"assigned by {g.assignor!r}, not the default uniform"
        (only,) = g.members.values()
        assert only.epoch == g.group_epoch == g.assignment_epoch, \
            f"member epoch {only.epoch}, group epoch {g.group_epoch}, assignment epoch " \
            f"{g.assignment_epoch}"
        wait_for(lambda: wire.committed(bootstrap, group, topic, list(range(6))) ==
                 {p: 10 for p in range(6)}, 30, "the member to commit the end of every partition")
    wait_for(lambda: consumer_look(bootstrap, group, topic)[0] == "Empty", 30,
             "the group to be empty once the member left")
    return None


@scenario("consumer-third", "Consumer protocol: two share six partitions 3/3, a third joins: "
          "2/2/2 with no partition moved between the first two", timeout=180)
def consumer_third(a: Adapter, bootstrap: str) -> str | None:
    return group_of_three(a, bootstrap, "cthird",
                          lambda t, g: a.start_consumer_member(bootstrap, g, topics=[t]),
                          sticky("uniform"), consumer_look)


@scenario("consumer-leave", "Consumer protocol: one of three members (2/2/2) leaves; the other "
          "two take its partitions (3/3) without waiting for its session to expire",
          timeout=180)
def consumer_leave(a: Adapter, bootstrap: str) -> str | None:
    topic, group = unique(a, "cleave"), unique(a, "g")
    wire.create_topic(bootstrap, topic, 6)
    members: list[Member] = []
    with _running(members):
        for _ in range(3):
            members.append(a.start_consumer_member(bootstrap, group, topics=[topic]))
        wait_for(lambda: _settled(bootstrap, group, topic, 6, [2, 2, 2]), 90,
                 "three members sharing six partitions 2/2/2")
        _, _, before = consumer_look(bootstrap, group, topic)
        leaving = members.pop()
        left_at = time.monotonic()
        leaving.stop()
        wait_for(lambda: _settled(bootstrap, group, topic, 6, [3, 3]), SESSION_S - HEARTBEAT_S,
                 "the two left to share six partitions 3/3 before a session timeout")
        took = time.monotonic() - left_at
        _, _, after = consumer_look(bootstrap, group, topic)
        for mid, parts in after.items():
            assert before[mid] <= parts, \
                f"member {mid} had {sorted(before[mid])}, now {sorted(parts)}: it lost one"
        values = [f"b-{i}".encode() for i in range(60)]
        neutral_records(bootstrap, topic, values, 6)
        wait_for(lambda: set(values) <= {v for m in members for v in m.values()}, 30,
                 "the two left to take 60 records from all six partitions")
        assert took < SESSION_S, f"the leave took {took:.1f} s: a session expiry, not a leave"
    return None


@scenario("consumer-kill", "Consumer protocol: kill -9 of one of two members; its partitions "
          "move to the other once its session times out, not before", timeout=210)
def consumer_kill(a: Adapter, bootstrap: str) -> str | None:
    topic, group = unique(a, "ckill"), unique(a, "g")
    wire.create_topic(bootstrap, topic, 6)
    survivor = a.start_consumer_member(bootstrap, group, topics=[topic])
    victim = a.start_consumer_member(bootstrap, group, topics=[topic], killable=True)
    members = [survivor, victim]
    with _running(members):
        wait_for(lambda: _settled(bootstrap, group, topic, 6, [3, 3]), 90,
                 "two members sharing six partitions 3/3")
        killed_at = time.monotonic()
        victim.kill()
        members.remove(victim)
        values = [f"k-{i}".encode() for i in range(60)]
        neutral_records(bootstrap, topic, values, 6)
        wait_for(lambda: _settled(bootstrap, group, topic, 6, [6]), SESSION_S + 4 * HEARTBEAT_S,
                 "the survivor to hold all six partitions after the session timeout")
        took = time.monotonic() - killed_at
        # Its last heartbeat came at most one interval before the kill.
        assert took >= SESSION_S - HEARTBEAT_S - 1, \
            f"the killed member's partitions moved after {took:.1f} s, before its session " \
            f"({SESSION_S:.0f} s) could have expired"
        wait_for(lambda: set(values) <= set(survivor.values()), 30,
                 "the survivor to take the 60 records of all six partitions")
    return None


@scenario("consumer-static", "Consumer protocol, static membership: a member with a "
          "group.instance.id restarts within the session timeout and gets its partitions "
          "back; the group epoch does not move", timeout=180)
def consumer_static(a: Adapter, bootstrap: str) -> str | None:
    topic, group = unique(a, "cstatic"), unique(a, "g")
    wire.create_topic(bootstrap, topic, 4)
    members: dict[str, Member] = {}

    def by_instance() -> dict[str | None, tuple[str, int, set[int]]]:
        g = wire.consumer_group(bootstrap, group)
        return {m.instance_id: (mid, m.epoch, set(m.assigned.get(topic, [])))
                for mid, m in g.members.items()}

    with _running(members):
        for name in ("a", "b"):
            members[name] = a.start_consumer_member(bootstrap, group, topics=[topic],
                                                    instance_id=f"member-{name}")
        wait_for(lambda: _settled(bootstrap, group, topic, 4, [2, 2]), 90,
                 "two static members sharing four partitions 2/2")
        epoch, before = wire.consumer_group(bootstrap, group).group_epoch, by_instance()
        members.pop("a").stop()  # leaves with epoch -2: it may come back
        restarted = a.start_consumer_member(bootstrap, group, topics=[topic],
                                            instance_id="member-a")
        members["a"] = restarted
        wait_for(lambda: "member-a" in by_instance() and
                 by_instance()["member-a"][0] != before["member-a"][0] and
                 _settled(bootstrap, group, topic, 4, [2, 2]), SESSION_S - HEARTBEAT_S,
                 "member-a to be back under a new member id within its session")
        after, now = by_instance(), wire.consumer_group(bootstrap, group).group_epoch
        assert now == epoch, f"the group epoch went from {epoch} to {now}: a rebalance"
        assert after["member-b"] == before["member-b"], \
            f"member-b went from {before['member-b']} to {after['member-b']}"
        assert after["member-a"][2] == before["member-a"][2], \
            f"member-a had {sorted(before['member-a'][2])}, got {sorted(after['member-a'][2])}"
        values = [f"s-{i}".encode() for i in range(40)]
        neutral_records(bootstrap, topic, values, 4)  # value i on partition i % 4
        wait_for(lambda: set(values) <= {v for m in members.values() for v in m.values()}, 30,
                 "the 40 records after the restart")
        mine = {v for v in restarted.values() if v.startswith(b"s-")}
        assert mine, "the restarted member-a took nothing"
        for value in mine:
            p = int(value.split(b"-")[1]) % 4
            assert p in before["member-a"][2], \
                f"the restarted member-a took {value!r} of partition {p}, not one of its own"
    return None


@scenario("consumer-regex", "Consumer protocol, regex subscription (SubscribedTopicRegex, "
          "resolved by the broker): a topic created later that matches is assigned and read",
          timeout=150)
def consumer_regex(a: Adapter, bootstrap: str) -> str | None:
    prefix = unique(a, "cregex")
    first, later, other = f"{prefix}-one", f"{prefix}-two", f"x{prefix}-three"
    group = unique(a, "g")
    for topic in (first, other):
        wire.create_topic(bootstrap, topic, 2)
    neutral_records(bootstrap, first, [b"one-0", b"one-1"], 2)
    neutral_records(bootstrap, other, [b"three-0", b"three-1"], 2)
    # Anchored: a client may widen it to keep its own match-anywhere semantics (franz-go)
    regex = f"^{prefix}-.*"
    member = a.start_consumer_member(bootstrap, group, regex=regex)
    with _running([member]):
        wait_for(lambda: {b"one-0", b"one-1"} <= set(member.values()), 60,
                 f"the member to read {first}")
        (seen,) = wire.consumer_group(bootstrap, group).members.values()
        assert seen.subscribed_regex is not None and regex in seen.subscribed_regex, \
            f"the broker holds the regex {seen.subscribed_regex!r}: did the client send it?"
        wire.create_topic(bootstrap, later, 3)
        neutral_records(bootstrap, later, [b"two-0", b"two-1", b"two-2"], 3)
        wait_for(lambda: {b"two-0", b"two-1", b"two-2"} <= set(member.values()), 60,
                 f"the member to read {later}, created after it joined")
        (seen,) = wire.consumer_group(bootstrap, group).members.values()
        assert seen.assigned == {first: [0, 1], later: [0, 1, 2]}, \
            f"assigned {seen.assigned}, not the two topics whose names the regex matches"
        assert not any(v.startswith(b"three") for v in member.values()), \
            f"read {other}, whose name the regex does not match"
        counts = Counter(member.values())
        assert all(n == 1 for n in counts.values()), f"read twice: {counts}"
    return None


@scenario("consumer-commit-resume", "Consumer protocol: a group takes 8 of 20 records and "
          "commits at its member epoch, then resumes with the other 12", timeout=120)
def consumer_commit_resume(a: Adapter, bootstrap: str) -> str | None:
    return commit_and_resume(a, bootstrap, a.consume_consumer_group)
