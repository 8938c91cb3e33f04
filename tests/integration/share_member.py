"""A share-group member speaking the raw protocol, and what the share-group wire tests share:
short locks and limits, a producer, and the acquired ranges and acknowledgement codes of a
response."""
from __future__ import annotations

import uuid
from typing import Any, Sequence

from confluent_kafka import Producer

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from tests.integration.raw import RawConnection, coordinator_address, create_topic, \
    enable_share_groups, leader_address

LOCK_MS = 1000
SHORT = {"group.share.record.lock.duration.ms": str(LOCK_MS),
         "group.share.min.record.lock.duration.ms": str(LOCK_MS),
         "group.share.min.heartbeat.interval.ms": "1000",
         "group.share.delivery.count.limit": "2",
         "group.share.heartbeat.interval.ms": "1234",
         "share.coordinator.state.topic.num.partitions": "3",
         "share.coordinator.state.topic.replication.factor": "1",
         "share.coordinator.state.topic.min.isr": "1"}
ACCEPT, RELEASE, REJECT = 1, 2, 3


class Member:
    """One share-group member speaking the raw protocol, as a client does: heartbeats and
    describes on a connection to the group's coordinator (`conn`), fetches and
    acknowledgements on one to the leader of the topic's partition 0 (`data`); on one broker
    both are the same broker, on a node of several or a cluster not always."""

    def __init__(self, bootstrap: str, group: str = "sg", topic: str = "q") -> None:
        self.group, self.topic = group, topic
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.topic_id: uuid.UUID | None = None
        self.reconnect(bootstrap)

    def reconnect(self, bootstrap: str) -> None:
        """New connections, found afresh from `bootstrap` (after a restart of the broker)."""
        self.bootstrap = bootstrap
        self.conn = RawConnection(coordinator_address(bootstrap, self.group))
        self._data: RawConnection | None = None

    @property
    def data(self) -> RawConnection:
        if self._data is None:
            self._data = RawConnection(leader_address(self.bootstrap, self.topic, 0))
        return self._data

    def close(self) -> None:
        self.conn.close()
        if self._data is not None:
            self._data.close()

    def heartbeat(self, epoch: int, topics: list[str] | None = None) -> Any:
        return self.conn.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
            "group_id": self.group, "member_id": self.member_id, "member_epoch": epoch,
            "rack_id": None, "subscribed_topic_names": topics})

    def join(self) -> Any:
        r = self.heartbeat(0, [self.topic])
        assert r.error_code == 0, ErrorCode(r.error_code).name
        self.topic_id = r.assignment.topic_partitions[0].topic_id
        return r

    def fetch(self, acks: Sequence[tuple[int, int, int]] = (), *, epoch: int | None = None,
              max_wait_ms: int = 0, max_records: int = 500) -> Any:
        r = self.data.request(ApiKey.SHARE_FETCH, 1, {
            "group_id": self.group, "member_id": self.member_id,
            "share_session_epoch": self.epoch if epoch is None else epoch,
            "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "max_records": max_records, "batch_size": max_records,
            "topics": [{"topic_id": self.topic_id, "partitions": [{
                "partition_index": 0, "acknowledgement_batches": [
                    {"first_offset": f, "last_offset": last, "acknowledge_types": [t]}
                    for f, last, t in acks]}]}],
            "forgotten_topics_data": []})
        if r.error_code == 0 and epoch is None:
            self.epoch = 1 if self.epoch == 0 else self.epoch + 1
        return r

    def acknowledge(self, acks: list[tuple[int, int, int]], *, epoch: int | None = None) -> Any:
        r = self.data.request(ApiKey.SHARE_ACKNOWLEDGE, 1, {
            "group_id": self.group, "member_id": self.member_id,
            "share_session_epoch": self.epoch if epoch is None else epoch,
            "topics": [{"topic_id": self.topic_id, "partitions": [{
                "partition_index": 0, "acknowledgement_batches": [
                    {"first_offset": f, "last_offset": last, "acknowledge_types": [t]}
                    for f, last, t in acks]}]}]})
        if r.error_code == 0 and epoch is None:
            self.epoch += 1
        return r


def acquired(response: Any) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in response.responses for p in t.partitions for a in p.acquired_records]


def ack_codes(response: Any) -> list[int]:
    """AcknowledgeErrorCode of a ShareFetch, ErrorCode of a ShareAcknowledge."""
    return [p.get("acknowledge_error_code", p.error_code)
            for t in response.responses for p in t.partitions]


def produce(bootstrap: str, count: int, topic: str = "q") -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        p.produce(topic, f"v{i}".encode())
    assert p.flush(10) == 0


def started(bootstrap: str, records: int = 5) -> Member:
    """A member that joined and opened its session (the share-partition starts at the end:
    share.auto.offset.reset is latest), then `records` records produced."""
    enable_share_groups(bootstrap)
    create_topic(bootstrap, "q")
    m = Member(bootstrap)
    m.join()
    assert m.fetch().error_code == 0
    produce(bootstrap, records)
    return m
