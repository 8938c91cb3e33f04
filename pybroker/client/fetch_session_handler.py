"""The fetcher's side of an incremental fetch session (KIP-227; Kafka's FetchSessionHandler).

A fetcher that asks one broker for the same partitions round after round keeps a session
there: the first request is full (epoch 0) and the answer names the session; later requests
(epochs 1, 2, ...) carry only the partitions whose request fields changed, plus
`forgotten_topics_data` for those it no longer wants, and the answers carry only partitions
with news. Anything doubtful starts over with a full request that also closes the old
session on the broker: a session error in an answer, a request whose answer never came (a
cancelled long poll, a lost connection: the broker may or may not have moved the epoch), an
answer that made no session (the broker's cache was full).

Pure: the caller builds each partition's request entry, sends, and reports the outcome.
"""
from __future__ import annotations

from typing import Any

from protocol.fetch_metadata import INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch

__all__ = ["FetchSessionHandler"]

Key = tuple[str, int]


class FetchSessionHandler:
    """One broker's session, as this fetcher sees it."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._sent: dict[Key, dict[str, Any]] = {}  # what the session holds, once answered
        self._pending: dict[Key, dict[str, Any]] | None = None  # sent, not yet answered
        # The last full request made no session (the broker's cache had no room): the
        # fetcher may then treat full requests as ordinary ones.
        self.made_none = False

    def build(self, wanted: dict[Key, dict[str, Any]]
              ) -> tuple[int, int, dict[str, list[dict[str, Any]]], dict[str, list[int]]]:
        """(session id, epoch, partitions to send by topic, partitions to forget by topic)
        for a request that wants `wanted` (each a Fetch request partition entry)."""
        if self._pending is not None:  # the last request went unanswered
            self.reset()
        send: dict[str, list[dict[str, Any]]] = {}
        forget: dict[str, list[int]] = {}
        full = self.epoch == INITIAL_EPOCH
        for (topic, index), entry in wanted.items():
            if full or self._sent.get((topic, index)) != entry:
                send.setdefault(topic, []).append(entry)
        if not full:
            for topic, index in self._sent:
                if (topic, index) not in wanted:
                    forget.setdefault(topic, []).append(index)
        self._pending = dict(wanted)
        return self.session_id, self.epoch, send, forget

    def answered(self, error_code: int, session_id: int) -> bool:
        """The answer to the last `build`: True when it applies (its partitions are news),
        False on a session error (ask again, in full)."""
        pending, self._pending = self._pending, None
        if error_code or pending is None:
            self.reset()
            return False
        if session_id == INVALID_SESSION_ID:  # none made (or the session closed): full again
            self.made_none = self.epoch == INITIAL_EPOCH
            self.session_id, self.epoch, self._sent = INVALID_SESSION_ID, INITIAL_EPOCH, {}
            return True
        self.made_none = False
        self.epoch = 1 if self.epoch == INITIAL_EPOCH else next_epoch(self.epoch)
        self.session_id = session_id
        self._sent = pending
        return True

    def reset(self) -> None:
        """Start over: the next request is full and closes the session it names (if any)."""
        self.epoch = INITIAL_EPOCH
        self._sent = {}
        self._pending = None
