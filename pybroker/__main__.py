"""`pybroker-server config/server.properties [--override key=value]...`, like kafka-server-start.

Runs in the foreground, logs to stderr, and shuts down gracefully on SIGTERM or SIGINT. A bad
config or an unusable log dir exits non-zero with a one-line reason.
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import tempfile
from pathlib import Path

import trio

from pybroker.config import ConfigError, load_broker_config
from pybroker.server import serve

log = logging.getLogger("pybroker")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="pybroker-server",
        description="Start a Kafka-compatible broker with a server.properties file.")
    parser.add_argument("config", nargs="?", help="path to server.properties")
    parser.add_argument("--override", action="append", default=[], metavar="key=value",
                        help="override a property from the file (repeatable)")
    return parser.parse_args(argv)


def _overrides(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(item, "", "", message=f"--override {item!r}: expected key=value")
        out[key.strip()] = value.strip()
    return out


async def _run(config) -> None:  # type: ignore[no-untyped-def]
    # The signal receiver is open before the broker starts, so that a SIGTERM arriving while
    # it loads its logs or just after it logs "listening" still shuts it down gracefully.
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve, config)
            async for signum in signals:
                log.info("received %s, shutting down", signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break


def _check_log_dirs(config) -> None:  # type: ignore[no-untyped-def]
    """Fail before starting if a log dir cannot be created or written (OSError, one line)."""
    for d in config.log_dirs:
        path = Path(d)
        try:
            path.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=path):
                pass
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise OSError(f"log dir {d} is not usable: {reason}") from None


def _first_os_error(exc: BaseException) -> OSError | None:
    """The OSError inside `exc` (trio wraps a failing task's error in an ExceptionGroup)."""
    if isinstance(exc, OSError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _first_os_error(inner)
            if found is not None:
                return found
    return None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)")
    try:
        config = load_broker_config(args.config, _overrides(args.override))
        _check_log_dirs(config)
    except (ConfigError, OSError) as exc:
        print(f"pybroker-server: {exc}", file=sys.stderr)
        return 1
    try:
        trio.run(_run, config)
    except KeyboardInterrupt:
        pass
    except BaseException as exc:  # noqa: BLE001 - an OSError at start is a one-line reason
        os_error = _first_os_error(exc)
        if os_error is None:
            raise
        print(f"pybroker-server: {os_error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
