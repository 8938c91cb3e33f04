"""The status page (issue #17): what an operator opens in a browser to see a broker —
brokers and controller, topics and their partitions, consumer groups with their members,
assignments and lag, and charts of throughput and lag over the last minutes.

Routes (GET or HEAD; served by `ops/endpoints.py` on the HTTP side door):

    /                        overview: brokers, summary, charts, first topics and groups
    /topics[/<page>]         every topic, a page at a time
    /groups[/<page>]         every group, a page at a time
    /topic/<name>[/<page>]   a topic's partitions: leader, replicas, ISR, log start/end, size
    /group/<id>[/<page>]     a group: state, members, assignment, lag per partition, its chart

Path segments are percent-encoded (group ids are any string); anything else is not ours
(the side door answers 404). Cheap by construction: everything is read from memory (the
metadata image, the hosted partitions' offsets and segment sizes, the group coordinator's
state), nothing from disk, and every list is cut into pages of `page_size` rows, so a broker
with thousands of partitions renders a page in about the time of a metadata request. Lag is
`group_lag.py`'s, the same figure /metrics reports.

What this broker cannot know it says: in a cluster a partition's log figures are this
broker's replica's (leader or follower, shown), or "—" when it holds none; a group is
described by its coordinator only.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import unquote

from pybroker.client.consumer_protocol import decode_assignment
from pybroker.ops.group_lag import PartitionLag, group_lag, total_lag
from pybroker.ops.http_server import HttpResponse
from pybroker.stats.request_stats import RequestStats
from pybroker.ops.status.html import cards, esc, href, layout, pager, table
from pybroker.ops.status.sampler import Counters, Timeline, run_sampler
from pybroker.ops.status.svg import human, line_chart

if TYPE_CHECKING:
    from pybroker.cluster.image import MetadataImage, PartitionState, TopicInfo
    from pybroker.cluster.metadata import MetadataStore
    from pybroker.coordinator.group_coordinator import GroupCoordinator
    from pybroker.coordinator.group_metadata import Group
    from pybroker.replica.manager import ReplicaManager

__all__ = ["StatusPage"]

HTML = "text/html; charset=utf-8"
T = TypeVar("T")


def _page_of(items: Sequence[T], page: int, size: int) -> tuple[Sequence[T], int]:
    """The items of page `page` (1-based) and the number of pages (at least 1)."""
    pages = max(1, -(-len(items) // size))
    return items[(page - 1) * size: page * size], pages


def _ids(nodes: Sequence[int] | frozenset[int]) -> str:
    return ", ".join(str(n) for n in sorted(nodes)) if nodes else "—"


class StatusPage:
    def __init__(self, node_id: int, metadata: "MetadataStore", replicas: "ReplicaManager",
                 groups: "GroupCoordinator", stats: RequestStats, *,
                 sample_interval: float = 5.0, page_size: int = 100,
                 refresh_seconds: int = 5) -> None:
        self.node_id = node_id
        self.metadata = metadata
        self.replicas = replicas
        self.groups = groups
        self.stats = stats
        self.sample_interval = sample_interval
        self.page_size = page_size
        self.refresh_seconds = refresh_seconds
        self.timeline = Timeline()

    # -- the sampler ------------------------------------------------------------------------------
    def counters(self) -> Counters:
        stats = self.stats
        offsets = self.groups.state.offsets
        return Counters(sum(stats.bytes_in.values()), sum(stats.bytes_out.values()),
                        sum(stats.records_in.values()),
                        {g: total_lag(group_lag(o, self.replicas)) for g, o in offsets.items()})

    async def run_sampler(self) -> None:
        await run_sampler(self.timeline, self.counters, self.sample_interval)

    # -- routing ----------------------------------------------------------------------------------
    def __call__(self, path: str) -> HttpResponse | None:
        """The page at `path`, or None when the path is not the status page's."""
        if path == "/":
            return self._ok(*self._overview())
        parts = [unquote(p) for p in path.strip("/").split("/")]
        kind, rest = parts[0], parts[1:]
        if kind in ("topics", "groups") and len(rest) <= 1:
            page = self._page_number(rest)
            if page is None:
                return None
            return (self._topic_list(page) if kind == "topics" else self._group_list(page))
        if kind in ("topic", "group") and 1 <= len(rest) <= 2 and rest[0]:
            page = self._page_number(rest[1:])
            if page is None:
                return None
            return self._topic(rest[0], page) if kind == "topic" else self._group(rest[0], page)
        return None

    @staticmethod
    def _page_number(rest: list[str]) -> int | None:
        if not rest:
            return 1
        text = rest[0]
        return int(text) if text.isascii() and text.isdigit() and 0 < int(text) < 10**6 \
            else None

    def _ok(self, title: str, heading: str, body: str, status: int = 200) -> HttpResponse:
        image = self.metadata.image
        subtitle = (f"node {self.node_id} · cluster {esc(image.cluster_id)} · "
                    f"controller {image.controller_id} · {time.strftime('%H:%M:%S')}")
        return HttpResponse(status, layout(title, heading, body, subtitle=subtitle,
                                           refresh_seconds=self.refresh_seconds).encode(), HTML)

    def _not_found(self, what: str) -> HttpResponse:
        return self._ok("not found", "Not found",
                        f'<section><p>{esc(what)}</p><p><a href="/">overview</a></p></section>',
                        404)

    # -- figures ----------------------------------------------------------------------------------
    @staticmethod
    def _health(image: "MetadataImage", part: "PartitionState") -> tuple[bool, bool]:
        """(offline, under-replicated), from the metadata image as the controller sees it."""
        offline = part.leader < 0 or part.leader not in image.brokers
        return offline, len(part.isr) < len(part.replicas)

    def _topic_row(self, image: "MetadataImage", info: "TopicInfo") -> list[str]:
        under = offline = size = records = 0
        for part in info.partitions:
            is_offline, is_under = self._health(image, part)
            offline += is_offline
            under += is_under
            hosted = self.replicas.hosted_partition(info.name, part.partition)
            if hosted is not None:
                size += hosted.log.size
                if hosted.is_leader:
                    records += max(0, hosted.high_watermark - hosted.log.log_start_offset)
        name = f'<a href="{href("topic", info.name)}">{esc(info.name)}</a>'
        if info.internal:
            name += ' <span class="tag">internal</span>'
        return [name, str(len(info.partitions)), str(info.replication_factor),
                f'<span class="bad">{under}</span>' if under else "0",
                f'<span class="bad">{offline}</span>' if offline else "0",
                human(records), human(size) + "B"]

    _TOPIC_HEADERS = ["topic", "partitions", "RF", "under-replicated", "offline",
                      "records (led here)", "size here"]

    def _topics_table(self, names: Sequence[str]) -> str:
        image = self.metadata.image
        rows = [self._topic_row(image, image.topics[n]) for n in names]
        return table(self._TOPIC_HEADERS, rows, numeric=frozenset({1, 2, 3, 4, 5, 6}),
                     empty="no topics", table_id="topics")

    def _topic_names(self) -> list[str]:
        topics = self.metadata.image.topics
        return sorted(topics, key=lambda n: (topics[n].internal, n))

    def _group_rows(self, group_ids: Sequence[str]) -> list[list[str]]:
        state = self.groups.state
        rows = []
        for group_id in group_ids:
            group = state.groups.get(group_id)
            offsets = state.offsets.get(group_id, {})
            lag = total_lag(group_lag(offsets, self.replicas))
            rows.append([f'<a href="{href("group", group_id)}">{esc(group_id)}</a>',
                         esc(group.state.value) if group is not None else "—",
                         str(len(group.members)) if group is not None else "0",
                         str(len({tp[0] for tp in offsets})), str(lag)])
        return rows

    _GROUP_HEADERS = ["group", "state", "members", "topics", "lag"]

    def _group_ids(self) -> list[str]:
        state = self.groups.state
        return sorted(set(state.groups) | set(state.offsets))

    def _charts(self, lag_groups: Sequence[str] | None = None) -> str:
        timeline = self.timeline
        window = timeline.points * self.sample_interval
        now = timeline.times[-1] if timeline.times else time.time()
        throughput = line_chart(
            "Throughput (this broker)",
            [(name, timeline.series(values)) for name, values in timeline.throughput.items()
             if name != "records in/s"], now=now, window=window)
        lags = [(g, timeline.series(v)) for g, v in timeline.lag.items()
                if lag_groups is None or g in lag_groups]
        lag = line_chart("Consumer lag (records)", lags, now=now, window=window)
        if lag_groups is not None:
            return f'<div class="charts">{lag}</div>'
        return f'<div class="charts">{throughput}{lag}</div>'

    # -- pages ------------------------------------------------------------------------------------
    def _overview(self) -> tuple[str, str, str]:
        image = self.metadata.image
        brokers = []
        for node in sorted(image.brokers):
            info = image.brokers[node]
            role = []
            if node == image.controller_id:
                role.append('<span class="tag">controller</span>')
            if node == self.node_id:
                role.append('<span class="tag">this broker</span>')
            brokers.append([str(node), esc(f"{info.host}:{info.port}"),
                            esc(info.rack or "—"), " ".join(role)])
        partitions = under = offline = 0
        for topic in image.topics.values():
            for part in topic.partitions:
                partitions += 1
                is_offline, is_under = self._health(image, part)
                offline += is_offline
                under += is_under
        names = self._topic_names()
        group_ids = self._group_ids()
        summary = cards([("brokers", len(image.brokers), False),
                         ("topics", len(names), False), ("partitions", partitions, False),
                         ("under-replicated", under, under > 0),
                         ("offline", offline, offline > 0), ("groups", len(group_ids), False)])
        shown = 20
        more_topics = (f'<p><a href="/topics">all {len(names)} topics →</a></p>'
                       if len(names) > shown else "")
        more_groups = (f'<p><a href="/groups">all {len(group_ids)} groups →</a></p>'
                       if len(group_ids) > shown else "")
        body = (f"{summary}<section>{self._charts()}</section>"
                "<section><h2>Brokers</h2>"
                + table(["id", "address", "rack", ""], brokers, table_id="brokers")
                + "</section><section><h2>Topics</h2>" + self._topics_table(names[:shown])
                + more_topics + "</section><section><h2>Consumer groups</h2>"
                + table(self._GROUP_HEADERS, self._group_rows(group_ids[:shown]),
                        numeric=frozenset({2, 3, 4}), empty="no consumer groups",
                        table_id="groups")
                + more_groups + "</section>")
        return "pybroker status", "Overview", body

    def _topic_list(self, page: int) -> HttpResponse:
        names = self._topic_names()
        rows, pages = _page_of(names, page, self.page_size)
        if page > pages:
            return self._not_found(f"no page {page} of topics")
        body = ("<section>" + self._topics_table(rows)
                + pager(page, pages, len(names), "topics", "topics") + "</section>")
        return self._ok("topics", "Topics", body)

    def _group_list(self, page: int) -> HttpResponse:
        group_ids = self._group_ids()
        rows, pages = _page_of(group_ids, page, self.page_size)
        if page > pages:
            return self._not_found(f"no page {page} of groups")
        body = ("<section>" + table(self._GROUP_HEADERS, self._group_rows(rows),
                                    numeric=frozenset({2, 3, 4}), empty="no consumer groups",
                                    table_id="groups")
                + pager(page, pages, len(group_ids), "groups", "groups") + "</section>")
        return self._ok("groups", "Consumer groups", body)

    def _topic(self, name: str, page: int) -> HttpResponse:
        image = self.metadata.image
        info = image.topics.get(name)
        if info is None:
            return self._not_found(f"no topic {name!r}")
        parts, pages = _page_of(info.partitions, page, self.page_size)
        if page > pages:
            return self._not_found(f"topic {name!r} has no page {page}")
        rows = []
        for part in parts:
            is_offline, _ = self._health(image, part)
            missing = set(part.replicas) - set(part.isr)
            isr = _ids(part.isr) + (f' <span class="bad">(out: {_ids(frozenset(missing))})'
                                    "</span>" if missing else "")
            hosted = self.replicas.hosted_partition(name, part.partition)
            if hosted is None:
                start = end = size = "—"
                here = '<span class="muted">no replica</span>'
            else:
                log = hosted.log
                start, end = str(log.log_start_offset), str(hosted.high_watermark)
                size = human(log.size) + "B"
                here = "leader" if hosted.is_leader else "follower"
            leader = (f'<span class="bad">{part.leader} (offline)</span>' if is_offline
                      else str(part.leader))
            rows.append([str(part.partition), leader, _ids(part.replicas), isr,
                         start, end, size, here])
        configs = ", ".join(f"{esc(k)}={esc(v)}" for k, v in sorted(info.configs.items()))
        body = (f'<section><p>{len(info.partitions)} partitions · replication factor '
                f'{info.replication_factor} · id <code>{esc(info.topic_id)}</code>'
                + (' · <span class="tag">internal</span>' if info.internal else "")
                + (f'</p><p class="muted">{configs}' if configs else "") + "</p>"
                + table(["partition", "leader", "replicas", "ISR", "log start", "log end",
                         "size", "replica here"], rows,
                        numeric=frozenset({0, 4, 5, 6}), table_id="partitions")
                + pager(page, pages, len(info.partitions), "partitions", "topic", name)
                + '<p class="muted">log start/end and size are this broker\'s replica\'s; '
                  "log end is the high watermark.</p></section>")
        return self._ok(f"topic {name}", f"Topic {esc(name)}", body)

    def _group(self, group_id: str, page: int) -> HttpResponse:
        state = self.groups.state
        group = state.groups.get(group_id)
        offsets = state.offsets.get(group_id)
        if group is None and offsets is None:
            return self._not_found(f"no group {group_id!r} coordinated by this broker")
        owners = self._owners(group) if group is not None else {}
        lags = sorted(group_lag(offsets or {}, self.replicas),
                      key=lambda lag: (lag.topic, lag.partition))
        shown, pages = _page_of(lags, page, self.page_size)
        if page > pages:
            return self._not_found(f"group {group_id!r} has no page {page}")
        body = ["<section>"]
        if group is not None:
            body.append(f"<p>state <b>{esc(group.state.value)}</b> · generation "
                        f"{group.generation} · protocol {esc(group.protocol_name or '—')}</p>")
            body.append(self._members_table(group))
        else:
            body.append('<p>state <b>—</b> (committed offsets only)</p>')
        body.append("</section><section><h2>Lag</h2>")
        body.append(self._lag_table(shown, owners))
        body.append(pager(page, pages, len(lags), "partitions", "group", group_id))
        body.append(f"<p>total lag <b id=\"total-lag\">{total_lag(iter(lags))}</b></p>"
                    "</section>")
        if group_id in self.timeline.lag:
            body.append(f"<section>{self._charts([group_id])}</section>")
        return self._ok(f"group {group_id}", f"Group {esc(group_id)}", "".join(body))

    @staticmethod
    def _assignment(group: "Group", member_id: str) -> list[tuple[str, int]] | None:
        member = group.members[member_id]
        if group.protocol_type != "consumer":
            return None
        try:
            return [(tp[0], tp[1]) for tp in decode_assignment(member.assignment).partitions]
        except Exception:  # a client's bytes: a bad one must not break the page
            return None

    def _owners(self, group: "Group") -> dict[tuple[str, int], str]:
        owners = {}
        for member_id, member in group.members.items():
            for tp in self._assignment(group, member_id) or ():
                owners[tp] = member.client_id or member_id
        return owners

    def _members_table(self, group: "Group") -> str:
        rows = []
        for member_id, member in sorted(group.members.items()):
            assigned = self._assignment(group, member_id)
            if assigned is None:
                text = '<span class="muted">—</span>'
            else:
                by_topic: dict[str, list[int]] = {}
                for topic, partition in assigned:
                    by_topic.setdefault(topic, []).append(partition)
                text = "; ".join(f"{esc(t)}: {_ids(p)}" for t, p in sorted(by_topic.items()))
                if len(text) > 300:
                    text = esc(f"{len(assigned)} partitions of {len(by_topic)} topics")
            leader = ' <span class="tag">leader</span>' if member_id == group.leader_id else ""
            rows.append([esc(member_id) + leader, esc(member.client_id),
                         esc(member.client_host), text or '<span class="muted">none</span>'])
        return table(["member", "client id", "host", "assignment"], rows,
                     empty="no members", table_id="members")

    @staticmethod
    def _lag_table(lags: Sequence[PartitionLag], owners: dict[tuple[str, int], str]) -> str:
        rows = [[f'<a href="{href("topic", lag.topic)}">{esc(lag.topic)}</a>',
                 str(lag.partition), str(lag.committed),
                 "—" if lag.end is None else str(lag.end),
                 "—" if lag.lag is None else
                 (f'<span class="bad">{lag.lag}</span>' if lag.lag else "0"),
                 esc(owners.get((lag.topic, lag.partition), "—"))] for lag in lags]
        return table(["topic", "partition", "committed", "log end", "lag", "owner"], rows,
                     numeric=frozenset({1, 2, 3, 4}), empty="no committed offsets",
                     table_id="lag")
