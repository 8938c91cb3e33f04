"""ElectLeaders: the controller moves leadership to the preferred replica, or elects a leader
for a partition that has none from out-of-sync replicas (unclean).

In a ZooKeeper cluster the request is the controller's to serve, as in Kafka's ZooKeeper
mode (`KafkaApis.handleElectLeaders` -> `KafkaController.processReplicaLeaderElection`): a
broker that is not the active controller answers NOT_CONTROLLER for every partition asked
about, with a top-level NONE, exactly as Kafka 3.9's controller answers when it is not active;
admin clients then find the controller afresh and ask again (Kafka's admin client counts
per-partition errors in `errorCounts`, and so does ours). Asked for every partition (a null
list), the answer leaves out the partitions that needed no election, as Kafka's does.

A single broker has no controller: every replica list is that broker, whose leader is already
the preferred one, so every partition needs no election.
"""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers._authz import CLUSTER, Op, require
from pybroker.handlers._base import Handler, RequestContext

Results = dict[tuple[str, int], tuple[ErrorCode, str | None]]


async def handle(ctx: RequestContext, request: Container) -> dict:
    require(ctx, Op.ALTER, CLUSTER)
    wanted = _requested(request)
    controller = ctx.services.controller
    if controller is None and wanted is None:
        # As Kafka's controller electing all: every topic answered, without its partitions,
        # none of which needs an election on one broker.
        return {"error_code": 0, "replica_election_results": [
            {"topic": t, "partition_result": []} for t in ctx.image.topics]}
    if controller is None:
        results = _single_broker(ctx, request, wanted)
    elif not controller.active:
        results = {tp: (ErrorCode.NOT_CONTROLLER, None)
                   for tp in (wanted if wanted is not None else _all_partitions(ctx))}
    else:
        # Imported here: only a cluster member has a controller, and a single broker's
        # start does not load the controller's code (issue #15 §3).
        from pybroker.controller.controller import ControllerFenced
        election_type = int(getattr(request, "election_type", 0) or 0)
        try:
            results = await controller.elect_leaders(election_type, wanted)
        except ControllerFenced:
            # Replaced while electing (Kafka's `preempt`): the whole request is refused, at
            # the top level as Kafka does, and per partition for v0, which has no top level.
            results = {tp: (ErrorCode.NOT_CONTROLLER, None)
                       for tp in (wanted if wanted is not None else _all_partitions(ctx))}
            return {"error_code": int(ErrorCode.NOT_CONTROLLER),
                    "replica_election_results": _by_topic(results)}
        if wanted is None:
            results = {tp: r for tp, r in results.items()
                       if r[0] != ErrorCode.ELECTION_NOT_NEEDED}
    return {"error_code": 0,
            "replica_election_results": _by_topic(results)}


def _requested(request: Container) -> list[tuple[str, int]] | None:
    if request.topic_partitions is None:
        return None
    return [(tp.topic, index) for tp in request.topic_partitions for index in tp.partitions]


def _all_partitions(ctx: RequestContext) -> list[tuple[str, int]]:
    return [(t.name, p.partition) for t in ctx.image.topics.values() for p in t.partitions]


def _single_broker(ctx: RequestContext, request: Container,
                   wanted: list[tuple[str, int]] | None) -> Results:
    results: Results = {}
    for topic, index in wanted if wanted is not None else _all_partitions(ctx):
        if ctx.image.partition(topic, index) is None:
            results[(topic, index)] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                       "The partition does not exist.")
        else:
            results[(topic, index)] = (ErrorCode.ELECTION_NOT_NEEDED,
                                       "Leader election not needed for topic partition.")
    return results


def _by_topic(results: Results) -> list[dict]:
    topics: dict[str, list[dict]] = {}
    for (topic, index), (code, message) in results.items():
        topics.setdefault(topic, []).append(
            {"partition_id": index, "error_code": int(code), "error_message": message})
    return [{"topic": t, "partition_result": ps} for t, ps in topics.items()]


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    """`code` at the top (v1+) and for every partition asked about: v0 has no top-level
    error, so its clients learn it per partition, as Kafka answers them."""
    wanted = _requested(request) or []
    return {"error_code": int(code),
            "replica_election_results": _by_topic({tp: (code, None) for tp in wanted})}


HANDLER = Handler(ApiKey.ELECT_LEADERS, 0, 2, handle, error_response)
