"""What DescribeConfigs, AlterConfigs and IncrementalAlterConfigs share: resource lookup."""
from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING

from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from pybroker.broker import Broker


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    BROKER = 4
    BROKER_LOGGER = 8


def check_resource(broker: "Broker", resource_type: int, name: str,
                   *, altering: bool) -> tuple[ErrorCode, str | None]:
    """NONE if the resource exists and can be described (or altered) here."""
    if resource_type == ResourceType.TOPIC:
        if name not in broker.metadata.image.topics:
            return (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"Topic '{name}' does not exist.")
        return ErrorCode.NONE, None
    if resource_type == ResourceType.BROKER:
        if name not in ("", str(broker.node_id)):
            return ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {broker.node_id}"
        if altering:
            return (ErrorCode.INVALID_REQUEST,
                    "Dynamic broker configs are not supported: edit server.properties")
        return ErrorCode.NONE, None
    return ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}"


def result(code: ErrorCode, message: str | None, resource_type: int, name: str) -> dict:
    return {"error_code": int(code), "error_message": message, "resource_type": resource_type,
            "resource_name": name}
