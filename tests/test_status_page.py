"""The status page's parts without a broker: the sampler's bounds, the chart, escaping,
routing and pagination over a fake broker state of a thousand partitions. The browser test
with a real broker is tests/integration/test_status_page.py."""
from __future__ import annotations

import re
import uuid
from types import SimpleNamespace

from pybroker.cluster.image import BrokerInfo, MetadataImage, PartitionState, TopicInfo
from pybroker.coordinator.group_records import OffsetAndMetadata
from pybroker.ops.group_lag import PartitionLag, group_lag, total_lag
from pybroker.stats.request_stats import RequestStats
from pybroker.ops.status.html import href
from pybroker.ops.status.page import StatusPage
from pybroker.ops.status.sampler import Counters, Timeline
from pybroker.ops.status.svg import human, line_chart

EVIL = '</td><script>alert("x")</script>&'


def counters(bytes_in: int = 0, lag: dict[str, int] | None = None) -> Counters:
    return Counters(bytes_in, 0, 0, lag or {})


def test_timeline_rates_are_differences_over_time_and_never_negative() -> None:
    timeline = Timeline(points=10)
    timeline.take(100.0, counters(1000))
    assert list(timeline.times) == []  # one sample gives no rate yet
    timeline.take(102.0, counters(5000))
    timeline.take(104.0, counters(0))  # a deleted topic took its totals with it
    assert list(timeline.throughput["bytes in/s"]) == [2000.0, 0.0]
    assert timeline.series(timeline.throughput["bytes in/s"]) == [(102.0, 2000.0),
                                                                   (104.0, 0.0)]


def test_timeline_is_bounded_in_points_and_in_groups() -> None:
    timeline = Timeline(points=5, max_groups=2)
    for i in range(50):
        timeline.take(float(i), counters(i, {"a": 1, "b": 50 + i, "c": 100 - i, f"g{i}": 0}))
    assert len(timeline.times) == 5
    assert all(len(v) <= 5 for v in timeline.throughput.values())
    # The two largest lags now are b (99) and c (51); a and every g-i were pushed out.
    assert set(timeline.lag) == {"b", "c"}
    assert list(timeline.lag["b"]) == [95, 96, 97, 98, 99]
    # A series younger than the window lines up with the latest sample times.
    timeline.take(50.0, counters(0, {"new": 1000, "b": 1}))
    assert timeline.series(timeline.lag["new"]) == [(50.0, 1000)]


def test_chart_draws_each_series_and_escapes_names() -> None:
    svg = line_chart("lag <x>", [(EVIL, [(0.0, 5.0), (30.0, 10.0)]), ("short", [(1.0, 1.0)])],
                     now=60.0, window=60.0)
    assert svg.count("<polyline") == 1  # a single point is not a line
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "lag &lt;x&gt;" in svg
    assert "collecting samples" in line_chart("t", [("s", [(1.0, 1.0)])], now=1, window=60)
    assert [human(v) for v in (0, 999, 1500, 2_500_000, 3e9, 0.5)] == \
        ["0", "999", "1.5k", "2.5M", "3.0G", "0.5"]


def test_group_lag_is_unknown_without_a_replica_and_never_negative() -> None:
    hosted = {("t", 0): SimpleNamespace(high_watermark=10),
              ("t", 1): SimpleNamespace(high_watermark=3)}
    replicas = SimpleNamespace(hosted_partition=lambda t, p: hosted.get((t, p)))
    offsets = {("t", 0): OffsetAndMetadata(4), ("t", 1): OffsetAndMetadata(5),
               ("t", 2): OffsetAndMetadata(1)}
    lags = list(group_lag(offsets, replicas))  # type: ignore[arg-type]
    assert lags == [PartitionLag("t", 0, 4, 10), PartitionLag("t", 1, 5, 3),
                    PartitionLag("t", 2, 1, None)]
    assert [lag.lag for lag in lags] == [6, 0, None]
    assert total_lag(iter(lags)) == 6


def fake_page(partitions: int, page_size: int = 100) -> StatusPage:
    topic = TopicInfo("big", uuid.uuid4(), tuple(
        PartitionState(p, 1, 0, (1, 2), (1,) if p == 7 else (1, 2))
        for p in range(partitions)))
    image = MetadataImage("cid", 1, {1: BrokerInfo(1, "h1", 9092), 2: BrokerInfo(2, "h2", 9092)},
                          {"big": topic})
    state = SimpleNamespace(groups={}, offsets={EVIL: {("big", 0): OffsetAndMetadata(0)}})
    return StatusPage(1, SimpleNamespace(image=image),  # type: ignore[arg-type]
                      SimpleNamespace(hosted_partition=lambda t, p: None),  # type: ignore
                      SimpleNamespace(state=state), RequestStats(),  # type: ignore[arg-type]
                      page_size=page_size)


def rows(html: str, table_id: str) -> int:
    match = re.search(f'<table id="{table_id}">(.*?)</table>', html, re.S)
    assert match, table_id
    return match.group(1).count("<tr>") - 1  # the head's row


def test_a_thousand_partitions_are_served_a_page_at_a_time() -> None:
    page = fake_page(1000)
    first = page("/topic/big")
    assert first is not None and first.status == 200
    html = first.body.decode()
    assert rows(html, "partitions") == 100
    assert "page 1 of 10 (1000 partitions)" in html and 'href="/topic/big/2"' in html
    assert "(out: 2)" in html  # partition 7's missing replica
    last = page("/topic/big/10")
    assert last is not None and rows(last.body.decode(), "partitions") == 100
    over = page("/topic/big/11")
    assert over is not None and over.status == 404
    overview = page("/")
    assert overview is not None and overview.status == 200
    assert re.search(r"<b class=bad>1</b><span>under-replicated</span>",
                     overview.body.decode())


def test_user_input_is_escaped_and_unknown_paths_are_not_ours() -> None:
    page = fake_page(3)
    overview = page("/")
    assert overview is not None
    html = overview.body.decode()
    assert "<script" not in html and "&lt;/td&gt;&lt;script&gt;" in html
    # The link to the group percent-encodes it, and that link leads to the group.
    link = href("group", EVIL)
    assert f'href="{link}"' in html and "<" not in link and '"' not in link
    group = page(link)
    assert group is not None and group.status == 200 and "<script" not in group.body.decode()
    missing = page("/topic/%3Cscript%3E")
    assert missing is not None and missing.status == 404
    assert "&lt;script&gt;" in missing.body.decode() and "<script" not in missing.body.decode()
    for path in ("/topicsx", "/topics/abc", "/topics/0", "/topic/", "/topic/big/1/2",
                 "/groups/-1", "/nothing"):
        assert page(path) is None, path
    assert page("/topics/2") is not None and page("/topics/2").status == 404  # type: ignore
