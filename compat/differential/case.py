"""A case of the corpus and the context it runs in against one target."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from compat.differential.normalise import Normaliser
from compat.differential.target import Conn, Target
from protocol.messages import APIS


@dataclass(frozen=True)
class Case:
    """One request sequence, filed under the API and version it is about."""

    api: int
    version: int
    name: str
    run: Callable[["Ctx"], None]

    @property
    def id(self) -> str:
        return f"{APIS[self.api].name} v{self.version} {self.name}"


class Ctx:
    """What a case sees: one target, its answers recorded (normalised) under labels."""

    def __init__(self, case: Case, target: Target, base_ts: int) -> None:
        self.case = case
        self.target = target
        self.normalise = Normaliser(base_ts)
        self.observed: dict[str, Any] = {}
        self.t0 = base_ts

    @property
    def version(self) -> int:
        return self.case.version

    def topic(self, suffix: str = "") -> str:
        """A topic name of this case's own, the same on both targets."""
        base = re.sub(r"[^a-zA-Z0-9._-]+", "-", f"dc-{self.case.id}").strip("-").lower()
        return f"{base}-{suffix}" if suffix else base

    def ask(self, label: str, api: int, version: int, body: Any, *,
            conn: Conn | None = None, timeout: float | None = None,
            view: Callable[[Any], Any] | None = None) -> Any:
        """Send, wait for the answer, record it (or `view` of it) under `label`; the raw
        answer back. A closed connection or no answer is recorded as such."""
        answer = (conn or self.target.conn).request(api, version, body, timeout=timeout)
        self.note(label, view(answer) if view is not None and not isinstance(answer, str)
                  else answer)
        return answer

    def note(self, label: str, value: Any) -> None:
        if label in self.observed:
            raise AssertionError(f"{self.case.id}: label {label!r} used twice")
        self.observed[label] = self.normalise(value)
