"""kafka-reassign-partitions against a real four-broker cluster on a real ZooKeeper, as the
operations pages use it: --generate a move of whole topics to other brokers, --execute it,
--verify until done (the data intact, the old copies gone); --list and --cancel while a move
waits on a broker that cannot catch up (paused with SIGSTOP); and the one-line errors of
bad input.

The tool runs in-process (`main(argv)`, output captured); the brokers are subprocesses. One
cluster serves the module; the test that kills a broker starts it again before returning.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Iterator, Sequence

import pytest

from pybroker.tools import reassign_partitions
from tests.cluster.brokers import SESSION_TIMEOUT_MS, Cluster, running_cluster
from pybroker.testing.zookeeper import ZooKeeperProcess
from tests.helpers import Result

Tool = Callable[..., Result]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zk_server: ZooKeeperProcess
            ) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("cluster"), zk_server.connect, size=4) as c:
        yield c


@pytest.fixture
def reassign(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> Tool:
    """reassign("--execute", ...) -> Result, with --bootstrap-server filled in."""
    def call(*argv: str) -> Result:
        capsys.readouterr()
        rc = reassign_partitions.main(["--bootstrap-server", cluster.bootstrap(), *argv])
        captured = capsys.readouterr()
        return Result(rc, captured.out, captured.err)
    return call


def create(cluster: Cluster, topic: str, assignment: dict[int, list[int]],
           records: int = 0) -> list[bytes]:
    """A topic with the given replicas, `records` values written with acks=all."""
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap().split(","))
    try:
        admin.create_topics([NewTopic(topic, replica_assignments=assignment)])
    finally:
        admin.close()
    for p, replicas in assignment.items():
        cluster.wait_isr(topic, p, set(replicas))
    values = [b"%s-%05d" % (topic.encode(), i) + b"." * 200 for i in range(records)]
    if values:
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap().split(","), acks="all",
                                 linger_ms=10)
        for i, v in enumerate(values):
            producer.send(topic, v, partition=i % len(assignment))
        producer.flush(timeout=60)
        producer.close()
    return values


def consume(cluster: Cluster, topic: str) -> list[bytes]:
    from kafka import KafkaConsumer
    consumer = KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap().split(","),
                             auto_offset_reset="earliest", consumer_timeout_ms=8000)
    try:
        return [m.value for m in consumer]
    finally:
        consumer.close()


def replicas(cluster: Cluster, topic: str) -> dict[int, list[int]]:
    raw, _ = cluster.zk.get(f"/brokers/topics/{topic}")
    return {int(p): r for p, r in json.loads(raw)["partitions"].items()}


def write(path: Path, document: object) -> str:
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return str(path)


def json_after(lines: Sequence[str], heading: str) -> dict:
    return json.loads(lines[list(lines).index(heading) + 1])


def test_generate_execute_verify_moves_topics_to_other_brokers(
        cluster: Cluster, reassign: Tool, tmp_path: Path) -> None:
    values = {t: create(cluster, t, {0: [1, 2], 1: [2, 1], 2: [1, 2]}, records=300)
              for t in ("foo1", "foo2")}
    topics = write(tmp_path / "topics-to-move.json",
                   {"topics": [{"topic": "foo1"}, {"topic": "foo2"}], "version": 1})
    done = reassign("--topics-to-move-json-file", topics, "--broker-list", "3,4", "--generate")
    assert (done.rc, done.err) == (0, "")
    assert done.lines[0] == "Current partition replica assignment"
    assert done.lines[2:4] == ["", "Proposed partition reassignment configuration"]
    assert len(done.lines) == 5
    current = json_after(done.lines, "Current partition replica assignment")
    assert current == {"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any", "any"]}
        for t in ("foo1", "foo2") for p, r in ((0, [1, 2]), (1, [2, 1]), (2, [1, 2]))]}
    proposal = json_after(done.lines, "Proposed partition reassignment configuration")
    assert [(e["topic"], e["partition"]) for e in proposal["partitions"]] == \
        [(t, p) for t in ("foo1", "foo2") for p in range(3)]
    for entry in proposal["partitions"]:
        assert sorted(entry["replicas"]) == [3, 4] and entry["log_dirs"] == ["any", "any"]
    # assign_replicas spreads leaders round-robin: 3 partitions over 2 brokers, both lead
    assert {e["replicas"][0] for e in proposal["partitions"][:3]} == {3, 4}

    plan = tmp_path / "expand-cluster-reassignment.json"
    plan.write_text(done.lines[4])
    done = reassign("--reassignment-json-file", str(plan), "--execute")
    assert (done.rc, done.err) == (0, "")
    assert done.lines[:2] == ["Current partition replica assignment", ""]
    assert json.loads(done.lines[2]) == current
    assert done.lines[3:] == [
        "", "Save this to use as the --reassignment-json-file option during rollback",
        "Successfully started partition reassignments for "
        "foo1-0,foo1-1,foo1-2,foo2-0,foo2-1,foo2-2"]

    def verified() -> Result | None:
        result = reassign("--reassignment-json-file", str(plan), "--verify")
        assert (result.rc, result.err) == (0, "")
        return result if "still in progress" not in result.out else None
    done = cluster.wait_until(verified, 60, "--verify to report every move completed")
    # every broker of the cluster: on nodes (PYBROKER_NUM_CORES) each node's brokers
    every = ",".join(map(str, sorted(b for n in cluster.ids for b in cluster.broker_ids(n))))
    assert done.lines == ["Status of partition reassignment:"] + [
        f"Reassignment of partition {t}-{p} is completed."
        for t in ("foo1", "foo2") for p in range(3)] + [
        "", f"Clearing broker-level throttles on brokers {every}",
        "Clearing topic-level throttles on topics foo1,foo2"]

    for topic in ("foo1", "foo2"):
        wanted = {e["partition"]: e["replicas"] for e in proposal["partitions"]
                  if e["topic"] == topic}
        assert replicas(cluster, topic) == wanted
        for p, target in wanted.items():
            cluster.wait_isr(topic, p, set(target))
            assert cluster.leader(topic, p) in target
            for node in (1, 2):
                cluster.wait_until(
                    lambda: not (cluster.work_dir / f"broker-{node}" / f"{topic}-{p}").exists(),
                    30, f"broker {node}'s copy of {topic}-{p} to be removed")
            assert cluster.segment_bytes(3, topic, p) == cluster.segment_bytes(4, topic, p)
        assert sorted(consume(cluster, topic)) == sorted(values[topic])
    assert reassign("--list").out == "No partition reassignments found.\n"

    # --verify of a plan the cluster does not match says so, and still exits 0.
    other = write(tmp_path / "other.json", {"partitions": [
        {"topic": "foo1", "partition": 0, "replicas": [1, 2]}]})
    done = reassign("--reassignment-json-file", other, "--verify", "--preserve-throttles")
    assert (done.rc, done.lines) == (0, [
        "Status of partition reassignment:",
        f"There is no active reassignment of partition foo1-0, but replica set is "
        f"{','.join(map(str, replicas(cluster, 'foo1')[0]))} rather than 1,2.", ""])


def test_list_verify_and_cancel_while_a_move_waits(cluster: Cluster, reassign: Tool,
                                                   tmp_path: Path) -> None:
    controller = cluster.controller()
    new = max(n for n in cluster.ids if n != controller)
    origin = [n for n in cluster.ids if n != new]
    target = origin[1:] + [new]
    values = create(cluster, "held", {0: origin}, records=2000)
    plan = write(tmp_path / "plan.json", {"version": 1, "partitions": [
        {"topic": "held", "partition": 0, "replicas": target}]})
    # Paused (not dead: still registered), `new` cannot catch up, so the move waits. The
    # pause stays well under the ZooKeeper session timeout.
    cluster.pause(new)
    try:
        execute = reassign("--reassignment-json-file", plan, "--execute")
        listed = reassign("--list")
        verify = reassign("--reassignment-json-file", plan, "--verify")
        again = reassign("--reassignment-json-file", plan, "--execute")
        # --preserve-throttles: clearing them asks every broker, the paused one too, which
        # answers nothing until resumed (Kafka's tool would wait for it the same way).
        cancel = reassign("--reassignment-json-file", plan, "--cancel", "--preserve-throttles")
    finally:
        cluster.resume(new)
    assert (execute.rc, execute.lines[-1]) == (0, "Successfully started partition "
                                               "reassignment for held-0")
    whole = ",".join(map(str, target + [origin[0]]))
    assert (listed.rc, listed.lines) == (0, [
        "Current partition reassignments:",
        f"held-0: replicas: {whole}. adding: {new}. removing: {origin[0]}."])
    # Not done: the status line, the empty log-dir report, and no throttle clearing.
    assert (verify.rc, verify.lines) == (0, [
        "Status of partition reassignment:",
        "Reassignment of partition held-0 is still in progress.", ""])
    assert (again.rc, again.out) == (1, "")
    assert again.err == (
        "Cannot execute because there is an existing partition assignment.  Use --additional "
        "to override this and create a new partition assignment in addition to the existing "
        "one. The --additional flag can also be used to change the throttle by resubmitting "
        "the current reassignment.\n")
    assert (cancel.rc, cancel.err, cancel.lines) == (0, "", [
        "Successfully cancelled partition reassignment for: held-0",
        "None of the specified partition moves are active."])

    # The original replicas are back, in the widened set's order (target first) less the
    # added one: Kafka's ZooKeeper controller restores them so too (`originReplicas` is
    # `replicas.diff(addingReplicas)`), so the preferred leader may change on a cancel.
    assert replicas(cluster, "held") == {0: target[:-1] + origin[:1]}
    cluster.wait_isr("held", 0, set(origin))
    assert reassign("--list").lines == ["No partition reassignments found."]
    done = reassign("--reassignment-json-file", plan, "--cancel", "--preserve-throttles")
    assert (done.rc, done.lines) == (0, [
        "None of the specified partition reassignments are active.",
        "None of the specified partition moves are active."])
    cluster.wait_until(
        lambda: not (cluster.work_dir / f"broker-{new}" / "held-0").exists(), 30,
        f"broker {new}'s partial copy to be removed after the cancel")
    assert sorted(consume(cluster, "held")) == sorted(values)


def test_bad_input_gives_kafkas_one_line_errors(cluster: Cluster, reassign: Tool,
                                                 tmp_path: Path) -> None:
    create(cluster, "solid", {0: [1, 2]})

    def fails(*argv: str) -> str:
        result = reassign(*argv)
        assert (result.rc, result.out) == (1, ""), result
        assert result.err.count("\n") == 1, result.err
        return result.err.rstrip("\n")

    def plan(document: object) -> str:
        return write(tmp_path / "plan.json", document)

    assert fails("--reassignment-json-file", plan('{"version":1,"partitions":[{"topic"'),
                 "--execute").startswith(
        "Error: com.fasterxml.jackson.core.JsonParseException: ")
    assert fails("--reassignment-json-file", plan({"partitions": [
        {"topic": "nope", "partition": 0, "replicas": [1, 2]}]}), "--execute") == (
        "Error: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
        "Topic nope not found.")
    assert fails("--reassignment-json-file", plan({"partitions": [
        {"topic": "solid", "partition": 7, "replicas": [1, 2]}]}), "--execute") == (
        "Error: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
        "Unable to find partition: solid-7")
    assert fails("--reassignment-json-file", plan({"partitions": [
        {"topic": "solid", "partition": 0, "replicas": [1, 99]}]}), "--execute") == (
        "Error: Unknown broker id 99")
    topics = write(tmp_path / "topics.json", {"topics": [{"topic": "nope"}]})
    assert fails("--topics-to-move-json-file", topics, "--broker-list", "1,2",
                 "--generate") == (
        "Error: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
        "Topic nope not found.")
    topics = write(tmp_path / "topics.json", {"topics": [{"topic": "solid"}]})
    assert fails("--topics-to-move-json-file", topics, "--broker-list", "1,99",
                 "--generate") == (
        "Error: Replication factor: 2 larger than available brokers: 1.")
    assert replicas(cluster, "solid") == {0: [1, 2]}

    # A broker that died: once its registration is gone, it is unknown like any other id.
    controller = cluster.controller()
    dead = max(n for n in cluster.ids if n not in (1, 2, controller))
    cluster.kill(dead)
    try:
        cluster.wait_until(lambda: cluster.zk.exists(f"/brokers/ids/{dead}") is None,
                           SESSION_TIMEOUT_MS / 1000 + 20, f"broker {dead} to leave")
        dead_plan = plan({"partitions": [
            {"topic": "solid", "partition": 0, "replicas": [1, dead]}]})
        # The brokers learn of it from their ZooKeeper watches, a moment later (seconds on
        # a loaded machine: a CI run once needed more than 10). Until every live broker has,
        # the tool may be told the broker still exists and really start a move to it (a CI
        # run: every later try then met "an existing partition assignment"): wait first.
        cluster.wait_until(cluster._all_see_all, SESSION_TIMEOUT_MS / 1000 + 30,
                           f"every live broker to forget broker {dead}")
        outputs: list[str] = []

        def refused() -> bool:
            outputs.append(fails("--reassignment-json-file", dead_plan, "--execute"))
            return outputs[-1] == f"Error: Unknown broker id {dead}"
        try:
            cluster.wait_until(refused, 30, f"--execute to refuse broker {dead}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the tool's last answers: {outputs[-3:]}") from None
    finally:
        cluster.start(dead)
    assert replicas(cluster, "solid") == {0: [1, 2]}
    assert reassign("--list").lines == ["No partition reassignments found."]
