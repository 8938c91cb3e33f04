"""Kafka's text form of a 16-byte id (topic ids, cluster ids): URL-safe base64 without
padding, 22 characters, as `Uuid.toString()` prints it and the tools and ZooKeeper show it."""
from __future__ import annotations

import base64
import uuid

__all__ = ["format_topic_id", "parse_topic_id"]


def format_topic_id(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def parse_topic_id(text: str) -> uuid.UUID:
    """The id of Kafka's text form; a hyphenated UUID is accepted too."""
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except ValueError:
        return uuid.UUID(text)
