"""Kafka's ACL operations and the `*_authorized_operations` bit fields carrying them.

Metadata, DescribeCluster, DescribeGroups and DescribeTopicPartitions may ask which operations
the caller may perform on a resource. The answer is a 32-bit field with bit N set for the
AclOperation whose code is N, restricted to the operations the resource type supports
(Kafka's `AclEntry.supportedOperations`); INT32_MIN means "not requested". With no
authorizer, Kafka answers every supported operation, and so does pybroker until one exists.
"""
from __future__ import annotations

import enum


class AclOperation(enum.IntEnum):
    """Kafka's AclOperation codes (the wire numbering)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


OPERATIONS_NOT_REQUESTED = -(1 << 31)

_O = AclOperation
TOPIC_OPERATIONS = frozenset({_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER,
                              _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS})
GROUP_OPERATIONS = frozenset({_O.READ, _O.DESCRIBE, _O.DELETE})
CLUSTER_OPERATIONS = frozenset({_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS,
                                _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE, _O.ALTER, _O.DESCRIBE})


def to_bit_field(operations: frozenset[AclOperation]) -> int:
    """Kafka's `Utils.to32BitField`: bit N for the operation with code N."""
    field = 0
    for operation in operations:
        field |= 1 << operation
    return field


def authorized_operations(requested: bool, supported: frozenset[AclOperation]) -> int:
    """The field for a resource: every supported operation when asked (no authorizer: all are
    allowed, as Kafka answers without one), else Kafka's "not requested" value."""
    return to_bit_field(supported) if requested else OPERATIONS_NOT_REQUESTED
