"""The share-group offsets admin APIs (KIP-932: DescribeShareGroupOffsets,
AlterShareGroupOffsets, DeleteShareGroupOffsets) as raw requests, and the answers read as
{(topic, partition): value}; for the share admin tests on one broker
(tests/integration/test_share_admin.py) and on a cluster."""
from __future__ import annotations

from typing import Any

from protocol.api_keys import ApiKey
from tests.integration.raw import RawConnection


def describe(conn: RawConnection, group: str = "sg", topics: Any = None) -> Any:
    r = conn.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, {
        "groups": [{"group_id": group, "topics": topics}]})
    return r.groups[0]


def starts(group: Any) -> dict[tuple[str, int], int]:
    return {(t.topic_name, p.partition_index): p.start_offset
            for t in group.topics for p in t.partitions}


def alter(conn: RawConnection, offsets: dict[tuple[str, int], int], group: str = "sg") -> Any:
    topics: dict[str, list[dict]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append({"partition_index": partition,
                                             "start_offset": offset})
    return conn.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {
        "group_id": group, "topics": [{"topic_name": t, "partitions": ps}
                                      for t, ps in topics.items()]})


def alter_codes(r: Any) -> dict[tuple[str, int], int]:
    return {(t.topic_name, p.partition_index): p.error_code
            for t in r.responses for p in t.partitions}


def delete(conn: RawConnection, topics: list[str], group: str = "sg") -> Any:
    return conn.request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {
        "group_id": group, "topics": [{"topic_name": t} for t in topics]})
