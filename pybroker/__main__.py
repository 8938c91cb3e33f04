"""`pybroker-server config/server.properties [--override key=value]...`, like kafka-server-start.

Runs in the foreground, logs to stderr, and shuts down gracefully on SIGTERM or SIGINT. A bad
config or an unusable log dir exits non-zero with a one-line reason.
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys

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
            raise ConfigError(item, "", "an override must look like key=value")
        out[key.strip()] = value.strip()
    return out


async def _run(config) -> None:  # type: ignore[no-untyped-def]
    async with trio.open_nursery() as nursery:
        await nursery.start(serve, config)
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("received %s, shutting down", signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)")
    try:
        config = load_broker_config(args.config, _overrides(args.override))
    except (ConfigError, OSError) as exc:
        print(f"pybroker-server: {exc}", file=sys.stderr)
        return 1
    for warning in getattr(config, "warnings", []):
        log.warning("%s", warning)
    try:
        trio.run(_run, config)
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        print(f"pybroker-server: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
