"""Kafka's rules for topic names: 1-249 of [a-zA-Z0-9._-], and not "." or ".."."""
from __future__ import annotations

import re

from protocol.messages.topics import INTERNAL_TOPICS

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def invalid_topic_reason(name: str | None) -> str | None:
    """Why `name` cannot be a topic name, or None if it can."""
    if not name:
        return "Topic name is empty"
    if name in (".", ".."):
        return f"Topic name cannot be \"{name}\""
    if len(name) > MAX_NAME_LENGTH:
        return f"Topic name is longer than {MAX_NAME_LENGTH} characters"
    if not _LEGAL.match(name):
        return (f"Topic name \"{name}\" is illegal, it contains a character other than "
                "ASCII alphanumerics, '.', '_' and '-'")
    return None


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS
