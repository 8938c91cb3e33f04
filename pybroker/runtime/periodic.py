"""The broker's periodic jobs (retention, flushes, checkpoints, offset expiry, transaction
timeouts): one loop for all of them, so each keeps running after a failed pass."""
from __future__ import annotations

import logging
from typing import Awaitable, Callable

import trio

log = logging.getLogger(__name__)
# A configured interval of 0 must not spin the event loop.
MIN_INTERVAL_MS = 10


async def run_every(interval_ms: int, job: Callable[[], Awaitable[object]], what: str) -> None:
    """Run `job` every `interval_ms` until cancelled; a pass that fails is logged (as
    `what`) and the next one runs on time."""
    interval = max(interval_ms, MIN_INTERVAL_MS) / 1000
    while True:
        await trio.sleep(interval)
        try:
            await job()
        except Exception:
            log.exception("%s failed", what)
