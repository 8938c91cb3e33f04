"""A trio loop on a background thread, for the testing kit's blocking surface.

`Broker` and `Cluster` serve brokers from a thread of their own, so that plain, asyncio and
trio tests can drive them with blocking calls; `off_trio` makes such a call safe from inside
a running trio loop (a trio test's), where trio refuses to block.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, TypeVar

import trio

T = TypeVar("T")

__all__ = ["on_a_thread", "off_trio"]


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
