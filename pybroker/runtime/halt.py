"""How a broker process halts when every one of its log dirs has failed.

Kafka halts the broker then (`Exit.halt(1)` after "Shutdown broker because all log dirs in ...
have failed"): at once, with no shutdown, since nothing it holds can be written any more and
a clean close would only meet the same errors. A single broker exits 1, as Kafka's does.

A node's worker exits with the code its entry point sets here instead
(`pybroker.node.worker.LOG_DIRS_FAILED_EXIT`), so that the node's supervisor can tell this stop
from a crash: a crashed worker is restarted, but a restarted worker would meet the same failed
disks (pybroker.node.supervisor stops the node instead). The code is the process's, set once
before the broker starts, as its signal handlers are.
"""
from __future__ import annotations

import logging
import os
from typing import NoReturn

_code = 1


def set_log_dirs_failed_exit_code(code: int) -> None:
    """This process's exit code for `halt_all_log_dirs_failed` (1 until set)."""
    global _code
    _code = code


def halt_all_log_dirs_failed() -> NoReturn:
    """Exit now with the code above, the log handlers flushed first (the caller's CRITICAL
    line is the process's last word)."""
    logging.shutdown()
    os._exit(_code)
