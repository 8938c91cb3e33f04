"""DescribeLogDirs: each log dir, its partitions' sizes, and its disk space; an offline
(failed) dir as KAFKA_STORAGE_ERROR.

Needs DESCRIBE on the cluster; without it Kafka answers no log dirs at all and, from v3 (which
has the field), CLUSTER_AUTHORIZATION_FAILED at the top — an answer, never a closed
connection."""
from __future__ import annotations

import shutil

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers._authz import CLUSTER, Op, allowed
from pybroker.handlers._base import Handler, RequestContext

# Kafka's DescribeLogDirsResponse.UNKNOWN_VOLUME_BYTES: a dir whose disk cannot be asked.
UNKNOWN_VOLUME_BYTES = -1


async def handle(ctx: RequestContext, request: Container) -> dict:
    if not allowed(ctx, Op.DESCRIBE, CLUSTER):
        return {"error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), "results": []}
    image = ctx.image
    if request.topics is None:
        wanted = {t.name: [p.partition for p in t.partitions] for t in image.topics.values()}
    else:
        wanted = {t.topic: list(t.partitions) for t in request.topics}
    results = []
    logs = ctx.services.logs
    for log_dir in logs.log_dirs:
        if log_dir in logs.offline_dirs:  # as Kafka: the error, no partitions, sizes unknown
            results.append({"error_code": int(ErrorCode.KAFKA_STORAGE_ERROR),
                            "log_dir": str(log_dir), "topics": [],
                            "total_bytes": UNKNOWN_VOLUME_BYTES,
                            "usable_bytes": UNKNOWN_VOLUME_BYTES})
            continue
        topics = []
        for name, partitions in wanted.items():
            entries = []
            for index in partitions:
                plog = logs.get(name, index)
                if plog is None or plog.dir.parent != log_dir:
                    continue
                entries.append({"partition_index": index, "partition_size": plog.size,
                                "offset_lag": 0, "is_future_key": False})
            if entries:
                topics.append({"name": name, "partitions": entries})
        usage = shutil.disk_usage(log_dir)
        results.append({"error_code": 0, "log_dir": str(log_dir), "topics": topics,
                        "total_bytes": usage.total, "usable_bytes": usage.free})
    return {"error_code": 0, "results": results}


HANDLER = Handler(ApiKey.DESCRIBE_LOG_DIRS, 1, 4, handle)
