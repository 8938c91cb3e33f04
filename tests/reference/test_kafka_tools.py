"""Apache Kafka's own command-line tools (4.1.1, from their jars) against pybroker (issue #14).

Each command is one JVM, as `bin/kafka-*.sh` runs it (about 2-3 s each), so the module shares
one broker (with the ACL authorizer, ANONYMOUS a super user, so that kafka-acls has something
to talk to) and keeps to one command per thing the tool does; leader election and
reassignment get a three-broker Cluster. Each test asserts what Kafka's tool prints, and where
pybroker has the same tool in bin/ a few outputs are compared line for line with ours.
"""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from compat import kafka_tools
from compat.apache_kafka import ApacheKafkaUnavailable
from pybroker.testing import Broker
from tests.helpers import ROOT
from tests.integration.raw import coordinator_id, leader_id


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    try:
        kafka_tools.classpath()  # fetched once, before the broker starts
    except ApacheKafkaUnavailable as exc:
        pytest.fail(f"Kafka's tools are unavailable: {exc}", pytrace=False)
    # A process, so that the suite's PYBROKER_NUM_CORES=2 runs the tools against a node of two
    # brokers, as the default of all cores will (issue #29 item 3): they must print what they
    # print for a cluster of two (each broker's log dirs, leaders on either).
    with Broker(process=True, authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
                super_users="User:ANONYMOUS") as b:
        yield b


def broker_ids(broker: Broker) -> list[int]:
    """The ids of the brokers `broker` runs: 0, and on a node worker K's 1000 K
    (docs/OPERATIONS.md, "One node, every core")."""
    return [1000 * k for k in range(len(broker.log_dirs()))]


def leader_of(broker: Broker, topic: str, partition: int) -> int:
    """The partition's leader as Metadata names it, which must be one of the node's brokers."""
    lead = leader_id(broker.bootstrap, topic, partition)
    assert lead in broker_ids(broker), (topic, partition, lead)
    return lead


def kafka(tool: str, *args: str, input: str | None = None, ok: bool = True,
          timeout: float = 60) -> subprocess.CompletedProcess[str]:
    began = time.monotonic()
    done = kafka_tools.run(tool, list(args), input=input, timeout=timeout)
    print(f"{time.monotonic() - began:5.1f} s  {tool} {shlex.join(args)}")
    if ok:
        assert done.returncode == 0, f"{tool} {shlex.join(args)} exited {done.returncode}:\n" \
            f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done


def ours(tool: str, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(ROOT / "bin" / tool), *args], input=input, capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, f"bin/{tool} {shlex.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


def table(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


def test_topics_create_list_describe_alter_delete(broker: Broker) -> None:
    b = broker.bootstrap
    out = kafka("kafka-topics", "--bootstrap-server", b, "--create", "--topic", "kt-topics",
                "--partitions", "2", "--config", "retention.ms=3600000").stdout
    assert out.strip() == "Created topic kt-topics."
    assert "kt-topics" in kafka("kafka-topics", "--bootstrap-server", b, "--list").stdout.split()
    kafka("kafka-topics", "--bootstrap-server", b, "--alter", "--topic", "kt-topics",
          "--partitions", "3")
    described = kafka("kafka-topics", "--bootstrap-server", b, "--describe",
                      "--topic", "kt-topics").stdout
    lines = described.splitlines()
    assert re.fullmatch(r"Topic: kt-topics\tTopicId: \S{22}\tPartitionCount: 3\t"
                        r"ReplicationFactor: 1\tConfigs: retention.ms=3600000", lines[0]), lines[0]
    for p in range(3):
        lead = leader_of(broker, "kt-topics", p)
        assert f"\tTopic: kt-topics\tPartition: {p}\tLeader: {lead}\tReplicas: {lead}" \
            f"\tIsr: {lead}\tElr: N/A\tLastKnownElr: N/A" == lines[1 + p]
    # pybroker's kafka-topics prints the same description.
    mine = ours("kafka-topics", "--bootstrap-server", b, "--describe", "--topic", "kt-topics")
    assert mine.stdout == described, f"ours:\n{mine.stdout}\nKafka's:\n{described}"
    kafka("kafka-topics", "--bootstrap-server", b, "--delete", "--topic", "kt-topics")
    assert "kt-topics" not in ours("kafka-topics", "--bootstrap-server", b, "--list").stdout.split()


def test_console_producer_consumer_and_consumer_groups(broker: Broker) -> None:
    b = broker.bootstrap
    broker.create_topic("kt-console", partitions=1)
    kafka("kafka-console-producer", "--bootstrap-server", b, "--topic", "kt-console",
          "--property", "parse.key=true", "--property", "parse.headers=true",
          input="h1:v1\tk1\tone\nh2:v2\tk2\ttwo\nh3:v3,h4:\tk3\tthree\n")
    consumed = kafka("kafka-console-consumer", "--bootstrap-server", b, "--topic", "kt-console",
                     "--from-beginning", "--group", "kt-g", "--max-messages", "3",
                     "--property", "print.key=true", "--property", "print.headers=true",
                     "--property", "print.offset=true")
    assert consumed.stdout.splitlines() == [
        "Offset:0\th1:v1\tk1\tone", "Offset:1\th2:v2\tk2\ttwo", "Offset:2\th3:v3,h4:\tk3\tthree"]
    assert "Processed a total of 3 messages" in consumed.stderr
    assert "kt-g" in kafka("kafka-consumer-groups", "--bootstrap-server", b, "--list").stdout.split()
    described = kafka("kafka-consumer-groups", "--bootstrap-server", b, "--describe",
                      "--group", "kt-g").stdout
    rows = table(described)
    assert rows[0][:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                           "LAG"], described
    assert rows[1][:6] == ["kt-g", "kt-console", "0", "3", "3", "0"], described
    mine = ours("kafka-consumer-groups", "--bootstrap-server", b, "--describe", "--group", "kt-g")
    assert table(mine.stdout) == rows, f"ours:\n{mine.stdout}\nKafka's:\n{described}"
    reset = kafka("kafka-consumer-groups", "--bootstrap-server", b, "--reset-offsets",
                  "--group", "kt-g", "--topic", "kt-console", "--to-offset", "1",
                  "--execute").stdout
    assert table(reset)[1] == ["kt-g", "kt-console", "0", "1"], reset
    deleted = kafka("kafka-consumer-groups", "--bootstrap-server", b, "--delete",
                    "--group", "kt-g").stdout
    assert "Deletion of requested consumer groups ('kt-g') was successful." in deleted
    assert "kt-g" not in ours("kafka-consumer-groups", "--bootstrap-server", b,
                              "--list").stdout.split()


def test_configs_topics_brokers_users(broker: Broker) -> None:
    b = broker.bootstrap
    broker.create_topic("kt-configs")
    altered = kafka("kafka-configs", "--bootstrap-server", b, "--alter", "--entity-type",
                    "topics", "--entity-name", "kt-configs", "--add-config",
                    "retention.ms=60000,cleanup.policy=compact").stdout
    assert altered.strip() == "Completed updating config for topic kt-configs."
    described = kafka("kafka-configs", "--bootstrap-server", b, "--describe", "--entity-type",
                      "topics", "--entity-name", "kt-configs").stdout
    assert described.splitlines()[0] == "Dynamic configs for topic kt-configs are:"
    assert "  cleanup.policy=compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:" \
        "cleanup.policy=compact, DEFAULT_CONFIG:log.cleanup.policy=delete}" in described
    mine = ours("kafka-configs", "--bootstrap-server", b, "--describe", "--entity-type",
                "topics", "--entity-name", "kt-configs")
    assert sorted(mine.stdout.splitlines()) == sorted(described.splitlines()), \
        f"ours:\n{mine.stdout}\nKafka's:\n{described}"
    brokers = kafka("kafka-configs", "--bootstrap-server", b, "--describe", "--entity-type",
                    "brokers", "--entity-name", "0", "--all").stdout
    assert brokers.splitlines()[0] == "All configs for broker 0 are:"
    assert re.search(r"^  log\.retention\.hours=168 sensitive=false", brokers, re.M), brokers
    # Kafka's tool alters quotas and SCRAM credentials with different requests, one per run.
    for config in ("SCRAM-SHA-256=[iterations=4096,password=alice-secret]",
                   "producer_byte_rate=1024"):
        kafka("kafka-configs", "--bootstrap-server", b, "--alter", "--entity-type", "users",
              "--entity-name", "alice", "--add-config", config)
    users = kafka("kafka-configs", "--bootstrap-server", b, "--describe", "--entity-type",
                  "users", "--entity-name", "alice").stdout
    assert "Quota configs for user-principal 'alice' are producer_byte_rate=1024.0" in users, users
    assert "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=" \
        "iterations=4096" in users, users


def test_configs_dynamic_broker_configs(broker: Broker) -> None:
    """KIP-226 through Kafka's kafka-configs.sh: a cluster default is stored and described
    as ours describes it; a key Kafka reads only at start is refused in Kafka's words. The
    value is the default's own, so the module's other tests see no change."""
    b = broker.bootstrap
    altered = kafka("kafka-configs", "--bootstrap-server", b, "--alter", "--entity-type",
                    "brokers", "--entity-default", "--add-config",
                    "log.cleaner.min.cleanable.ratio=0.5").stdout
    assert altered.strip() == "Completed updating default config for brokers in the cluster."
    described = kafka("kafka-configs", "--bootstrap-server", b, "--describe", "--entity-type",
                      "brokers", "--entity-default").stdout
    assert described.splitlines() == [
        "Default configs for brokers in the cluster are:",
        "  log.cleaner.min.cleanable.ratio=0.5 sensitive=false synonyms="
        "{DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.min.cleanable.ratio=0.5}"]
    mine = ours("kafka-configs", "--bootstrap-server", b, "--describe", "--entity-type",
                "brokers", "--entity-default")
    assert mine.stdout == described
    refused = kafka("kafka-configs", "--bootstrap-server", b, "--alter", "--entity-type",
                    "brokers", "--entity-name", "0", "--add-config", "num.partitions=3",
                    ok=False)
    assert refused.returncode != 0
    assert "Cannot update these configs dynamically: Set(num.partitions)" in \
        refused.stdout + refused.stderr


def test_get_offsets_and_delete_records(broker: Broker, tmp_path: Path) -> None:
    b = broker.bootstrap
    broker.create_topic("kt-offsets", partitions=2)
    kafka("kafka-producer-perf-test", "--topic", "kt-offsets", "--num-records", "200",
          "--record-size", "10", "--throughput", "-1", "--producer-props",
          f"bootstrap.servers={b}", "acks=all", "partitioner.class="
          "org.apache.kafka.clients.producer.RoundRobinPartitioner")
    latest = kafka("kafka-get-offsets", "--bootstrap-server", b, "--topic", "kt-offsets").stdout
    assert latest.splitlines() == ["kt-offsets:0:100", "kt-offsets:1:100"], latest
    mine = ours("kafka-get-offsets", "--bootstrap-server", b, "--topic", "kt-offsets")
    assert mine.stdout == latest, f"ours:\n{mine.stdout}\nKafka's:\n{latest}"
    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "kt-offsets", "partition": 0, "offset": 40}]}))
    deleted = kafka("kafka-delete-records", "--bootstrap-server", b, "--offset-json-file",
                    str(spec)).stdout
    assert "partition: kt-offsets-0\tlow_watermark: 40" in deleted, deleted
    earliest = kafka("kafka-get-offsets", "--bootstrap-server", b, "--topic", "kt-offsets",
                     "--time", "earliest").stdout
    assert earliest.splitlines() == ["kt-offsets:0:40", "kt-offsets:1:0"], earliest


def test_perf_tests(broker: Broker) -> None:
    b = broker.bootstrap
    broker.create_topic("kt-perf", partitions=3)
    produced = kafka("kafka-producer-perf-test", "--topic", "kt-perf", "--num-records", "3000",
                     "--record-size", "100", "--throughput", "-1", "--producer-props",
                     f"bootstrap.servers={b}", "compression.type=lz4").stdout
    assert re.search(r"^3000 records sent, [\d.]+ records/sec", produced, re.M), produced
    consumed = kafka("kafka-consumer-perf-test", "--bootstrap-server", b, "--topic", "kt-perf",
                     "--messages", "3000", "--timeout", "20000").stdout
    header, row = consumed.strip().splitlines()[-2:]
    assert header.startswith("start.time, end.time, data.consumed.in.MB"), consumed
    assert row.split(", ")[4].strip() == "3000", consumed  # data.consumed.in.nMsg


def test_log_dirs(broker: Broker) -> None:
    broker.create_topic("kt-logdirs")
    out = kafka("kafka-log-dirs", "--bootstrap-server", broker.bootstrap, "--describe",
                "--topic-list", "kt-logdirs").stdout
    found = json.loads(out.strip().splitlines()[-1])
    # Every broker of the cluster with its log dir; the partition in its leader's only.
    lead = leader_of(broker, "kt-logdirs", 0)
    assert [b["broker"] for b in found["brokers"]] == broker_ids(broker), found
    for described, log_dir in zip(found["brokers"], broker.log_dirs()):
        (entry,) = described["logDirs"]
        assert entry["error"] is None and entry["logDir"] == str(log_dir), entry
        assert [p["partition"] for p in entry["partitions"]] == \
            (["kt-logdirs-0"] if described["broker"] == lead else []), entry


def test_acls(broker: Broker) -> None:
    b = broker.bootstrap
    kafka("kafka-acls", "--bootstrap-server", b, "--add", "--allow-principal", "User:alice",
          "--operation", "Read", "--topic", "kt-acl", "--group", "kt-acl-g")
    listed = kafka("kafka-acls", "--bootstrap-server", b, "--list", "--topic", "kt-acl").stdout
    assert "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=kt-acl, " \
        "patternType=LITERAL)`:" in listed, listed
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in listed



def acl_blocks(text: str) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """kafka-acls output as (header, each entry line's lead, the entries sorted): Kafka keeps
    resources and entries in Java hash sets, whose order is not ours to copy, but every
    character of every line is."""
    assert text == "" or text.endswith("\n\n"), repr(text)
    blocks = []
    for block in text[:-2].split("\n\n") if text else []:
        header, *entries = block.split("\n")
        if header.startswith("ACLs for principal"):
            blocks.append((header, (), ()))
            header, *entries = entries
        leads = tuple(e[:e.index("(")] for e in entries)
        blocks.append((header, leads, tuple(sorted(e[len(lead):]
                                                   for e, lead in zip(entries, leads)))))
    return sorted(blocks)


def test_acls_output_is_kafkas(broker: Broker) -> None:
    """Each command run by Kafka's kafka-acls, then by ours on the same ACLs: the same text."""
    b = broker.bootstrap

    def both(*args: str) -> str:
        theirs = kafka("kafka-acls", "--bootstrap-server", b, *args).stdout
        done = subprocess.run([sys.executable, "-m", "pybroker.tools.acls",
                               "--bootstrap-server", b, *args], capture_output=True,
                              text=True, timeout=60, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        assert acl_blocks(done.stdout) == acl_blocks(theirs), (done.stdout, theirs)
        return theirs

    added = both("--add", "--allow-principal", "User:ann", "--allow-principal", "User:cy",
                 "--operation", "Read", "--operation", "Describe", "--topic", "cmp-t",
                 "--group", "cmp-g")
    assert added.startswith("Adding ACLs for resource `ResourcePattern(resourceType=GROUP, "
                            "name=cmp-g, patternType=LITERAL)`: \n \t(principal=User:"), added
    assert "Current ACLs" not in added
    both("--add", "--deny-principal", "User:bo", "--operation", "Write", "--topic", "cmp-",
         "--resource-pattern-type", "prefixed")
    listed = both("--list", "--topic", "cmp-t")
    assert listed.startswith("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, "
                             "name=cmp-t, patternType=LITERAL)`:\n\t(principal=User:"), listed
    assert "PREFIXED" not in listed  # literal is the default pattern type of --list too
    assert "PREFIXED" in both("--list", "--topic", "cmp-t", "--resource-pattern-type", "match")
    both("--list", "--principal", "User:ann")
    both("--list")
    assert both("--remove", "--force", "--allow-principal", "User:ann", "--operation",
                "Describe", "--topic", "cmp-t") == ""
    both("--list", "--topic", "cmp-t")
    assert both("--remove", "--force", "--topic", "cmp-t", "--group", "cmp-g") == ""
    assert both("--list", "--topic", "cmp-t") == ""
    assert both("--remove", "--force", "--topic", "cmp-", "--resource-pattern-type",
                "prefixed") == ""


def test_transactions(broker: Broker) -> None:
    b = broker.bootstrap
    broker.create_topic("kt-txn")
    kafka("kafka-producer-perf-test", "--topic", "kt-txn", "--num-records", "100",
          "--record-size", "10", "--throughput", "-1", "--transactional-id", "kt-tid",
          "--transaction-duration-ms", "100", "--producer-props", f"bootstrap.servers={b}")
    listed = table(kafka("kafka-transactions", "--bootstrap-server", b, "list").stdout)
    assert listed[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    coordinator = coordinator_id(b, "kt-tid", key_type=1)
    assert coordinator in broker_ids(broker), coordinator
    assert [r for r in listed if r[0] == "kt-tid"][0][1:2] == [str(coordinator)], listed
    described = table(kafka("kafka-transactions", "--bootstrap-server", b, "describe",
                            "--transactional-id", "kt-tid").stdout)
    assert described[0][:4] == ["CoordinatorId", "TransactionalId", "ProducerId",
                                "ProducerEpoch"], described
    assert described[1][:2] == [str(coordinator), "kt-tid"], described


# -- a cluster: leader election and reassignment -------------------------------------------------

def test_leader_election_and_reassign_partitions(tmp_path: Path) -> None:
    from pybroker.testing.cluster import Cluster
    kafka_tools.classpath()
    with Cluster(3) as cluster:
        b = cluster.bootstrap
        cluster.create_topic("kt-moved", partitions=1, replication_factor=2)
        replicas = cluster.replicas_of("kt-moved")
        preferred = replicas[0]
        # The preferred leader fails and comes back as a follower: leadership stays away.
        cluster.stop_broker(preferred)
        cluster.start_broker(preferred)
        cluster.wait_for_isr("kt-moved", 0)
        assert cluster.leader_of("kt-moved") == replicas[1]
        elected = kafka("kafka-leader-election", "--bootstrap-server", b, "--election-type",
                        "preferred", "--topic", "kt-moved", "--partition", "0").stdout
        assert "Successfully completed leader election (PREFERRED) for partitions kt-moved-0" \
            in elected, elected
        cluster.wait_until(lambda: cluster.leader_of("kt-moved") == preferred,
                           "the preferred leader back")
        target = sorted({0, 1, 2} - {replicas[1]})
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "kt-moved", "partition": 0, "replicas": target}]}))
        sources = sorted(replicas)
        started = kafka("kafka-reassign-partitions", "--bootstrap-server", b,
                        "--reassignment-json-file", str(plan), "--execute",
                        "--throttle", "1000000").stdout
        assert "Successfully started partition reassignment for kt-moved-0" in started, started
        # Kafka's tool throttles the sources as leaders and the new replica as follower, on
        # every broker taking part (here all three).
        assert "The inter-broker throttle limit was set to 1000000 B/s" in started, started
        topic = cluster.server(preferred).broker.topic_configs.topic_config("kt-moved")
        assert topic.leader_replication_throttled_replicas == tuple(f"0:{r}" for r in sources)
        assert topic.follower_replication_throttled_replicas == \
            tuple(f"0:{r}" for r in sorted(set(target) - set(sources)))
        cluster.wait_until(lambda: all(
            cluster.server(n).broker.dynamic_config.current.follower_replication_throttled_rate
            == 1000000 for n in (0, 1, 2)), "every broker to apply the throttle")
        cluster.wait_until(lambda: sorted(cluster.replicas_of("kt-moved")) == target,
                           "the reassignment to finish")
        verified: list[str] = []

        def done() -> bool:
            verified.append(kafka("kafka-reassign-partitions", "--bootstrap-server", b,
                                  "--reassignment-json-file", str(plan), "--verify").stdout)
            return "is completed" in verified[-1]
        cluster.wait_until(done, "--verify to see the move done")
        assert verified[-1].splitlines()[-2:] == [
            "Clearing broker-level throttles on brokers 0,1,2",
            "Clearing topic-level throttles on topic kt-moved"], verified[-1]
        unlimited = 2**63 - 1
        cluster.wait_until(lambda: all(
            (cluster.server(n).broker.dynamic_config.current.leader_replication_throttled_rate,
             cluster.server(n).broker.dynamic_config.current.follower_replication_throttled_rate,
             cluster.server(n).broker.topic_configs.topic_config("kt-moved")
             .leader_replication_throttled_replicas) == (unlimited, unlimited, ())
            for n in (0, 1, 2)), "--verify to clear the throttles")


# -- the README's quickstart, typed with Kafka's tools -------------------------------------------

def test_readme_quickstart_with_kafkas_tools(broker: Broker) -> None:
    from tests.readme_quickstart import quickstart_steps
    outputs = []
    for line, typed in quickstart_steps():
        argv = shlex.split(line.replace("localhost:9092", broker.bootstrap))
        tool = Path(argv[0]).name.removesuffix(".sh")
        outputs.append(kafka(tool, *argv[1:], input="\n".join(typed) + "\n" if typed else None))
    create, listing, _, consume, describe, group = outputs
    assert "Created topic test." in create.stdout
    assert "test" in listing.stdout.split()
    assert consume.stdout.splitlines() == ["first event", "second event"]
    assert "Processed a total of 2 messages" in consume.stderr
    assert re.search(r"Topic: test\tTopicId: \S+\tPartitionCount: 1\tReplicationFactor: 1",
                     describe.stdout), describe.stdout
    lead = leader_of(broker, "test", 0)
    assert re.search(rf"Partition: 0\s+Leader: {lead}\s+Replicas: {lead}\s+Isr: {lead}\s",
                     describe.stdout), describe.stdout
    row = next(r for r in table(group.stdout) if r[0] == "quickstart")
    assert row[1:6] == ["test", "0", "2", "2", "0"], group.stdout
