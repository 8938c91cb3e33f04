"""franz-go (kgo for producing and consuming, kadm for administration), driven through
compat/go (a Go program shared by every cell of a run: `compat.helper_process`).

Reading to the end keeps the control records (kgo.KeepControlRecords) so that the position
reported is where franz-go's own cursor went, past transaction markers.
"""
from __future__ import annotations

from typing import NoReturn, Sequence

from compat.base import Got, Member, NotApplicable
from compat.helper_process import Helper, HelperAdapter, HelperMember, go_binary, got_from

STATIC_RANGE = ("static members use kgo.RangeBalancer (Java's default first assignor): with "
                "kgo's default cooperative-sticky, a restarted static leader balances the group "
                "itself and, finding the assignment handed back differs from a fresh balance, "
                "rejoins to force a rebalance (kgo's KIP-814 workaround; the same on Apache "
                "Kafka 4.1.1 when the leader restarts)")

WIDENED_REGEX = ("kgo sends a regex R as .*(?:(?:R)).* (SubscribedTopicRegex), keeping Go's "
                 "match-anywhere semantics against the broker's whole-name match")

STATIC_LEAVE_848 = ("kgo v1.22.3 (the newest the Go module proxy serves) leaves a KIP-848 group "
                    "as a static member with MemberEpoch -2 but no InstanceId (leave848); Apache "
                    "Kafka 4.1.1 and pybroker answer INVALID_REQUEST 'InstanceId can't be "
                    "null.', so the member stays until its session expires and a restart is "
                    "refused (UNRELEASED_INSTANCE_ID) until then")

END_OFFSET_AS_NONE = ("kadm's ListOffsetsAfterMilli answers a time past every record with the "
                      "end offset (its documented fallback): reported as none")


NO_SHARE_PLAYER = ("franz-go's adapter cannot run a share consumer: kgo v1.22.3 has one "
                   "(kgo.ShareGroup, Record.Ack), but compat/go does not drive it, and "
                   "compat/differential.json records no Apache Kafka 4.1.1 observation "
                   "of it for a cell to expect")


class FranzGo(HelperAdapter):
    name = "franz-go"
    order = 60
    tool = "go"
    helper = Helper("franz-go", lambda: [str(go_binary()), "franz"])

    def start_member_as(self, bootstrap: str, topic: str, group: str, *,
                        cooperative: bool = False, instance_id: str | None = None) -> Member:
        if instance_id is not None and not cooperative:
            self.note(STATIC_RANGE)
        return super().start_member_as(bootstrap, topic, group, cooperative=cooperative,
                                       instance_id=instance_id)

    def start_consumer_member(self, bootstrap: str, group: str, *,
                              topics: Sequence[str] = (), regex: str | None = None,
                              instance_id: str | None = None, killable: bool = False) -> Member:
        # kgo.ServerSideBalancer with its cooperative-sticky balancer: the broker's "uniform"
        if instance_id is not None:
            raise NotApplicable(STATIC_LEAVE_848)
        if regex is not None:
            self.note(WIDENED_REGEX)
        return HelperMember(self.helper, killable=killable, bootstrap=bootstrap, group=group,
                            topics=list(topics), regex=regex or "", instance_id=instance_id,
                            group_protocol="consumer")

    def consume_consumer_group(self, bootstrap: str, topic: str, group: str,
                               count: int) -> list[Got]:
        return [got_from(d) for d in self._call("consume_group", bootstrap=bootstrap,
                                                  topic=topic, group=group, count=count,
                                                  group_protocol="consumer")]

    def offsets_for_times(self, bootstrap: str, topic: str,
                          times: dict[int, int]) -> dict[int, tuple[int, int] | None]:
        found = super().offsets_for_times(bootstrap, topic, times)
        if any(at is None for at in found.values()):
            self.note(END_OFFSET_AS_NONE)
        return found

    def share_client(self) -> NoReturn:
        raise NotApplicable(NO_SHARE_PLAYER)


ADAPTER = FranzGo()
