"""Request hooks for test brokers: make a request fail, vanish or wait, and record what
clients sent (issue #16; franz-go kfake's `ControlKey` is the model).

A test registers `control(api, handler, times=1)`. For every request of that API the broker
calls `handler(request)` after decoding it and before its real handler; what it returns
decides the answer:

- a response body (a dict or Container): sent as the response, encoded for the request's
  version; fields left out take their defaults, at every depth;
- an `ErrorCode`: that error everywhere the request asks about something (the handler's own
  error response, the one a failing handler gets);
- `DROP`: the connection is closed without an answer (a broken connection mid-request);
- `DELAY(seconds)`: the request waits, then the real handler answers it;
- None: the hook does not apply; the next hook, then the real handler, answer it.

Hooks are consulted in the order added; the first that answers decides. Each expires after
`times` answers (None keeps it until `remove`); a None does not count. The object is shared
by the test's thread and the broker's trio thread, so its state is behind one lock, and a
handler is called outside it (a handler may add or remove hooks). A handler that raises
closes the client's connection, logged as an internal error. This module is pure: the
dispatcher does the sleeping and the closing.
"""
from __future__ import annotations

import itertools
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Union

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import APIS
from protocol.schema import ArrayOf, Field, StructOf

__all__ = ["DELAY", "DROP", "Hook", "HookRequest", "RequestHooks", "api_key_of"]

# How many requests `requests` keeps: the last ones, so a long test's memory stays bounded.
MAX_RECORDED = 10_000


class _Drop:
    """Close the connection without answering (the `DROP` singleton)."""

    def __repr__(self) -> str:
        return "DROP"


DROP = _Drop()


@dataclass(frozen=True)
class DELAY:
    """Hold the request for `seconds`, then let the real handler answer it."""

    seconds: float

    def __post_init__(self) -> None:
        if not self.seconds >= 0:
            raise ValueError(f"DELAY needs a non-negative number of seconds, not {self.seconds!r}")


@dataclass(frozen=True)
class HookRequest:
    """One decoded request, as hook handlers see it and as `requests` records it."""

    api_key: int
    api_name: str
    version: int
    client_id: str
    body: Container
    # Who sent it (the connection's session: a TLS client certificate's or SASL's principal).
    principal: str = "User:ANONYMOUS"


Outcome = Union[dict, Container, ErrorCode, _Drop, DELAY, None]
HookFn = Callable[[HookRequest], Outcome]


@dataclass(eq=False)
class Hook:
    """A registered hook; `remaining` is how many answers it has left (None: unlimited)."""

    api_key: int | None
    handler: HookFn
    remaining: int | None
    order: int = field(default=0)

    @property
    def active(self) -> bool:
        return self.remaining is None or self.remaining > 0


def api_key_of(api: int | str | ApiKey) -> int:
    """An API key from a key or a name in any of Kafka's spellings ("FindCoordinator",
    "FIND_COORDINATOR", "find_coordinator"): ValueError, naming the choices, otherwise."""
    if isinstance(api, bool):
        raise ValueError(f"not an API: {api!r}")
    if isinstance(api, int):
        if api not in APIS:
            raise ValueError(f"unknown API key {api}")
        return int(api)
    if isinstance(api, str):
        wanted = _squash(api)
        for key in ApiKey:
            if _squash(key.name) == wanted and key in APIS:
                return int(key)
        names = ", ".join(a.name for a in APIS.values())
        raise ValueError(f"unknown API name {api!r}; known: {names}")
    raise ValueError(f"an API is a name or a key, not {api!r}")


def _squash(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


class RequestHooks:
    """The hooks and the record of one broker."""

    def __init__(self, *, record: bool = True, max_recorded: int = MAX_RECORDED) -> None:
        self.record = record
        self._lock = threading.Lock()
        self._hooks: list[Hook] = []
        self._recorded: deque[HookRequest] = deque(maxlen=max_recorded)
        self._order = itertools.count()

    # -- the test's side ----------------------------------------------------------------------
    def control(self, api: int | str | ApiKey | None, handler: HookFn, *,
                times: int | None = 1) -> Hook:
        """Add a hook for `api` (None: every request); it answers `times` requests, or
        until removed when `times` is None."""
        key = None if api is None else api_key_of(api)
        if not callable(handler):
            raise ValueError(f"a hook's handler must be callable, not {handler!r}")
        if times is not None and (isinstance(times, bool) or not isinstance(times, int)
                                  or times < 1):
            raise ValueError(f"times must be a positive int or None, not {times!r}")
        hook = Hook(key, handler, times)
        with self._lock:
            hook.order = next(self._order)
            self._hooks.append(hook)
        return hook

    def remove(self, hook: Hook) -> None:
        """Remove a hook; removing one that is gone (expired or removed) does nothing."""
        with self._lock:
            if hook in self._hooks:
                self._hooks.remove(hook)

    def clear(self) -> None:
        """Remove every hook."""
        with self._lock:
            self._hooks.clear()

    @property
    def hooks(self) -> list[Hook]:
        """The hooks still active, in the order they are consulted."""
        with self._lock:
            return list(self._hooks)

    @property
    def requests(self) -> list[HookRequest]:
        """The requests recorded so far (the last `max_recorded`), oldest first."""
        with self._lock:
            return list(self._recorded)

    def clear_requests(self) -> None:
        with self._lock:
            self._recorded.clear()

    # -- the broker's side --------------------------------------------------------------------
    def consult(self, request: HookRequest) -> Outcome:
        """Record `request` and return the first hook's answer for it, or None. Called by the
        dispatcher for every decoded request."""
        with self._lock:
            if self.record:
                self._recorded.append(request)
            candidates = [h for h in self._hooks
                          if h.api_key is None or h.api_key == request.api_key]
        for hook in candidates:
            outcome = hook.handler(request)
            if outcome is None:
                continue
            if not isinstance(outcome, (dict, Container, ErrorCode, _Drop, DELAY)):
                raise TypeError(f"hook for {request.api_name} returned {outcome!r}: expected "
                                "a response body, an ErrorCode, DROP, DELAY(s) or None")
            with self._lock:
                if hook not in self._hooks:  # removed while its handler ran
                    continue
                if hook.remaining is not None:
                    hook.remaining -= 1
                    if hook.remaining <= 0:
                        self._hooks.remove(hook)
            return outcome
        return None


def complete_response(api_key: int, version: int, body: dict | Container) -> Container:
    """`body` with every field it leaves out at its default, at every depth, so a hook can
    answer with just the fields it cares about."""
    return _complete(APIS[api_key].response.fields, body, version)


def _complete(fields: Iterable[Field], given: Any, version: int) -> Container:
    out = Container()
    for fl in fields:
        if fl.name not in given:
            out[fl.name] = fl.default_value(version)
            continue
        value = given[fl.name]
        t = fl.type
        if isinstance(t, StructOf) and value is not None:
            value = _complete(t.fields, value, version)
        elif isinstance(t, ArrayOf) and isinstance(t.item, StructOf) and value is not None:
            value = [_complete(t.item.fields, item, version) for item in value]
        out[fl.name] = value
    unknown = set(given) - {fl.name for fl in fields}
    if unknown:
        raise ValueError(f"no such response fields: {', '.join(sorted(unknown))}")
    return out
