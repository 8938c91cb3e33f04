"""The open-file limit: raised to the hard limit at start, refused in one line if too low.

A broker's descriptors are bounded by design (segment files through a cache sized from this
limit, `storage/files.py`), so the number of partitions does not depend on it; connections
do, and so does the cache's size. Like many servers (nginx's worker_rlimit_nofile, the JVM's
MaxFDLimit), the broker raises its soft RLIMIT_NOFILE to the hard limit, which needs no
privilege, and logs both. Below `MIN_OPEN_FILES` even that leaves too little for a minimal
cache plus listeners and a few connections, and it stops with a line saying how to raise it.
"""
from __future__ import annotations

import logging
import resource

__all__ = ["raise_open_files_limit", "MIN_OPEN_FILES"]

log = logging.getLogger(__name__)

MIN_OPEN_FILES = 128


def raise_open_files_limit(minimum: int = MIN_OPEN_FILES) -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard one; (soft, hard) as they are now.

    OSError with a one-line reason if the limit stays below `minimum`.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as exc:  # e.g. macOS refuses RLIM_INFINITY
            log.warning("could not raise the open-file limit from %d to %d: %s", soft, hard, exc)
        else:
            soft = hard
    shown = [("unlimited" if v == resource.RLIM_INFINITY else str(v)) for v in (soft, hard)]
    log.info("open-file limit (RLIMIT_NOFILE): soft %s, hard %s", *shown)
    if soft != resource.RLIM_INFINITY and soft < minimum:
        raise OSError(f"the open-file limit (RLIMIT_NOFILE) is {soft} (hard limit {shown[1]}); "
                      f"pybroker needs at least {minimum}: raise it with `ulimit -n {minimum}` "
                      f"(or LimitNOFILE= in a systemd unit, nofile in limits.conf)")
    return soft, hard
