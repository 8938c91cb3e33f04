"""What a ZooKeeper client's watches and state listeners hear, and on which thread: shared by
the in-memory tree's tests (tests/cluster/test_memory_zk.py) and the node's metadata service's
(tests/node/test_metadata_service.py), which both check that a watch fires off the caller's
thread."""
from __future__ import annotations

import threading

from kazoo.protocol.states import WatchedEvent


class Events:
    """A watch and a state listener that records what it hears and on which thread."""

    def __init__(self) -> None:
        self.seen: list = []
        self.threads: set[str] = set()
        self.cond = threading.Condition()

    def __call__(self, event: WatchedEvent | str) -> None:
        with self.cond:
            self.seen.append(event if isinstance(event, str) else (event.type, event.path))
            self.threads.add(threading.current_thread().name)
            self.cond.notify_all()

    def wait(self, count: int, timeout: float = 5) -> list:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.seen) >= count, timeout), self.seen
            return list(self.seen)
