"""CreateTopics: -1 partitions or replication factor means the broker's default.

A manual assignment (`assignments`) is validated as Kafka validates it and becomes the
partitions' replicas, the first of each leading; on one broker that is this broker alone.

The logs are created in a worker thread before the answer (1,000 partitions take ~0.65 s of
file system calls); `topic_changes` keeps a DeleteTopics from running meanwhile.

In a cluster any broker serves it, as a Kafka 4.1 broker does by forwarding to the controller
(KIP-590): stock clients send it to whichever broker Metadata names controller or to the one
they know, and a node's bootstrap worker is often not the controller. Here the broker writes
the topic to the store itself (Kafka's AdminZkClient did the same) and the controller elects
its leaders.

`timeout_ms` as Kafka's ZooKeeper-mode broker (ZkAdminManager.createTopics) takes it: every
topic is written first (under `topic_changes`, released before the wait, so one slow creation
does not hold up the next client's); then, if it is above 0, the answer waits up to that long
for this broker's image to have a leader for every partition (DelayedCreatePartitions), and a
topic not led by then is answered REQUEST_TIMED_OUT while its creation goes on; at 0 or less
every topic written is answered REQUEST_TIMED_OUT at once, which librdkafka's admin client
takes for success when its operation_timeout is 0 (confluent-kafka sends 60,000 unless told
otherwise). Kafka 4.1's KRaft brokers differ at 0 or less: REQUEST_TIMED_OUT, and the topic is
not created (docs/DESIGN.md, #29). One broker leads a topic as it writes it."""
from __future__ import annotations

from collections.abc import Callable

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers._authz import CLUSTER, TOPIC, Op, allowed
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._mutation_quota import admit, mutation_quota, throttle


async def handle(ctx: RequestContext, request: Container) -> dict:
    quota = mutation_quota(ctx, strict_since=6)
    written: dict[str, int] = {}
    async with ctx.topics.changes:
        topics = await _create(ctx, request, lambda partitions: admit(quota, partitions),
                               written)
    if written:
        await _await_leaders(ctx, topics, written, request.timeout_ms)
    throttle(ctx, quota)
    return {"topics": topics}


async def _await_leaders(ctx: RequestContext, entries: list[dict], written: dict[str, int],
                         timeout_ms: int) -> None:
    """Answer each topic written NONE once this broker's image leads it, or REQUEST_TIMED_OUT
    (Kafka's: no message, the partition count, replication factor and configs reset) if it
    does not by `timeout_ms` (module docstring)."""
    ready = await ctx.topics.await_leaders(written, timeout_ms / 1000)
    image = ctx.services.metadata.image  # the request's own predates the topics
    for entry in entries:
        name = entry["name"]
        if name not in written:
            continue
        info = image.topics.get(name)
        if info is not None:
            entry["topic_id"] = info.topic_id
        if name not in ready:
            entry.update(error_code=int(ErrorCode.REQUEST_TIMED_OUT), error_message=None,
                         num_partitions=-1, replication_factor=-1, configs=[])


async def _create(ctx: RequestContext, request: Container,
                  admit_partitions: Callable[[int], bool], written: dict[str, int]
                  ) -> list[dict]:
    """Each topic's entry; the topics written go into `written` (name -> partitions)."""
    results = []
    message: str | None
    # As Kafka's controller: a name given twice is created for neither entry; it is
    # answered once, after the other topics, INVALID_REQUEST.
    names = [t.name for t in request.topics]
    duplicates = list(dict.fromkeys(n for n in names if names.count(n) > 1))
    may_create = allowed(ctx, Op.CREATE, CLUSTER)  # else CREATE on each topic (Kafka's rule)
    for topic in request.topics:
        partitions = topic.num_partitions
        rf = topic.replication_factor
        assignments = None
        if topic.assignments:
            if partitions != -1 or rf != -1:
                code, message = (ErrorCode.INVALID_REQUEST, "Both numPartitions or "
                                 "replicationFactor and replicasAssignments were set.")
                results.append(_result(topic.name, code, message))
                continue
            assignments, message = _replica_assignment(topic.assignments,
                                                       set(ctx.image.brokers))
            if assignments is None:
                results.append(_result(topic.name, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                       message))
                continue
            partitions, rf = len(assignments), len(assignments[0])
        if partitions == -1:
            partitions = ctx.config.num_partitions
        if rf == -1:
            rf = ctx.config.default_replication_factor
        configs = {c.name: c.value for c in topic.configs if c.value is not None}
        if topic.name in duplicates:
            continue
        if not may_create and not allowed(ctx, Op.CREATE, TOPIC, topic.name):
            results.append(_result(topic.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                   "Authorization failed."))
            continue
        code, message = await ctx.topics.create_topic(
            topic.name, partitions, rf, configs, validate_only=request.validate_only,
            assignments=assignments, admit=admit_partitions, wait=False)
        entry = _result(topic.name, code, message)
        if code == ErrorCode.NONE:
            entry.update(num_partitions=partitions, replication_factor=rf,
                         configs=_configs(ctx, topic.name, configs))
            if not request.validate_only:
                written[topic.name] = partitions
        results.append(entry)
    results += [_result(name, ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
                for name in duplicates]
    return results


def _replica_assignment(entries: list[Container], brokers: set[int]
                        ) -> tuple[list[list[int]] | None, str | None]:
    """Each partition's replicas from a manual assignment, or None and why it is refused.

    Kafka's checks (AdminZkClient.validateReplicaAssignment), with its messages: partitions
    0..n-1 each given once, no partition without replicas or with a broker twice, the same
    replica count everywhere, and only brokers that exist. The first replica leads.
    """
    by_partition = {entry.partition_index: list(entry.broker_ids) for entry in entries}
    if len(by_partition) != len(entries) or sorted(by_partition) != list(range(len(entries))):
        return None, "Partitions should be a consecutive 0-based integer sequence"
    replicas = [by_partition[i] for i in range(len(entries))]
    for partition, ids in enumerate(replicas):
        if not ids:
            return None, f"Partition {partition} has no replicas in the assignment"
        if len(set(ids)) != len(ids):
            return None, f"Duplicate replica assignment found: {partition} -> {ids}"
        unknown = sorted(set(ids) - brokers)
        if unknown:
            return None, ("Unknown broker(s) in replica assignment: "
                          f"{', '.join(map(str, unknown))}.")
    if len({len(ids) for ids in replicas}) != 1:
        return None, "All partitions should have the same number of replicas"
    return replicas, None


def _configs(ctx: RequestContext, name: str, overrides: dict[str, str]) -> list[dict]:
    from pybroker.config import describe_topic_config
    return [{"name": e.name, "value": e.value, "read_only": e.read_only,
             "config_source": e.source, "is_sensitive": e.is_sensitive}
            for e in describe_topic_config(ctx.config, overrides, trim_synonyms=False)]


def _result(name: str, code: ErrorCode, message: str | None) -> dict:
    return {"name": name, "error_code": int(code), "error_message": message,
            "num_partitions": -1, "replication_factor": -1, "configs": []}


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"topics": [_result(t.name, code, None) for t in request.topics]}

HANDLER = Handler(ApiKey.CREATE_TOPICS, 2, 7, handle, error_response)
