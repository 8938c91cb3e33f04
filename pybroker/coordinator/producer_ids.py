"""Producer ids for idempotent producers, never handed out twice, even across a crash.

Ids are reserved in blocks: the end of the current block is written (atomically, fsynced) to
`producer-ids` in the first log dir before any id of it is used, so a restart resumes past it.
"""
from __future__ import annotations

from pathlib import Path

from pybroker.storage.files import write_atomically

BLOCK_SIZE = 1000
FILE_NAME = "producer-ids"


class ProducerIdManager:
    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / FILE_NAME
        self._next = int(self.path.read_text().strip()) if self.path.exists() else 0
        self._block_end = self._next

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            write_atomically(self.path, f"{self._block_end}\n")
        pid = self._next
        self._next += 1
        return pid
