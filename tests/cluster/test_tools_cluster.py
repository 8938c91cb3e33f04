"""The command-line tools against a real three-broker cluster on a real ZooKeeper: what the
operations pages and the old quickstarts type. `kafka-topics --describe` and its health
filters through broker failures, the pre-3.0 `--zookeeper` flags of kafka-topics and the
console consumer, `--broker-list` of the console producer, and `kafka-leader-election`
(preferred and unclean) served by the controller.

Tools run in-process (`main(argv)`, output captured); the brokers are subprocesses. One
cluster serves the module: tests that kill a broker start it again and wait for a full ISR
before returning, and the unclean election, which leaves partitions without a live in-sync
replica, has a cluster of its own.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable, Iterator, Sequence

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.tools import console_consumer, console_producer, leader_election, topics
from tests.cluster.brokers import SESSION_TIMEOUT_MS, Cluster, running_cluster
from pybroker.testing.zookeeper import ZooKeeperProcess
from tests.helpers import Result
from tests.integration.raw import send_request

FAILOVER_S = SESSION_TIMEOUT_MS / 1000 + 20
PARTITION_LINE = re.compile(
    r"^\tTopic: (?P<topic>\S+)\tPartition: (?P<p>\d+)\tLeader: (?P<leader>\d+|none)"
    r"\tReplicas: (?P<replicas>[\d,]+)\tIsr: (?P<isr>[\d,]*)\tElr: N/A\tLastKnownElr: N/A$")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, own_zk_server: ZooKeeperProcess
            ) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("cluster"), own_zk_server.connect) as c:
        yield c


def create(tool: Callable[..., Result], cluster: Cluster, name: str, partitions: int = 1,
           *extra: str) -> None:
    sizing = () if "--replica-assignment" in extra else (
        "--partitions", str(partitions), "--replication-factor", "3")
    result = tool(topics.main, "--bootstrap-server", cluster.bootstrap(), "--create",
                  "--topic", name, *sizing, *extra)
    assert result.rc == 0, result.err
    for p in range(partitions):
        cluster.wait_isr(name, p, {1, 2, 3})


def partition_lines(out: str) -> dict[tuple[str, int], dict[str, str]]:
    found = {}
    for line in out.splitlines():
        m = PARTITION_LINE.match(line)
        if m:
            found[(m["topic"], int(m["p"]))] = m.groupdict()
    return found


def heal(cluster: Cluster, node: int, topic_partitions: Sequence[tuple[str, int]]) -> None:
    cluster.start(node)
    for topic, p in topic_partitions:
        cluster.wait_isr(topic, p, {1, 2, 3}, timeout=60)


# -- kafka-topics --describe -------------------------------------------------------------------
def test_describe_prints_kafkas_lines_and_filters_follow_a_broker_failure(
        cluster: Cluster, tool: Callable[..., Result]) -> None:
    """Kafka 3.9's describe lines match ZooKeeper's state; the four health filters print
    nothing on a healthy cluster, and after kill -9 of one broker exactly the partitions it
    held: under-replicated (ISR 2 of 3), at min ISR (2), not under min ISR; topic lines are
    left out as Kafka leaves them out under a filter."""
    create(tool, cluster, "health", 3, "--config", "min.insync.replicas=2")
    create(tool, cluster, "healthy-elsewhere", 1, "--replica-assignment", "1:2:3")
    described = tool(topics.main, "--bootstrap-server", cluster.bootstrap(), "--describe",
                     "--topic", "health")
    assert described.rc == 0, described.err
    assert re.match(r"^Topic: health\tTopicId: \S+\tPartitionCount: 3\tReplicationFactor: 3"
                    r"\tConfigs: min.insync.replicas=2$", described.lines[0])
    lines = partition_lines(described.out)
    assert sorted(lines) == [("health", 0), ("health", 1), ("health", 2)]
    for (t, p), fields in lines.items():
        state = cluster.state(t, p)
        assert fields["leader"] == str(state["leader"])
        assert fields["isr"] == ",".join(map(str, state["isr"]))
        # one replica on each broker, or on nodes (PYBROKER_NUM_CORES) on each node
        assert sorted(cluster.node_of(int(r)) for r in fields["replicas"].split(",")) == [1, 2, 3]

    def flt(flag: str) -> Result:
        return tool(topics.main, "--bootstrap-server", cluster.bootstrap(), "--describe",
                    "--topic", "health|healthy-elsewhere", flag)

    flags = ("--under-replicated-partitions", "--unavailable-partitions",
             "--under-min-isr-partitions", "--at-min-isr-partitions")
    for flag in flags:
        result = flt(flag)
        assert result.rc == 0 and result.out == "", (flag, result.out, result.err)

    victim = 3
    cluster.kill(victim)
    try:
        for p in range(3):
            cluster.wait_isr("health", p, {1, 2}, timeout=FAILOVER_S)
        cluster.wait_isr("healthy-elsewhere", 0, {1, 2}, timeout=FAILOVER_S)
        # The brokers' images follow ZooKeeper's ISR writes a moment later.
        expected = [("health", 0), ("health", 1), ("health", 2), ("healthy-elsewhere", 0)]
        under = cluster.wait_until(
            lambda: (lambda r: r if sorted(partition_lines(r.out)) == expected else None)(
                flt("--under-replicated-partitions")), 30,
            "every under-replicated partition in the tool's answer")
        assert not any(line.startswith("Topic:") for line in under.lines)
        got = partition_lines(under.out)
        assert sorted(got) == expected
        assert all(sorted(cluster.node_of(int(b)) for b in f["isr"].split(",")) == [1, 2]
                   for f in got.values()), got
        assert all(f["leader"] != "none" and cluster.node_of(int(f["leader"])) in (1, 2)
                   for f in got.values()), got
        # min.insync.replicas=2 on "health", the broker default (1) on the other.
        assert sorted(partition_lines(flt("--at-min-isr-partitions").out)) == [
            ("health", 0), ("health", 1), ("health", 2)]
        assert flt("--under-min-isr-partitions").out == ""
        assert flt("--unavailable-partitions").out == ""
    finally:
        heal(cluster, victim, [("health", p) for p in range(3)] + [("healthy-elsewhere", 0)])
    # As above: the brokers' images follow ZooKeeper's ISR a moment after the heal.
    cluster.wait_until(lambda: flt("--under-replicated-partitions").out == "", 30,
                       "no under-replicated partition in the tool's answer after the heal")


def test_unavailable_and_under_min_isr_show_a_partition_without_leader(
        cluster: Cluster, tool: Callable[..., Result]) -> None:
    """A partition on one broker only, that broker killed: `Leader: none`, listed by
    --unavailable-partitions and --under-min-isr-partitions (no leader counts as under)."""
    result = tool(topics.main, "--bootstrap-server", cluster.bootstrap(), "--create",
                  "--topic", "lonely", "--replica-assignment", "2")
    assert result.rc == 0, result.err
    cluster.wait_until(lambda: cluster.state("lonely", 0)["leader"] == 2, 30, "a leader")
    cluster.kill(2)
    try:
        cluster.wait_until(lambda: cluster.state("lonely", 0)["leader"] == -1, FAILOVER_S,
                           "lonely-0 to lose its leader")
        for flag in ("--unavailable-partitions", "--under-min-isr-partitions"):
            out = tool(topics.main, "--bootstrap-server", cluster.bootstrap(), "--describe",
                       "--topic", "lonely", flag).out
            assert out == ("\tTopic: lonely\tPartition: 0\tLeader: none\tReplicas: 2\tIsr: 2"
                           "\tElr: N/A\tLastKnownElr: N/A\n"), (flag, out)
    finally:
        cluster.start(2)
        cluster.wait_until(lambda: cluster.state("lonely", 0)["leader"] == 2, FAILOVER_S,
                           "lonely-0 led again")


# -- the pre-3.0 flags -------------------------------------------------------------------------
def test_zookeeper_create_list_describe(cluster: Cluster,
                                               tool: Callable[..., Result]) -> None:
    """Kafka 2.8's `kafka-topics --zookeeper host:port/chroot`: create writes Kafka's znodes
    (v3 assignment with a topic id, the config) and the controller elects leaders; list and
    describe read ZooKeeper (2.8's lines, without Elr)."""
    zk = cluster.connect
    created = tool(topics.main, "--zookeeper", zk, "--create", "--topic", "old-style",
                   "--partitions", "2", "--replication-factor", "3",
                   "--config", "retention.ms=3600000")
    assert created.rc == 0, created.err
    assert created.out == "Created topic old-style.\n"
    raw, _ = cluster.zk.get("/brokers/topics/old-style")
    data = json.loads(raw)
    assert data["version"] == 3 and data["topic_id"]
    assert {k: sorted(map(cluster.node_of, v)) for k, v in data["partitions"].items()} == {
        "0": [1, 2, 3], "1": [1, 2, 3]}
    assert data["partitions"]["0"][0] != data["partitions"]["1"][0]  # leaders spread
    raw, _ = cluster.zk.get("/config/topics/old-style")
    assert json.loads(raw) == {"version": 1, "config": {"retention.ms": "3600000"}}
    for p in range(2):
        cluster.wait_isr("old-style", p, {1, 2, 3})

    pinned = tool(topics.main, "--zookeeper", zk, "--create", "--topic", "pinned",
                  "--replica-assignment", "3:1,1:2")
    assert pinned.rc == 0, pinned.err
    raw, _ = cluster.zk.get("/brokers/topics/pinned")
    assert json.loads(raw)["partitions"] == {"0": [3, 1], "1": [1, 2]}
    again = tool(topics.main, "--zookeeper", zk, "--create", "--topic", "pinned",
                 "--replica-assignment", "3:1")
    assert again.rc == 1 and "Topic 'pinned' already exists." in again.err
    assert tool(topics.main, "--zookeeper", zk, "--create", "--topic", "pinned",
                "--replica-assignment", "3:1", "--if-not-exists").rc == 0
    brokers = len(cluster.ids) * cluster.cores  # a node runs `cores` brokers
    too_many = tool(topics.main, "--zookeeper", zk, "--create", "--topic", "big",
                    "--partitions", "1", "--replication-factor", str(brokers + 1))
    assert too_many.rc == 1
    assert (f"Replication factor: {brokers + 1} larger than available brokers: {brokers}."
            in too_many.err)

    listed = tool(topics.main, "--zookeeper", zk, "--list")
    assert {"old-style", "pinned"} <= set(listed.lines)
    described = tool(topics.main, "--zookeeper", zk, "--describe", "--topic", "old-style")
    assert described.rc == 0, described.err
    lines = described.lines
    topic_id = lines[0].split("\t")[1]
    assert re.match(r"TopicId: [A-Za-z0-9_-]{22}$", topic_id)
    assert lines[0] == (f"Topic: old-style\t{topic_id}\tPartitionCount: 2"
                        "\tReplicationFactor: 3\tConfigs: retention.ms=3600000")
    for p, line in enumerate(lines[1:]):
        state = cluster.state("old-style", p)
        replicas = ",".join(map(str, data["partitions"][str(p)]))
        assert line == (f"\tTopic: old-style\tPartition: {p}\tLeader: {state['leader']}"
                        f"\tReplicas: {replicas}\tIsr: {','.join(map(str, state['isr']))}")
    # The brokers agree: the same topic id through the admin API.
    modern = tool(topics.main, "--bootstrap-server", cluster.bootstrap(), "--describe",
                  "--topic", "old-style")
    assert topic_id in modern.lines[0]
    refused = tool(topics.main, "--zookeeper", zk, "--describe", "--under-min-isr-partitions")
    assert refused.rc == 1 and "can't be used with option \"[zookeeper]\"" in refused.err



def test_zookeeper_alter_adds_partitions_and_changes_configs(
        cluster: Cluster, tool: Callable[..., Result]) -> None:
    """Kafka 2.x's `kafka-topics --zookeeper --alter` (issue #35 §11): --partitions writes a
    longer assignment that the controller elects leaders for, continuing the round-robin or
    taking --replica-assignment's extra entries; --config/--delete-config rewrite
    /config/topics/T with 2.x's deprecation warning, and every broker serves the new
    overrides. A decrease and the offsets topic are refused with Kafka's messages."""
    zk = cluster.connect
    created = tool(topics.main, "--zookeeper", zk, "--create", "--topic", "grow",
                   "--partitions", "1", "--replication-factor", "3",
                   "--config", "retention.ms=3600000", "--config", "cleanup.policy=delete")
    assert created.rc == 0, created.err
    grown = tool(topics.main, "--zookeeper", zk, "--alter", "--topic", "grow",
                 "--partitions", "3")
    assert grown.rc == 0, grown.err
    assert grown.lines == ["WARNING: If partitions are increased for a topic that has a key, "
                           "the partition logic or ordering of the messages will be affected",
                           "Adding partitions succeeded!"]
    data = json.loads(cluster.zk.get("/brokers/topics/grow")[0])
    assert sorted(data["partitions"]) == ["0", "1", "2"]
    assert all(sorted(map(cluster.node_of, r)) == [1, 2, 3]
               for r in data["partitions"].values())
    for p in range(3):
        cluster.wait_isr("grow", p, {1, 2, 3})

    pinned = tool(topics.main, "--zookeeper", zk, "--alter", "--topic", "grow",
                  "--partitions", "4", "--replica-assignment", "1:2:3,1:2:3,1:2:3,3:2:1")
    assert pinned.rc == 0, pinned.err
    assert json.loads(cluster.zk.get("/brokers/topics/grow")[0])["partitions"]["3"] == [3, 2, 1]
    cluster.wait_isr("grow", 3, {1, 2, 3})
    cluster.wait_until(lambda: cluster.state("grow", 3)["leader"] == 3, 30, "3 to lead")

    configured = tool(topics.main, "--zookeeper", zk, "--alter", "--topic", "grow",
                      "--config", "retention.ms=7200000", "--config", "segment.ms=600000",
                      "--delete-config", "cleanup.policy")
    assert configured.rc == 0, configured.err
    assert configured.lines == [
        "WARNING: Altering topic configuration from this script has been deprecated and may "
        "be removed in future releases.",
        "         Going forward, please use kafka-configs.sh for this functionality",
        "Updated config for topic grow."]
    assert json.loads(cluster.zk.get("/config/topics/grow")[0])["config"] == {
        "retention.ms": "7200000", "segment.ms": "600000"}

    def served() -> list[str]:
        described = tool(topics.main, "--bootstrap-server", cluster.bootstrap(), "--describe",
                         "--topic", "grow")
        return [line for line in described.lines if line.startswith("Topic: grow")]

    cluster.wait_until(lambda: any("PartitionCount: 4" in line and
                                   "retention.ms=7200000" in line and
                                   "segment.ms=600000" in line and "cleanup.policy" not in line
                                   for line in served()), 30, "the brokers to serve the change")

    shrink = tool(topics.main, "--zookeeper", zk, "--alter", "--topic", "grow",
                  "--partitions", "2")
    assert shrink.rc == 1 and ("The number of partitions for a topic can only be increased. "
                               "Topic grow currently has 4 partitions, 2 would not be an "
                               "increase.") in shrink.err
    unknown = tool(topics.main, "--zookeeper", zk, "--alter", "--topic", "grow",
                   "--partitions", "5", "--replica-assignment", "1,1,1,1,7")
    assert unknown.rc == 1 and "Unknown broker(s) in replica assignment: 7." in unknown.err
    bad = tool(topics.main, "--zookeeper", zk, "--alter", "--topic", "grow",
               "--config", "retention.ms=soon")
    assert bad.rc == 1 and "retention.ms" in bad.err
    assert json.loads(cluster.zk.get("/brokers/topics/grow")[0])["partitions"].keys() == {
        "0", "1", "2", "3"}
    nothing = tool(topics.main, "--zookeeper", zk, "--alter", "--topic", "grow")
    assert nothing.rc == 1 and 'Missing required argument "[partitions]"' in nothing.err
    modern = tool(topics.main, "--bootstrap-server", cluster.bootstrap(), "--alter", "--topic",
                  "grow", "--partitions", "5", "--delete-config", "segment.ms")
    assert modern.rc == 1 and "delete-config option is no longer supported" in modern.err


def test_zookeeper_without_the_chroot_names_it(
        cluster: Cluster, own_zk_server: ZooKeeperProcess, tool: Callable[..., Result]) -> None:
    """Brokers registered under a chroot, tools given the bare host:port (issue #27): each
    says where the brokers are instead of answering empty."""
    assert cluster.chroot == "/pybroker"
    bare = own_zk_server.connect
    assert "/" not in bare
    hint = f"use --zookeeper {bare}/pybroker"
    listed = tool(topics.main, "--zookeeper", bare, "--list")
    assert listed.rc == 0 and listed.out == "" and hint in listed.err, listed
    created = tool(topics.main, "--zookeeper", bare, "--create", "--topic", "lost",
                   "--partitions", "1", "--replication-factor", "1")
    assert created.rc == 1
    assert "larger than available brokers: 0" in created.err and hint in created.err
    consumed = tool(console_consumer.main, "--zookeeper", bare, "--topic", "lost",
                    "--from-beginning")
    assert consumed.rc == 1
    assert f"No brokers are registered in ZooKeeper at {bare}" in consumed.err
    assert hint in consumed.err
    # With the chroot given, nothing is added.
    assert "use --zookeeper" not in tool(topics.main, "--zookeeper", cluster.connect,
                                         "--list").err


def test_zookeeper_delete_marks_and_the_controller_removes_the_topic(
        cluster: Cluster, tool: Callable[..., Result]) -> None:
    """`--zookeeper --delete` marks the topic (2.8's two lines); the controller removes it,
    znodes and every broker's logs; deleting it again says it does not exist."""
    zk = cluster.connect
    created = tool(topics.main, "--zookeeper", zk, "--create", "--topic", "old-school",
                   "--partitions", "2", "--replication-factor", "3")
    assert created.rc == 0, created.err
    for p in range(2):
        cluster.wait_isr("old-school", p, {1, 2, 3})
    deleted = tool(topics.main, "--zookeeper", zk, "--delete", "--topic", "old-school")
    assert deleted.rc == 0, deleted.err
    assert deleted.lines == ["Topic old-school is marked for deletion.",
                             "Note: This will have no impact if delete.topic.enable is not set "
                             "to true."]
    cluster.wait_until(lambda: cluster.zk.exists("/brokers/topics/old-school") is None, 30,
                       "the controller to delete old-school")
    cluster.wait_until(lambda: cluster.zk.exists("/admin/delete_topics/old-school") is None,
                       30, "the deletion marker to go")

    def logs_left() -> list[str]:
        return [str(d) for n in cluster.ids for log_dir in cluster.dirs_of(n)
                for d in log_dir.glob("old-school-*")]

    cluster.wait_until(lambda: not logs_left(), 30, "every broker to drop old-school's logs")
    assert "old-school" not in tool(topics.main, "--zookeeper", zk, "--list").lines
    missing = tool(topics.main, "--zookeeper", zk, "--delete", "--topic", "old-school")
    assert missing.rc == 1 and "Topic 'old-school' does not exist as expected" in missing.err


def test_list_shows_topics_marked_for_deletion(cluster: Cluster,
                                               tool: Callable[..., Result]) -> None:
    """A topic marked while the controller is paused (SIGSTOP, so the marker stays): Kafka
    2.8 lists it with " - marked for deletion", and a second --delete says it is already
    marked."""
    tool(topics.main, "--zookeeper", cluster.connect, "--create", "--topic", "doomed",
         "--replica-assignment", "1")
    cluster.wait_until(lambda: cluster.state("doomed", 0)["leader"] == 1, 30, "a leader")
    # Paused controller: the marker stays until it resumes.
    controller = cluster.controller()
    cluster.pause(controller)
    try:
        marked = tool(topics.main, "--zookeeper", cluster.connect, "--delete", "--topic",
                      "doomed")
        assert marked.rc == 0, marked.err
        listed = tool(topics.main, "--zookeeper", cluster.connect, "--list", "--topic",
                      "doomed")
        assert listed.lines == ["doomed - marked for deletion"]
        twice = tool(topics.main, "--zookeeper", cluster.connect, "--delete", "--topic",
                     "doomed")
        assert twice.lines == ["Topic doomed is already marked for deletion."]
    finally:
        cluster.resume(controller)


def test_broker_list_producer_and_zookeeper_consumer(cluster: Cluster,
                                                     tool: Callable[..., Result]) -> None:
    """The pre-2.0 quickstart: `kafka-console-producer --broker-list`, then
    `kafka-console-consumer --zookeeper host:port/chroot --from-beginning`, which finds the
    brokers through /brokers/ids and warns as Kafka 1.x did."""
    create(tool, cluster, "quickstart-old")
    produced = tool(console_producer.main, "--broker-list", cluster.bootstrap(), "--topic",
                    "quickstart-old", "--request-required-acks", "all",
                    stdin=b"This is a message\nThis is another message\n")
    assert produced.rc == 0, produced.err
    consumed = tool(console_consumer.main, "--zookeeper", cluster.connect, "--topic",
                    "quickstart-old", "--from-beginning", "--max-messages", "2",
                    "--timeout-ms", "20000")
    assert consumed.rc == 0, consumed.err
    assert consumed.lines == ["This is a message", "This is another message"]
    assert consumed.err.startswith("Using the ConsoleConsumer with old consumer is deprecated")
    assert "Processed a total of 2 messages" in consumed.err
    both = tool(console_consumer.main, "--zookeeper", cluster.connect, "--bootstrap-server",
                cluster.bootstrap(), "--topic", "x")
    assert both.rc == 1 and "not valid with [zookeeper]" in both.err


# -- kafka-leader-election ---------------------------------------------------------------------
def test_preferred_election_returns_leadership_to_the_preferred_replica(
        cluster: Cluster, tool: Callable[..., Result]) -> None:
    """The preferred replica bounces (kill -9, restart, back in the ISR) and leads nothing;
    `--election-type preferred --all-topic-partitions` gives its partition back to it. A
    second run finds nothing to do; `--topic/--partition` reports the valid replica; a
    non-controller broker answers NOT_CONTROLLER and the tool finds the controller."""
    result = tool(topics.main, "--bootstrap-server", cluster.bootstrap(), "--create",
                  "--topic", "prefer", "--replica-assignment", "2:3:1")
    assert result.rc == 0, result.err
    cluster.wait_isr("prefer", 0, {1, 2, 3})
    cluster.wait_until(lambda: cluster.leader("prefer", 0) == 2, 30, "broker 2 to lead")
    cluster.kill(2)
    cluster.wait_until(lambda: cluster.leader("prefer", 0) not in (2, -1), FAILOVER_S,
                       "a new leader")
    heal(cluster, 2, [("prefer", 0)])
    assert cluster.leader("prefer", 0) != 2

    answers: list[str] = []

    def elect() -> Result | None:
        # The controller's image follows ZooKeeper a moment after the ISR write the test
        # waited for: until it has broker 2 back in the ISR there is nothing to elect. The
        # election covers every partition of the module's cluster: one whose preferred
        # replica another test bounced may still fail (rc 1) in the same answer that elects
        # prefer-0 — which the next answer then rightly leaves out (a CI run).
        result = tool(leader_election.main, "--bootstrap-server", cluster.bootstrap(),
                      "--election-type", "preferred", "--all-topic-partitions")
        answers.append(f"rc={result.rc} out={result.out!r} err={result.err[-300:]!r}")
        elected = [line for line in result.lines if line.startswith(
            "Successfully completed leader election (PREFERRED) for partitions ")]
        if elected and "prefer-0" in elected[0].split("partitions ", 1)[1].split(", "):
            return result
        # An earlier answer may have been lost after the controller elected (the tool's
        # request timed out on a loaded machine): the next ones find nothing to do (rc 0,
        # no line: --all-topic-partitions leaves out ELECTION_NOT_NEEDED), and broker 2
        # leads — which only this tool can have done, with automatic rebalancing off.
        if result.rc == 0 and len(answers) > 1 and cluster.leader("prefer", 0) == 2:
            return result
        return None
    try:
        cluster.wait_until(elect, 30, "the preferred election of prefer-0")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the tool's answers: {answers[:2] + answers[-3:]}") \
            from None
    assert cluster.leader("prefer", 0) == 2

    single = tool(leader_election.main, "--bootstrap-server", cluster.bootstrap(),
                  "--election-type", "PREFERRED", "--topic", "prefer", "--partition", "0")
    assert single.rc == 0, single.err
    assert single.lines == ["Valid replica already elected for partitions prefer-0"]

    path = cluster.work_dir / "election.json"
    path.write_text(json.dumps({"partitions": [{"topic": "prefer", "partition": 0},
                                               {"topic": "prefer", "partition": 9}]}))
    from_file = tool(leader_election.main, "--bootstrap-server", cluster.bootstrap(),
                     "--election-type", "preferred", "--path-to-json-file", str(path))
    assert from_file.rc == 1
    assert from_file.lines == [
        "Valid replica already elected for partitions prefer-0",
        "Error completing leader election (PREFERRED) for partition: prefer-9: "
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
        + ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.message]
    assert from_file.err.strip() == "1 replica(s) could not be elected"

    controller = cluster.controller()
    other = next(n for n in cluster.ids if n != controller)
    body = {"election_type": 0, "topic_partitions": [{"topic": "prefer", "partitions": [0]}],
            "timeout_ms": 10000}
    raw = send_request(cluster.brokers[other].bootstrap, ApiKey.ELECT_LEADERS, 2, body)
    assert raw.error_code == 0
    assert [(r.topic, p.partition_id, p.error_code) for r in raw.replica_election_results
            for p in r.partition_result] == [("prefer", 0, ErrorCode.NOT_CONTROLLER)]
    via_other = tool(leader_election.main, "--bootstrap-server",
                     cluster.brokers[other].bootstrap, "--election-type", "preferred",
                     "--topic", "prefer", "--partition", "0")
    assert via_other.lines == ["Valid replica already elected for partitions prefer-0"]


def test_unclean_election_elects_a_replica_out_of_sync(tmp_path: Path,
                                                       zookeeper: ZooKeeperProcess,
                                                       tool: Callable[..., Result]) -> None:
    """Acceptance test 8 of REPLICATION.md: shrink the ISR to {A} by killing the others,
    kill A and restart one of the others (it becomes the controller): `Leader: none ...
    Isr: A`. The restarted replica, out of sync, does not lead (unclean election is off)
    until `kafka-leader-election --election-type unclean` elects it."""
    with running_cluster(tmp_path, zookeeper.connect) as c:
        # Right after start a broker's image may not list every broker yet ("Unknown
        # broker(s) in replica assignment"): ask until it does.
        c.wait_until(lambda: tool(topics.main, "--bootstrap-server", c.bootstrap(),
                                  "--create", "--if-not-exists", "--topic", "risky",
                                  "--replica-assignment", "1:2:3", "--config",
                                  "min.insync.replicas=1").rc == 0, 30, "risky created")
        c.wait_isr("risky", 0, {1, 2, 3})
        c.kill(2)
        c.kill(3)
        c.wait_isr("risky", 0, {1}, timeout=FAILOVER_S)
        c.kill(1)
        c.start(3)  # the controller now: it finds the only in-sync replica dead
        c.wait_until(lambda: c.state("risky", 0)["leader"] == -1, FAILOVER_S,
                     "risky-0 to go offline")
        assert c.state("risky", 0)["isr"] == [1]
        described = tool(topics.main, "--bootstrap-server", c.bootstrap(), "--describe",
                         "--topic", "risky", "--unavailable-partitions")
        assert described.lines == ["\tTopic: risky\tPartition: 0\tLeader: none\tReplicas: "
                                   "1,2,3\tIsr: 1\tElr: N/A\tLastKnownElr: N/A"]
        preferred = tool(leader_election.main, "--bootstrap-server", c.bootstrap(),
                         "--election-type", "preferred", "--topic", "risky", "--partition",
                         "0")
        assert preferred.rc == 1
        assert "PreferredLeaderNotAvailableException" in preferred.out
        elected = tool(leader_election.main, "--bootstrap-server", c.bootstrap(),
                       "--election-type", "unclean", "--topic", "risky", "--partition", "0")
        assert elected.rc == 0, elected.out + elected.err
        assert elected.lines == [
            "Successfully completed leader election (UNCLEAN) for partitions risky-0"]
        state = c.state("risky", 0)
        assert state["leader"] == 3 and state["isr"] == [3]
