"""The status page (issue #17) in a real browser: Debian's Chromium, headless, reads the
page of a broker that stock clients (confluent-kafka) produced to and consumed from, and its
DOM must show the topic, the partitions, the groups and their exact lag. Screenshots at a
phone's and a desktop's size are kept under tests/artifacts/status-page/ (ignored by git)
for a person to look at. bin/test installs chromium with apt-get."""
from __future__ import annotations

import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from pybroker.testing import Broker
from pybroker.testing.cluster import Cluster
from tests.helpers import ROOT

CHROMIUM = shutil.which("chromium")
ARTIFACTS = ROOT / "tests" / "artifacts" / "status-page"
EVIL_GROUP = '</td><script>document.title="pwned"</script>'
PHONE, DESKTOP = "412,915", "1280,900"

pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="chromium is not installed (bin/test installs it)")


class Tables(HTMLParser):
    """Each <table id=...>: its rows' cell texts; and the document's title and scripts."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.scripts = 0
        self.title = ""
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._in_title = False
        self._titles = 0
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._table = dict(attrs).get("id") or ""
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "script":
            self.scripts += 1
        elif tag == "title" and not self._titles:  # the document's, not an SVG line's
            self._in_title = True
        if tag == "title":
            self._titles += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None
        elif tag in ("td", "th") and self._cell is not None and self._table is not None:
            self.tables[self._table][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "title":
            self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._in_title:
            self.title += data

    def rows(self, table_id: str) -> list[list[str]]:
        return self.tables[table_id][1:]  # without the head


def chromium(url: str, tmp_path: Path, *args: str) -> str:
    assert CHROMIUM is not None
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--no-first-run", f"--user-data-dir={tmp_path / 'chromium-profile'}", *args, url],
        capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def dom(url: str, tmp_path: Path) -> Tables:
    return Tables(chromium(url, tmp_path, "--dump-dom"))


def screenshot(url: str, tmp_path: Path, name: str, size: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    path.unlink(missing_ok=True)
    chromium(url, tmp_path, f"--screenshot={path}", f"--window-size={size}")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
    print(f"screenshot: {path}")
    return path


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def consume_all(bootstrap: str, group: str, topic: str, count: int) -> Consumer:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "client.id": f"{group}-client", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen, deadline = 0, time.monotonic() + 30
    while seen < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            seen += 1
    assert seen == count
    consumer.commit(asynchronous=False)
    return consumer


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(http_listeners="http://127.0.0.1:0", http_status_sample_interval_ms=200,
                group_initial_rebalance_delay_ms=0) as running:
        yield running


def test_a_browser_shows_topics_partitions_groups_and_exact_lag(broker: Broker,
                                                                 tmp_path: Path) -> None:
    bootstrap, base = broker.bootstrap, f"http://127.0.0.1:{broker.http_port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("orders", 3, 1)]).values():
        future.result()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})

    def produce(partition: int, count: int) -> None:
        for i in range(count):
            producer.produce("orders", b"order-%d" % i, partition=partition)
        assert producer.flush(15) == 0

    for partition in range(3):
        produce(partition, 10)
    # billing reads all 30, commits and stops; audit stays a member while the page is read.
    consume_all(bootstrap, "billing", "orders", 30).close()
    audit = consume_all(bootstrap, "audit", "orders", 30)
    try:
        produce(0, 7)
        produce(2, 5)
        time.sleep(1)  # a few samples for the charts (every 200 ms here)

        overview = dom(base + "/", tmp_path)
        assert overview.scripts == 0
        assert ["0", "127.0.0.1:%d" % broker.port, "—", "controller this broker"] in \
            overview.rows("brokers")
        topics = {row[0]: row for row in overview.rows("topics")}
        assert topics["orders"][1:6] == ["3", "1", "0", "0", "42"]
        groups = {row[0]: row for row in overview.rows("groups")}
        assert groups["billing"] == ["billing", "Empty", "0", "1", "12"]
        assert groups["audit"] == ["audit", "Stable", "1", "1", "12"]

        billing = dom(base + "/group/billing", tmp_path)
        assert billing.rows("lag") == [["orders", "0", "10", "17", "7", "—"],
                                       ["orders", "1", "10", "10", "0", "—"],
                                       ["orders", "2", "10", "15", "5", "—"]]
        audit_page = dom(base + "/group/audit", tmp_path)
        [member] = audit_page.rows("members")
        assert member[1:] == ["audit-client", member[2], "orders: 0, 1, 2"]
        assert [row[-1] for row in audit_page.rows("lag")] == ["audit-client"] * 3

        partitions = dom(base + "/topic/orders", tmp_path).rows("partitions")
        assert [row[:6] + row[7:] for row in partitions] == [
            ["0", "0", "0", "0", "0", "17", "leader"],
            ["1", "0", "0", "0", "0", "10", "leader"],
            ["2", "0", "0", "0", "0", "15", "leader"]]

        # The page's lag is /metrics' lag.
        _, metrics = get(base + "/metrics")
        lag = {(s.labels["consumergroup"], int(s.labels["partition"])): s.value
               for family in text_string_to_metric_families(metrics)
               for s in family.samples if s.name == "kafka_consumergroup_lag"}
        assert {k: v for k, v in lag.items() if k[0] == "billing"} == \
            {("billing", 0): 7, ("billing", 1): 0, ("billing", 2): 5}

        screenshot(base + "/", tmp_path, "overview-phone", PHONE)
        screenshot(base + "/", tmp_path, "overview-desktop", DESKTOP)
        screenshot(base + "/group/billing", tmp_path, "group-phone", PHONE)
    finally:
        audit.close()


def test_names_are_escaped_and_unknown_pages_are_404(broker: Broker, tmp_path: Path) -> None:
    base = f"http://127.0.0.1:{broker.http_port}"
    committer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": EVIL_GROUP})
    committer.commit(offsets=[TopicPartition("orders", 1, 4)], asynchronous=False)
    committer.close()
    status, body = get(base + "/")
    assert status == 200 and "<script" not in body and "&lt;script&gt;" in body
    page = dom(base + "/", tmp_path)
    assert page.title == "pybroker status" and page.scripts == 0
    assert any(row[0] == EVIL_GROUP for row in page.rows("groups"))
    # A topic named <script> cannot exist (Kafka's name rules), but its page can be asked for.
    status, body = get(base + "/topic/%3Cscript%3Ealert(1)%3C%2Fscript%3E")
    assert status == 404 and "<script" not in body and "&lt;script&gt;alert(1)" in body
    for path in ("/topic/no-such-topic", "/group/no-such-group", "/topics/abc", "/topics/9",
                 "/nothing/here", "/topic/orders/2"):
        status, _ = get(base + path)
        assert status == 404, path
    with urllib.request.urlopen(urllib.request.Request(base + "/", method="HEAD")) as head:
        assert head.status == 200 and head.read() == b""
        assert head.headers["Content-Type"] == "text/html; charset=utf-8"


def test_a_cluster_shows_every_broker_the_controller_and_the_replicas(tmp_path: Path) -> None:
    with Cluster(3, http_listeners="http://127.0.0.1:0") as cluster:
        cluster.create_topic("replicated", 2, 3)
        controller = cluster.controller
        port = cluster.server(controller).http_port
        page = dom(f"http://127.0.0.1:{port}/", tmp_path)
        brokers = page.rows("brokers")
        assert [row[0] for row in brokers] == [str(n) for n in cluster.running]
        assert [row[3] for row in brokers if "controller" in row[3]] == \
            ["controller this broker"]
        status, body = get(f"http://127.0.0.1:{port}/topic/replicated")
        rows = Tables(body).rows("partitions")
        for row, partition in zip(rows, range(2)):
            leader = cluster.leader_of("replicated", partition)
            assert row[1] == str(leader)
            assert row[2] == row[3] == ", ".join(str(n) for n in sorted(cluster.running))
            assert row[7] == ("leader" if leader == controller else "follower")
