"""The memory request bodies and in-memory responses may take at once
(`queued.max.request.bytes`, Kafka's SimpleMemoryPool).

Why. Without a bound, what the broker holds is what its clients declare: forty connections
each announcing a 100 MB request and sending 40 MB of it took a broker from 36 MB to 1.6 GB,
and four hundred would take the machine down. Kafka reads request bodies into a pool and
stops reading from the network when it is empty; so does pybroker, and safe by default
(256 MiB, where Kafka's default is unbounded).

How it is used (`connection.py`):
- a frame's declared size is reserved from the pool as soon as its 4-byte prefix arrives and
  before the rest of it is read; while the pool cannot grant it, the connection reads nothing
  more (the kernel's buffers fill and the sender blocks: backpressure, not failure). Waiters
  are served in arrival order. The reservation is released once the request is answered;
- a frame larger than the whole pool can never be granted and is refused like one over
  `socket.request.max.bytes`;
- small frames (up to SMALL_FRAME bytes: metadata, heartbeats, offset commits, fetch requests)
  are not taken from the pool, so they keep being served while large produce frames wait —
  group members do not miss their session timeouts because someone floods the broker; what
  they hold is bounded per connection by one read;
- a response held in memory (a fetch's small batches; large ones go out with sendfile and
  hold nothing) is accounted with `take`, which may overdraw: it is already built. Fetch reads
  at most what the pool has left (always at least one batch), so the overdraw is bounded;
- `peak` says how much was in use: once a burst has drained, the broker returns the heap's
  free pages to the system (`malloc_tuning.trim_malloc`), or RSS stays at the burst's peak.
"""
from __future__ import annotations

from collections import deque

import trio

__all__ = ["MemoryPool", "SMALL_FRAME"]

# Frames up to this size are served without the pool (see above).
SMALL_FRAME = 64 * 1024


class MemoryPool:
    def __init__(self, capacity: int | None) -> None:
        """`capacity` in bytes; None for no bound (Kafka's -1)."""
        self.capacity = capacity
        self.used = 0
        self.peak = 0  # the most used since `reset_peak` (when to give memory back)
        self._waiters: deque[tuple[int, trio.Event]] = deque()

    @property
    def bounded(self) -> bool:
        return self.capacity is not None

    @property
    def available(self) -> int:
        """Bytes that can be granted now (a large number when unbounded)."""
        if self.capacity is None:
            return 1 << 62
        return max(0, self.capacity - self.used)

    @property
    def waiting(self) -> int:
        """Reservations queued for memory."""
        return len(self._waiters)

    def try_allocate(self, size: int) -> bool:
        """Reserve `size` bytes now if they are free and nobody queued first."""
        if self.capacity is None or (not self._waiters and self.used + size <= self.capacity):
            self.used += size
            self.peak = max(self.peak, self.used)
            return True
        return False

    async def allocate(self, size: int) -> None:
        """Reserve `size` bytes (<= capacity), waiting in line until they are free. A cancelled
        waiter leaves the line; one granted as it was cancelled gives the memory back."""
        if self.try_allocate(size):
            return
        assert self.capacity is not None and size <= self.capacity
        entry = (size, trio.Event())
        self._waiters.append(entry)
        try:
            await entry[1].wait()
        except BaseException:
            if entry[1].is_set():
                self.release(size)
            else:
                self._waiters.remove(entry)
                self._grant()  # the head may have changed
            raise

    def take(self, size: int) -> None:
        """Account `size` bytes that are already in memory (may overdraw the pool)."""
        self.used += size
        self.peak = max(self.peak, self.used)

    def reset_peak(self) -> None:
        self.peak = self.used

    def release(self, size: int) -> None:
        self.used -= size
        self._grant()

    def _grant(self) -> None:
        waiters = self._waiters
        while waiters and self.capacity is not None and \
                self.used + waiters[0][0] <= self.capacity:
            size, event = waiters.popleft()
            self.used += size
            self.peak = max(self.peak, self.used)
            event.set()
