"""What a transactional API answers to a client that predates an error code.

Kafka 2.7 split PRODUCER_FENCED (a newer producer with the same transactional id exists) from
INVALID_PRODUCER_EPOCH; requests older than the version that learned the new code get the old
one, "to have the same client handling logic" (KafkaApis). The versions are Kafka's.
"""
from __future__ import annotations

from protocol.errors import ErrorCode


def fenced_for(code: ErrorCode, version: int, first_version_knowing: int) -> ErrorCode:
    """PRODUCER_FENCED as INVALID_PRODUCER_EPOCH below `first_version_knowing`."""
    if code == ErrorCode.PRODUCER_FENCED and version < first_version_knowing:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code
