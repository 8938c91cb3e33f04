"""One broker per log dir: an OS lock on `<log dir>/.lock`, held for the broker's whole life.

Two brokers on one log dir both append to the same segment files at their own offsets: records
acknowledged by one are overwritten or skipped by the other, and a second broker that fails to
start later (its port is taken) would still have recovered the first one's logs and, on its
way out, written the clean-shutdown marker into a directory that a live broker is writing,
so a later crash of that broker would skip recovery. Kafka prevents both with a `.lock` file
per log dir, locked before anything else in the dir is read or written; so does this.

`flock` (not `fcntl` record locks): it belongs to the open file description, so two brokers in
one process (embedded, tests) exclude each other too, and closing another descriptor of the
same file elsewhere in the process does not drop it. The kernel releases it when the process
dies, kill -9 included, so a crash never leaves a dir locked. The holder writes its pid into
the file so that the refused broker can name it; the file itself is never removed (removing
it would let a third broker lock a new inode while the first still holds the old one).
"""
from __future__ import annotations

import errno
import fcntl
import logging
import os
import tempfile
from pathlib import Path

__all__ = ["LOCK_FILE", "LogDirInUse", "LogDirLocks", "LogDirsFailed"]

LOCK_FILE = ".lock"

log = logging.getLogger(__name__)


class LogDirInUse(OSError):
    """Another broker (or another instance in this process) holds the dir's lock."""


class LogDirsFailed(OSError):
    """Every one of the broker's log dirs is unusable at start (Kafka's "Shutdown broker
    because ..."): a start that cannot succeed on these disks, told apart from other failed
    starts so that a node's worker says so to its supervisor, which then does not retry it
    (pybroker.runtime.halt, the same rule as for dirs that fail while it serves)."""


def lock_owner(fd: int) -> str:
    """The pid its holder wrote into a lock file, or "" when it holds none."""
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return text if text.isdigit() else ""


def _lock_one(log_dir: Path) -> int:
    """The locked descriptor of `log_dir/.lock`; creates the dir if missing.

    Raises OSError with one line naming the dir: not a directory, not writable, or in use.
    Nothing in the dir is read or written before the lock is held but the lock file itself.
    """
    if log_dir.exists() and not log_dir.is_dir():
        raise OSError(errno.ENOTDIR, f"log dir {log_dir} is not usable: it is a file, "
                                     "not a directory")
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise OSError(exc.errno, f"log dir {log_dir} is not usable: "
                                 f"{exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = lock_owner(fd)
        os.close(fd)
        who = f"another broker (pid {owner})" if owner else "another broker"
        raise LogDirInUse(errno.EAGAIN, f"log dir {log_dir} is in use by {who}; two brokers "
                                        "must never share a log dir (see log.dirs)") from None
    except OSError as exc:
        os.close(fd)
        raise OSError(exc.errno, f"log dir {log_dir} cannot be locked: "
                                 f"{exc.strerror or exc}") from None
    try:
        # Writable for files, not just for the lock file: a read-only dir fails here, now,
        # rather than at the first segment roll.
        with tempfile.TemporaryFile(dir=log_dir):
            pass
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError as exc:
        os.close(fd)  # releases the lock
        raise OSError(exc.errno, f"log dir {log_dir} is not usable: "
                                 f"{exc.strerror or exc}") from None
    return fd


class LogDirLocks:
    """The locks of a broker's log dirs. A dir that cannot be used (not a directory, not
    writable, an I/O error) is left out and named in `failed`, with why: the broker starts
    with it offline, as Kafka's LogManager puts a dir it cannot create, validate or lock in
    its offline dirs (KIP-112). A dir in use by another broker stops the start, and releases
    the locks already held, as Kafka's does; so does a start where no dir is usable."""

    def __init__(self, log_dirs: list[Path]) -> None:
        self._fds: list[int] = []
        self.failed: dict[Path, str] = {}
        try:
            for log_dir in log_dirs:
                try:
                    self._fds.append(_lock_one(Path(log_dir)))
                except LogDirInUse:
                    raise
                except OSError as exc:
                    self.failed[Path(log_dir)] = str(exc)
                    log.error("Failed to create or validate data directory %s: %s", log_dir,
                              exc)
            if not self._fds:
                raise LogDirsFailed(errno.EIO, "Shutdown broker because none of the specified "
                                    "log dirs can be created or validated: "
                                    + "; ".join(self.failed.values()))
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        """Drop every lock (closing the descriptor releases it). Idempotent."""
        fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)

    @property
    def held(self) -> bool:
        return bool(self._fds)
