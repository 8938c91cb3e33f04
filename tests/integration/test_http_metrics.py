"""The HTTP side door (issue #17): /healthz, /readyz and /metrics of a real broker, scraped
while stock clients (confluent-kafka) produce and consume, parsed with prometheus_client's
own parser; and what bad HTTP clients get, with a Kafka round trip served meanwhile."""
from __future__ import annotations

import http.client
import socket
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer

from pybroker.config import ConfigError, load_broker_config
from pybroker.ops.endpoints import OpsEndpoints
from tests.helpers import Broker
from tests.integration.http_scrape import get, scrape, value

HEAD_TIMEOUT_MS = 1500


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    # One broker: /metrics is a broker's own page (its partitions, its requests), and what a
    # test of a node's reads, one worker's or all, is not decided (docs/DESIGN.md, the status
    # page, left the same way).
    with Broker(http_listeners="http://127.0.0.1:0", num_cores="1",
                http_request_timeout_ms=HEAD_TIMEOUT_MS) as running:
        yield running


def produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    errors: list = []
    for i in range(count):
        producer.produce(topic, b"v%d" % i, partition=partition,
                         on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(15) == 0
    assert errors == [None] * count


def test_health_and_readiness_over_one_kept_alive_connection(broker: Broker) -> None:
    port = broker.http_port
    assert port and port != broker.port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    answers = []
    for method, path in [("GET", "/healthz"), ("GET", "/readyz"), ("HEAD", "/healthz"),
                         ("GET", "/no/such/page"), ("GET", "/readyz?verbose=1")]:
        conn.request(method, path)
        response = conn.getresponse()
        answers.append((method, path, response.status, response.read()))
    conn.close()
    assert answers == [("GET", "/healthz", 200, b"ok\n"), ("GET", "/readyz", 200, b"ready\n"),
                       ("HEAD", "/healthz", 200, b""),
                       ("GET", "/no/such/page", 404,
                        b"not found: /no/such/page (try /healthz, /readyz, /metrics)\n"),
                       ("GET", "/readyz?verbose=1", 200, b"ready\n")]


def test_offsets_and_request_counters_follow_what_is_produced(broker: Broker) -> None:
    broker.create_topic("m-orders", partitions=2)
    before = scrape(broker.http_port)
    assert value(before, "kafka_topic_partitions", topic="m-orders") == 2
    assert value(before, "kafka_brokers") == 1
    assert value(before, "kafka_topic_partition_current_offset",
                 topic="m-orders", partition="1") == 0
    produce(broker.bootstrap, "m-orders", 25, partition=1)
    after = scrape(broker.http_port)
    part = {"topic": "m-orders", "partition": "1"}
    assert value(after, "kafka_topic_partition_current_offset", **part) == 25
    assert value(after, "kafka_topic_partition_current_offset",
                 topic="m-orders", partition="0") == 0
    assert value(after, "kafka_topic_partition_oldest_offset", **part) == 0
    assert value(after, "kafka_topic_partition_leader", **part) == 0
    assert value(after, "kafka_topic_partition_replicas", **part) == 1
    assert value(after, "kafka_topic_partition_in_sync_replica", **part) == 1
    assert value(after, "kafka_topic_partition_under_replicated_partition", **part) == 0
    assert value(after, "pybroker_log_size_bytes", **part) > 25 * 2
    assert value(after, "pybroker_messages_in_total", topic="m-orders") == 25
    assert value(after, "pybroker_bytes_in_total", topic="m-orders") > 25 * 2
    produces = value(after, "pybroker_requests_total", api="Produce")
    assert produces > value(before, "pybroker_requests_total", api="Produce")
    # The latency histogram counts the same requests as the counter.
    assert value(after, "pybroker_request_duration_seconds_count", api="Produce") == produces
    assert value(after, "pybroker_request_duration_seconds_bucket",
                 api="Produce", le="+Inf") == produces
    assert value(after, "pybroker_request_errors_total", api="Produce") == 0
    assert value(after, "pybroker_active_controller") == 1
    assert value(after, "pybroker_under_replicated_partitions") == 0
    assert value(after, "pybroker_offline_partitions") == 0
    assert value(after, "pybroker_memory_pool_available_bytes") == 256 * 2**20
    assert value(after, "pybroker_memory_pool_used_bytes") == 0


def test_lag_of_a_stopped_consumer_grows_by_exactly_what_is_produced(broker: Broker) -> None:
    broker.create_topic("m-lag", partitions=1)
    produce(broker.bootstrap, "m-lag", 10)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "m-readers",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["m-lag"])
    seen = 0
    deadline = time.monotonic() + 20
    while seen < 10 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen += 1
    assert seen == 10
    # While the consumer is connected its connection is counted.
    assert value(scrape(broker.http_port), "pybroker_connections", listener="PLAINTEXT") >= 1
    consumer.commit(asynchronous=False)
    consumer.close()
    group = {"consumergroup": "m-readers", "topic": "m-lag", "partition": "0"}
    caught_up = scrape(broker.http_port)
    assert value(caught_up, "kafka_consumergroup_current_offset", **group) == 10
    assert value(caught_up, "kafka_consumergroup_lag", **group) == 0
    assert value(caught_up, "pybroker_bytes_out_total", topic="m-lag") > 10 * 2
    produce(broker.bootstrap, "m-lag", 7)
    behind = scrape(broker.http_port)
    assert value(behind, "kafka_consumergroup_current_offset", **group) == 10
    assert value(behind, "kafka_consumergroup_lag", **group) == 7
    assert value(behind, "kafka_consumergroup_lag_sum",
                 consumergroup="m-readers", topic="m-lag") == 7
    assert value(behind, "kafka_consumergroup_members", consumergroup="m-readers") == 0
    assert value(behind, "pybroker_requests_total", api="OffsetCommit") >= 1


def _raw(port: int, data: bytes) -> bytes:
    """What the server answers to `data` before it closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        return answer


def test_bad_http_gets_a_clear_answer_and_a_close(broker: Broker) -> None:
    port = broker.http_port
    garbage = _raw(port, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n")
    assert garbage.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert b"Connection: close" in garbage
    huge = _raw(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 64 * 1024
                + b"\r\n\r\n")
    assert huge.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
    # A head just under the limit is served.
    fits = _raw(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: "
                + b"a" * 8 * 1024 + b"\r\n\r\n")
    assert fits.startswith(b"HTTP/1.1 200 OK\r\n") and fits.endswith(b"\r\n\r\nok\n")
    post = _raw(port, b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
    assert post.startswith(b"HTTP/1.1 405 Method Not Allowed\r\n")
    assert post.endswith(b"method POST not allowed; use GET or HEAD\n")
    assert get(port, "/metrics", method="DELETE")[0] == 405


def test_a_slowloris_client_is_closed_and_blocks_nothing(broker: Broker) -> None:
    port = broker.http_port
    broker.create_topic("m-slow", partitions=1)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as slow:
        slow.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Half: ")
        opened = time.monotonic()
        # Meanwhile Kafka clients and other HTTP clients are served.
        produce(broker.bootstrap, "m-slow", 3)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "m-slow-g",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["m-slow"])
        got = []
        deadline = time.monotonic() + 15
        while len(got) < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
        consumer.close()
        assert got == [b"v0", b"v1", b"v2"]
        assert get(port, "/healthz")[0] == 200
        # The half-sent head is cut off after http.request.timeout.ms, however slowly it
        # keeps dribbling.
        while True:
            try:
                slow.sendall(b"a")
            except OSError:
                break
            slow.settimeout(0.2)
            try:
                if slow.recv(100) == b"":
                    break
            except socket.timeout:
                pass
            assert time.monotonic() - opened < HEAD_TIMEOUT_MS / 1000 + 20
        assert time.monotonic() - opened >= HEAD_TIMEOUT_MS / 1000 - 0.1


def test_readiness_waits_for_recovery_serving_and_registration() -> None:
    ops = OpsEndpoints()
    assert ops("GET", "/healthz").status == 200
    assert (ops("GET", "/readyz").status, ops("GET", "/readyz").body) == \
        (503, b"not ready: logs are being recovered\n")
    assert ops("GET", "/metrics").status == 503
    registered = False
    from prometheus_client.registry import CollectorRegistry
    built: list[CollectorRegistry] = []  # the registry is built at the first scrape, once

    def registry() -> CollectorRegistry:
        if not built:
            built.append(CollectorRegistry())
        return built[0]

    ops.broker_built(registry, lambda: registered)
    assert ops("GET", "/readyz").body == b"not ready: Kafka listeners are not serving yet\n"
    ops.serving()
    assert ops("GET", "/readyz").status == 503
    assert b"not registered" in ops("GET", "/readyz").body
    registered = True
    assert ops("GET", "/readyz").status == 200
    assert not built
    assert ops("GET", "/metrics").status == 200
    assert len(built) == 1


def test_http_listeners_are_validated() -> None:
    assert load_broker_config(None, {}).http_listeners == ()
    config = load_broker_config(None, {"http.listeners": "http://127.0.0.1:0,http://:9644"})
    assert [(item.host, item.port) for item in config.http_listeners] == \
        [("127.0.0.1", 0), ("", 9644)]
    for bad in ("https://127.0.0.1:9644", "127.0.0.1:9644", "http://127.0.0.1:70000",
                "http://a:9644,http://b:9644"):
        with pytest.raises(ConfigError):
            load_broker_config(None, {"http.listeners": bad})


def test_a_cluster_reports_readiness_controller_and_under_replication() -> None:
    """Three brokers on the in-memory ZooKeeper: each is ready, exactly one reports itself
    the active controller, and once a follower stops, the leader reports the partition
    under-replicated (kafka_exporter's per-partition flag and pybroker's count)."""
    from pybroker.testing import Cluster
    with Cluster(3, http_listeners="http://127.0.0.1:0") as cluster:
        ports = {i: cluster.server(i).http_port for i in range(3)}
        assert len(set(ports.values())) == 3
        assert all(get(port, "/readyz")[:2] == (200, b"ready\n") for port in ports.values())
        controllers = [value(scrape(port), "pybroker_active_controller")
                       for port in ports.values()]
        assert sorted(controllers) == [0, 0, 1]
        cluster.create_topic("m-replicated", partitions=1, replication_factor=3,
                             config={"min.insync.replicas": "3"})
        cluster.wait_for_isr("m-replicated", 0, {0, 1, 2})
        leader = cluster.leader_of("m-replicated")
        part = {"topic": "m-replicated", "partition": "0"}
        samples = scrape(ports[leader])
        assert value(samples, "kafka_topic_partition_in_sync_replica", **part) == 3
        assert value(samples, "kafka_topic_partition_under_replicated_partition", **part) == 0
        follower = next(i for i in range(3) if i != leader)
        # A follower that stops fetching (registered still) is dropped from the ISR by the
        # leader after replica.lag.time.max.ms: a shrink, and the partition is under its
        # min.insync.replicas=3. Fetching again, it is taken back: an expand.
        fetchers = cluster.server(follower).broker.replicas.fetchers
        epoch = cluster.server(leader).broker.replicas.hosted_partition(
            "m-replicated", 0).leader_epoch
        assert value(samples, "pybroker_isr_shrinks_total") == 0
        assert value(samples, "pybroker_under_min_isr_partitions") == 0

        real_follow = fetchers.follow

        async def unfollow() -> None:  # and stay away: the broker re-follows from its image
            fetchers.follow = lambda tp, *args: (None if tp == ("m-replicated", 0)
                                                 else real_follow(tp, *args))
            fetchers.unfollow(("m-replicated", 0))

        async def follow() -> None:
            fetchers.follow = real_follow
            fetchers.follow(("m-replicated", 0), leader, epoch)

        cluster._call(unfollow)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": 1})
        producer.produce("m-replicated", b"behind")  # the follower is no longer at the end
        assert producer.flush(15) == 0
        cluster.wait_for_isr("m-replicated", 0, {0, 1, 2} - {follower})
        samples = scrape(ports[leader])
        assert value(samples, "pybroker_isr_shrinks_total") == 1
        assert value(samples, "pybroker_under_min_isr_partitions") == 1
        expands = value(samples, "pybroker_isr_expands_total")
        cluster._call(follow)
        cluster.wait_for_isr("m-replicated", 0, {0, 1, 2})
        samples = scrape(ports[leader])
        assert value(samples, "pybroker_isr_expands_total") == expands + 1
        assert value(samples, "pybroker_under_min_isr_partitions") == 0
        cluster.stop_broker(follower)
        cluster.wait_until(lambda: value(scrape(ports[leader]),
                                         "kafka_topic_partition_under_replicated_partition",
                                         **part) == 1, "the leader to report under-replication")
        samples = scrape(ports[leader])
        assert value(samples, "kafka_topic_partition_in_sync_replica", **part) == 2
        assert value(samples, "pybroker_under_replicated_partitions") >= 1
        assert value(samples, "kafka_brokers") == 2


def test_a_taken_http_port_is_a_warning_and_the_broker_serves_kafka(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Issue #27: a second broker made by copying server.properties names the first one's
    HTTP port; it starts, says the side door is not there, serves Kafka, and still serves
    every other HTTP listener it was given."""
    from kafka import KafkaAdminClient
    from pybroker.testing import BrokerProcess

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # One broker process (num.cores=1): the test is about one broker's side door. A node
        # of N brokers gives worker K every HTTP port + K, and port + 1 is nobody's to count on.
        proc = BrokerProcess(tmp_path / "logs", num_cores="1",
                             http_listeners=f"http://127.0.0.1:{port},http://127.0.0.1:0"
                             ).start()
        try:
            warned = [line for line in proc.stderr_lines
                      if f"HTTP listener http://127.0.0.1:{port} cannot be bound" in line]
            assert len(warned) == 1 and "WARNING" in warned[0], proc.stderr_lines
            served = [line for line in proc.stderr_lines if "HTTP (/healthz" in line]
            assert len(served) == 1 and f":{port}" not in served[0], served
            admin = KafkaAdminClient(bootstrap_servers=proc.bootstrap)
            try:
                assert admin.describe_cluster()["brokers"]
            finally:
                admin.close()
            other = int(served[0].split()[-2].rsplit(":", 1)[1])
            assert get(other, "/healthz")[0] == 200
        finally:
            proc.stop()
