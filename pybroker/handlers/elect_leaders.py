"""ElectLeaders: with one replica per partition the leader is already the preferred one."""
from __future__ import annotations

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers.base import Handler, RequestContext


async def handle(ctx: RequestContext, request: Container) -> dict:
    image = ctx.image
    wanted = request.topic_partitions
    if wanted is None:
        wanted = [Container(topic=t.name, partitions=[p.partition for p in t.partitions])
                  for t in image.topics.values()]
    results = []
    for tp in wanted:
        partitions = []
        for index in tp.partitions:
            state = image.partition(tp.topic, index)
            if state is None:
                code, message = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 "The partition does not exist.")
            else:
                code, message = (ErrorCode.ELECTION_NOT_NEEDED,
                                 "Leader election not needed for topic partition.")
            partitions.append({"partition_id": index, "error_code": int(code),
                               "error_message": message})
        results.append({"topic": tp.topic, "partition_result": partitions})
    return {"throttle_time_ms": 0, "error_code": 0, "replica_election_results": results}


HANDLER = Handler(ApiKey.ELECT_LEADERS, 0, 2, handle)
