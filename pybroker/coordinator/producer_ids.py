"""Producer ids for idempotent producers, never handed out twice, even across a crash.

Ids are reserved in blocks of 1,000 (Kafka's ProducerIdManager). On one broker the end of the
current block is written (atomically, fsynced) to `producer-ids` in the first log dir before
any id of it is used, so a restart resumes past it. In a cluster every broker hands out ids,
so the blocks come from ZooKeeper's `/latest_producer_id_block`, each claimed with a write
conditional on the version read (Kafka's ZkProducerIdManager): two brokers never get the same
block, and a restarted broker claims a new one.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Protocol

import trio

from pybroker.storage.files import write_atomically

BLOCK_SIZE = 1000
FILE_NAME = "producer-ids"

log = logging.getLogger(__name__)


class ProducerIds(Protocol):
    async def next_id(self) -> int: ...


def read_block_end(path: Path) -> int | None:
    """The end (exclusive) of the last block a single broker reserved, as `ProducerIdManager`
    keeps it in `path`; None when it has reserved none. Shared with the node's import of the
    file (pybroker/node/metadata_import.py). ValueError for a file it did not write."""
    return int(path.read_text().strip()) if path.exists() else None


class ProducerIdManager:
    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / FILE_NAME
        self._next = read_block_end(self.path) or 0
        self._block_end = self._next

    async def next_id(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            write_atomically(self.path, f"{self._block_end}\n")
        pid = self._next
        self._next += 1
        return pid


class ZkProducerIdManager:
    """Blocks claimed from ZooKeeper (`zk` is a started KazooClient)."""

    def __init__(self, zk: Any, node_id: int) -> None:
        self.zk = zk
        self.node_id = node_id
        self._next = 0
        self._block_end = 0  # exclusive
        self._claiming = trio.Lock()

    async def next_id(self) -> int:
        async with self._claiming:
            if self._next >= self._block_end:
                self._next, self._block_end = await trio.to_thread.run_sync(self._claim)
            pid = self._next
            self._next += 1
            return pid

    def _claim(self) -> tuple[int, int]:
        """The next block after the last one claimed by anyone (blocking)."""
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

        from pybroker.cluster import zk_data as zd
        while True:
            try:
                raw, stat = self.zk.get(zd.PRODUCER_ID_BLOCK)
            except NoNodeError:
                raw, stat = b"", None
            last = zd.decode_producer_id_block(raw)
            start = 0 if last is None else last[1] + 1
            end = start + BLOCK_SIZE - 1
            data = zd.encode_producer_id_block(self.node_id, start, end)
            try:
                if stat is None:
                    self.zk.create(zd.PRODUCER_ID_BLOCK, data, makepath=True)
                else:
                    self.zk.set(zd.PRODUCER_ID_BLOCK, data, version=stat.version)
            except (BadVersionError, NodeExistsError):
                continue  # another broker claimed one meanwhile
            log.info("claimed producer id block %d-%d", start, end)
            return start, end + 1
