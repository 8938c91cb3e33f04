"""What the client raises: Kafka's error codes, plus the two failures that have no code.

A broker answers most failures with an `ErrorCode`; the client raises those as
`protocol.errors.KafkaError`, carrying the broker's own error message when it sent one, so a
caller (a tool, replication) can switch on `.code` and `.retriable` exactly as Kafka's clients
do. Two failures never reach a broker and so have no code: the connection could not be made or
was lost (`KafkaConnectionError`), and the broker did not answer in time (`KafkaTimeoutError`).
Both carry a one-line message fit to show a person as it is.
"""
from __future__ import annotations

from protocol.errors import ErrorCode, KafkaError

__all__ = ["ErrorCode", "KafkaError", "KafkaConnectionError", "KafkaTimeoutError",
           "error_message"]


class KafkaConnectionError(Exception):
    """No connection to a broker: refused, unreachable, closed mid-request, or not Kafka."""


class KafkaTimeoutError(Exception):
    """A broker took longer than the request timeout, or a retry loop ran out of time."""


def error_message(exc: BaseException) -> str:
    """One line for a person: the broker's message when it gave one, else Kafka's text."""
    if isinstance(exc, KafkaError):
        return exc.message or ErrorCode.from_wire(exc.code).message
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
