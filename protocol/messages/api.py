"""`Api`: one Kafka API's request and response, declared once, with the versions we decode."""
from __future__ import annotations

from dataclasses import dataclass

from protocol.schema import Field, Message, Versions


@dataclass
class Api:
    """The request and response of one API key over the version range we declare."""

    key: int
    name: str
    versions: Versions
    flexible: Versions
    request: Message
    response: Message

    def __init__(self, key: int, name: str, *, versions: str, flexible: str,
                 request: list[Field], response: list[Field]) -> None:
        self.key, self.name = key, name
        self.versions = Versions.parse(versions)
        self.flexible = Versions.parse(flexible)
        self.request = Message(name + "Request", key, self.versions, self.flexible, tuple(request))
        self.response = Message(name + "Response", key, self.versions, self.flexible,
                                tuple(response))

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible

    @property
    def min_version(self) -> int:
        return self.versions.low

    @property
    def max_version(self) -> int:
        assert self.versions.high is not None
        return self.versions.high
