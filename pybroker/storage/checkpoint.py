"""Kafka's small text checkpoint files: a version line, a count line, then one entry a line.

Used for `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
`replication-offset-checkpoint` (topic partition offset) and `leader-epoch-checkpoint`
(epoch start_offset). The format is Kafka's so that an operator can read them with `cat` and
recognise them. Writes replace the old file atomically (`files.write_atomically`: a temporary
file fsynced, renamed over it, the directory fsynced), so a crash leaves either the old or the
new checkpoint, never half of one.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from protocol.topic_partition import TopicPartition
from pybroker.storage.files import write_atomically
__all__ = [
    "CheckpointError", "write_checkpoint", "read_checkpoint", "write_offsets", "read_offsets",
]

log = logging.getLogger(__name__)

VERSION = 0


class CheckpointError(ValueError):
    """A checkpoint file that exists but cannot be parsed."""


def write_checkpoint(path: Path, entries: Iterable[str], *, version: int = VERSION,
                     sync: bool = True, new: bool = False) -> None:
    """Replace `path` atomically with the given entry lines.

    `new`: the file does not exist yet, so it is written in place (one file created rather
    than two, for a new partition): a crash midway leaves a file that fails to parse, which
    readers treat as missing, as it was.
    """
    lines = list(entries)
    text = f"{version}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
    if new:
        try:
            with open(path, "x", encoding="utf-8") as f:
                f.write(text)
                if sync:
                    f.flush()
                    os.fsync(f.fileno())
            return
        except FileExistsError:
            pass  # it appeared meanwhile: replace it atomically, as any other
    write_atomically(path, text, sync=sync)


def read_checkpoint(path: Path, fields: int, *, version: int = VERSION) -> list[list[str]] | None:
    """Entry lines split on whitespace; None if the file does not exist.

    CheckpointError if the version is unknown, the count disagrees with the lines, or a line
    does not have `fields` fields: a checkpoint that lies is worse than none.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    lines = text.splitlines()
    try:
        if len(lines) < 2 or int(lines[0]) != version:
            raise CheckpointError(f"{path}: unknown version line {lines[:1]}")
        count = int(lines[1])
    except ValueError:
        raise CheckpointError(f"{path}: malformed header") from None
    body = [line.split() for line in lines[2:] if line.strip()]
    if len(body) != count:
        raise CheckpointError(f"{path}: expected {count} entries, found {len(body)}")
    for parts in body:
        if len(parts) != fields:
            raise CheckpointError(f"{path}: bad entry {' '.join(parts)!r}")
    return body


def write_offsets(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    """A per-log-dir offset checkpoint: `topic partition offset` lines."""
    write_checkpoint(path, (f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())))


def read_offsets(path: Path) -> dict[TopicPartition, int]:
    """The entries of an offset checkpoint; empty (with a warning) if missing or unreadable.

    Treating a broken file as empty is safe for every use: recovery points fall back to full
    recovery, log start offsets to the first segment, high watermarks to the log start.
    """
    try:
        rows = read_checkpoint(path, 3)
    except (CheckpointError, OSError) as exc:
        log.warning("ignoring unreadable checkpoint %s: %s", path, exc)
        return {}
    out: dict[TopicPartition, int] = {}
    for topic, partition, offset in rows or ():
        try:
            out[(topic, int(partition))] = int(offset)
        except ValueError:
            log.warning("ignoring bad entry in %s: %s %s %s", path, topic, partition, offset)
    return out
