"""A coordinator while it loads its partitions: `HeldLoad` keeps it loading as long as a test
needs (tests/integration/test_coordinator_loading.py and its cluster twin), and
`until_answered` asks again while the answer says "not yet", as clients do (the
verification tests, in process and on a cluster)."""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

from protocol.errors import ErrorCode as E


class HeldLoad:
    """Holds a coordinator's partition loads until `release()`: the read of a partition's
    records (in a worker thread, off the broker's loop) waits, so the image already names
    this broker leader while the coordinator owns nothing yet."""

    def __init__(self, coordinator: Any, only: int | None = None) -> None:
        """`only`: hold that partition's load alone. Each held load keeps a worker thread,
        and trio's pool has 40: three in-process brokers holding all 50 partitions each
        starve every other thread job (ZooKeeper reads, log appends), so a cluster test
        holds only the partition its key maps to."""
        self.started = threading.Event()
        self._release = threading.Event()
        original: Callable[[int], Any] = coordinator._records_of

        def held(index: int) -> Any:
            if only is not None and index != only:
                return original(index)
            self.started.set()
            self._release.wait(60)
            return original(index)
        coordinator._records_of = held

    def release(self) -> None:
        self._release.set()


_NOT_YET = {E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR,
            E.CONCURRENT_TRANSACTIONS}


def until_answered(ask: Callable[[], Any], timeout: float = 30) -> Any:
    """A coordinator request asked again while the answer says "not yet", as clients do."""
    deadline = time.monotonic() + timeout
    while True:
        answer = ask()
        if answer.error_code not in _NOT_YET or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)
