"""A trio loop on a background thread, for the testing kit's blocking surface.

`Broker` (one in-process broker, `broker_in_thread`) and `Cluster` (several sharing one loop)
serve brokers from a thread of their own, so that plain, asyncio and trio tests can drive them
with blocking calls. `LoopThread` is that thread: one nursery held open until `close`, and
`call` to run a coroutine function in it from the test's thread. `off_trio` makes a blocking
call safe from inside a running trio loop (a trio test's), where trio refuses to block.
"""
from __future__ import annotations

import threading
from typing import Any, Awaitable, Callable, TypeVar

import trio

T = TypeVar("T")

__all__ = ["LoopThread", "on_a_thread", "off_trio"]


class LoopThread:
    """A daemon thread running a trio loop with one open nursery, until `close`."""

    def __init__(self, name: str | None = None) -> None:
        """`name`: the thread's (None: Python's default)."""
        self.token: trio.lowlevel.TrioToken | None = None
        self.nursery: trio.Nursery | None = None
        self._stop: trio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)
        self._ready = threading.Event()
        self._failure: list[BaseException] = []
        self._first: Callable[..., Awaitable[Any]] | None = None
        self._first_value: Any = None
        self.closed = False

    def start(self, timeout_s: float, first: Callable[..., Awaitable[Any]] | None = None
              ) -> Any:
        """Start the thread; returns once its nursery is open, or raises what stopped the
        loop. With `first`, that task is started in the nursery (`nursery.start`) before,
        and what it passed to `task_status.started` is returned; if it fails to start, the
        loop ends and its error is raised as `trio.run` raised it (in an exception group)."""
        self._first = first
        self._thread.start()
        self._ready.wait(timeout_s)
        if self._failure:
            raise self._failure[0]
        return self._first_value

    async def _main(self) -> None:
        self.token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            if self._first is not None:
                self._first_value = await nursery.start(self._first)
            self._ready.set()
            await self._stop.wait()
            nursery.cancel_scope.cancel()

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # reported by start, or lost at exit
            self._failure.append(exc)
        finally:
            self._ready.set()

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run the async `fn` in the loop and return its result (blocking this thread)."""
        return trio.from_thread.run(fn, *args, trio_token=self.token)

    def close(self, timeout_s: float) -> None:
        """Cancel everything the nursery runs, then wait up to `timeout_s` for the thread."""
        self.closed = True
        if self.token is not None and self._stop is not None:
            try:
                trio.from_thread.run_sync(self._stop.set, trio_token=self.token)
            except trio.RunFinishedError:
                pass
        if self._thread.ident is not None:  # started
            self._thread.join(timeout_s)


def on_a_thread(fn: Callable[[], T]) -> T:
    """fn() on a short-lived thread: trio.run and trio.from_thread refuse to be called from
    inside a running trio loop (a trio test's), so a blocking helper hops off it."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run, name="pybroker-admin", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def off_trio(fn: Callable[[], T]) -> T:
    """fn() right here, or on a short-lived thread when called from a running trio loop."""
    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:  # not in a trio loop: block right here
        return fn()
    return on_a_thread(fn)
