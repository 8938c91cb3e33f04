"""max.connections and max.connections.per.ip, as Kafka's acceptor applies them.

A connection from an address that already has max.connections.per.ip open is closed at once
(Kafka logs TooManyConnectionsException and closes it). Beyond max.connections in all, a new
connection waits, unserved, until another closes: Kafka stops accepting, which leaves it in
the listen backlog with the same effect for the client.
"""
from __future__ import annotations

import logging
from collections import Counter
from contextlib import asynccontextmanager
from typing import AsyncIterator

import trio

log = logging.getLogger(__name__)


class ConnectionLimits:
    def __init__(self, max_connections: int, max_per_ip: int) -> None:
        self.max_per_ip = max_per_ip
        self._slots = trio.CapacityLimiter(max_connections) if max_connections else None
        self._per_ip: Counter[str] = Counter()

    def reconfigure(self, max_connections: int, max_per_ip: int) -> None:
        """New limits (dynamic broker configs): the next connections are counted against
        them; connections already served stay, as Kafka keeps them."""
        self.max_per_ip = max_per_ip
        if not max_connections:
            self._slots = None
        elif self._slots is None:
            self._slots = trio.CapacityLimiter(max_connections)
        else:
            self._slots.total_tokens = max_connections

    @asynccontextmanager
    async def admit(self, host: str) -> AsyncIterator[bool]:
        """Yields whether a connection from `host` may be served (waiting for a slot first);
        False: close it."""
        if self._per_ip[host] >= self.max_per_ip:
            log.warning("closing a connection from %s: it has %d open, the most "
                        "max.connections.per.ip allows", host, self._per_ip[host])
            yield False
            return
        self._per_ip[host] += 1
        try:
            if self._slots is None:  # max.connections=0 admits nobody: close rather than hang
                yield False
                return
            async with self._slots:
                yield True
        finally:
            self._per_ip[host] -= 1
            if not self._per_ip[host]:
                del self._per_ip[host]
