"""`pybroker-server config/standalone/server.properties [--override key=value]...`, like kafka-server-start.

Runs in the foreground, logs to stderr (as text, or JSON lines with log.format=json), and shuts down gracefully on SIGTERM or SIGINT. A bad
config or an unusable log dir exits non-zero with a one-line reason.

Without a config file it prints its usage and exits 1, as kafka-server-start.sh does, rather
than write to a log dir nobody chose; `--defaults` runs on the built-in defaults instead.
"""
from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, cast

from pybroker import VERSION_LINE
from pybroker.config import BROKER_CONFIG_DEFS, BrokerConfig, ConfigError, load_broker_config
from pybroker.runtime.logging_setup import buffer_startup_logs, configure_logging
from pybroker.runtime.malloc_tuning import tune_malloc
from pybroker.node.worker import HANDED_OVER_LINE, LOG_DIRS_FAILED_EXIT, NODE_FILE, WORKER_ENV, \
    cores_to_use

if TYPE_CHECKING:
    from pybroker.cluster.metadata import MetadataImage
    from pybroker.server import ServerInfo

log = logging.getLogger("pybroker")


USAGE = ("USAGE: pybroker-server server.properties [--override property=value]*\n"
         "       pybroker-server --defaults [--override property=value]*\n")

_DESCRIPTION = """\
Start a Kafka-compatible broker, as Kafka's kafka-server-start.sh does.

server.properties is a broker config file in Kafka's format and with Kafka's property
names (config/standalone/server.properties in the clone is a commented example: one broker on
127.0.0.1:9092). --override sets one property on top of the file, as in Kafka.

Data goes to the directories of log.dirs (the example file: /tmp/pybroker-logs); without
log.dirs and log.dir, to {log_dir}. --defaults runs on the built-in defaults alone (no
file): a listener on {listener}, data in {log_dir}.

The broker runs in the foreground, logs to stderr, and stops gracefully on Ctrl-C or SIGTERM.
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """A bad command line in one line and exit code 1, as the tools report theirs."""
        self.exit(1, f"{self.prog}: {message} (see --help)\n")


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line, or SystemExit: with neither a config file nor --defaults, the usage
    on stderr and exit code 1, as kafka-server-start.sh has it, so that a bare command never
    starts a broker writing to a directory nobody chose."""
    # Both are LIST keys, whose defaults are tuples of str.
    log_dir = ",".join(cast("tuple[str, ...]", BROKER_CONFIG_DEFS["log.dir"].default))
    listener = ",".join(cast("tuple[str, ...]", BROKER_CONFIG_DEFS["listeners"].default))
    parser = _Parser(
        prog="pybroker-server", usage=USAGE.removeprefix("USAGE: ").rstrip(),
        description=_DESCRIPTION.format(log_dir=log_dir, listener=listener),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", nargs="?", metavar="server.properties",
                        help="the broker's config file (Kafka's server.properties format)")
    parser.add_argument("--defaults", action="store_true",
                        help=f"run on the built-in defaults, without a config file (data in "
                        f"{log_dir} unless overridden)")
    parser.add_argument("--override", action="append", default=[], metavar="property=value",
                        help="set a property on top of the file (repeatable)")
    parser.add_argument("--version", action="version", version=VERSION_LINE,
                        help="print the pybroker version and exit")
    args = parser.parse_args(argv)
    if args.config is None and not args.defaults:
        sys.stderr.write(USAGE)
        raise SystemExit(1)
    if args.config is not None and args.defaults:
        parser.error(f"--defaults runs without a config file; got {args.config}")
    return args


def _overrides(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(item, "", "", message=f"--override {item!r}: expected key=value")
        out[key.strip()] = value.strip()
    return out


# trio and the broker (pybroker.server) are imported by the single broker's path below, not at
# the top: a node's supervisor serves nothing itself, and every module it imports is time
# before its workers start (the default start: docs/DESIGN.md, "One node, every core").
async def _serve_remembering(config: BrokerConfig, started: list[ServerInfo]) -> None:
    import trio

    from pybroker.server import serve
    async with trio.open_nursery() as nursery:
        started.append(await nursery.start(serve, config))
        if WORKER_ENV in os.environ:
            # A node's worker also says when it sees its node with leaders elected: the
            # supervisor's "ready" waits for that (pybroker.node.readiness).
            from pybroker.node.readiness import announce_in_sync, coordinators_loaded, \
                node_brokers
            brokers = node_brokers()
            broker = started[0].broker
            if brokers is not None and broker.zk_store is not None \
                    and broker.controller is not None:
                def loaded(image: MetadataImage) -> bool:
                    return coordinators_loaded(
                        image, broker.node_id, groups=broker.groups.owned,
                        membership=broker.shares.membership_owned,
                        transactions=broker.transactions.owned,
                        share_state=broker.shares.store.owned)
                nursery.start_soon(announce_in_sync, broker.zk_store, broker.node_id, brokers,
                                   broker.controller.unclean, loaded)


async def _run(config: BrokerConfig) -> None:
    import trio
    # The signal receiver is open before the broker starts, so that a SIGTERM arriving while
    # it loads its logs or just after it logs "listening" still shuts it down gracefully.
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            started: list = []
            nursery.start_soon(_serve_remembering, config, started)
            async for signum in signals:
                log.info("received %s, shutting down", signal.Signals(signum).name)
                if started:
                    # A cluster member hands its leaderships over first (controlled
                    # shutdown), while it still serves; a second signal stops it at once.
                    async with trio.open_nursery() as inner:
                        async def second_signal() -> None:
                            async for _ in signals:
                                inner.cancel_scope.cancel()
                                return
                        inner.start_soon(second_signal)
                        await started[0].broker.controlled_shutdown()
                        inner.cancel_scope.cancel()
                    if WORKER_ENV in os.environ:
                        # The node's supervisor stops its next worker on this line, while
                        # this one closes its logs (pybroker.node.supervisor._stop_next).
                        log.info("broker %d %s", started[0].broker.node_id, HANDED_OVER_LINE)
                nursery.cancel_scope.cancel()
                break


def _start_failure(exc: BaseException) -> OSError | ConfigError | None:
    """The reason a start failed, if it is one we can say in a line: an OSError (a listener,
    a log dir) or a ConfigError found late (meta.properties of another node), possibly inside
    the ExceptionGroup trio wraps a failing task's error in."""
    if isinstance(exc, (OSError, ConfigError)):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _start_failure(inner)
            if found is not None:
                return found
    return None


def _not_a_directory(path: Path) -> bool:
    return path.exists() and not path.is_dir()


def _cores(config: BrokerConfig) -> int:
    """How many brokers this node runs (num.cores, -1 = every CPU the process may use). With
    1, the node is this process, as before num.cores; a first log dir that a node of more
    brokers wrote is refused: its metadata is the node's store, which one broker does not read
    (pybroker.node.metadata_import.check_single_broker), and its brokers above the first would
    leave the cluster with their partitions (pybroker.node.supervisor.check_core_count)."""
    cores = cores_to_use(config)
    if cores > 1 and _not_a_directory(Path(config.log_dirs[0])):
        # The node's metadata store lives in its first log dir, so a node cannot start
        # without it, nor can a single broker (Kafka 4.1 stops without its metadata log
        # dir): the single-process start fails at once, with the broker's own reason.
        return 1
    if cores == 1 and WORKER_ENV not in os.environ:
        from pybroker.node.metadata_import import check_single_broker
        if (Path(config.log_dirs[0]) / NODE_FILE).exists():
            from pybroker.node.supervisor import check_core_count, recorded_cores
            check_single_broker(config, recorded_cores(Path(config.log_dirs[0])))
            check_core_count(config, 1)
        else:
            check_single_broker(config, None)
    return cores


def _exit_without_final_collection() -> None:
    """Once a broker or a node has stopped and closed what it keeps, only the process's exit
    is left, and CPython's ends with a full collection of the heap that frees memory the
    kernel takes back anyway: measured here at 0.2-0.6 s of a single broker's stop, as much
    for a node's supervisor, and paid by each worker of a node in turn. Objects frozen now
    are left out of it. Nothing durable waits on a finalizer: logs, checkpoints, the clean
    shutdown marker and the node's store were closed explicitly before this is called.
    (Only for a process about to exit: a caller that goes on would keep every object that
    exists now out of every later collection.)"""
    gc.freeze()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    tune_malloc()
    # Held until the config says which format (log.format): its own warnings included.
    early = buffer_startup_logs()
    try:
        # A node's worker says nothing of the config: its supervisor warned once for all.
        config = load_broker_config(args.config, _overrides(args.override),
                                    quiet=WORKER_ENV in os.environ)
    except (ConfigError, OSError) as exc:
        configure_logging("text", early=early)
        print(f"pybroker-server: {exc}", file=sys.stderr)
        return 1
    configure_logging(config.log_format, early=early)
    try:
        cores = _cores(config)
        if cores > 1:
            from pybroker.node.supervisor import run_node
            code = run_node(config, cores, args.config, args.override)
            _exit_without_final_collection()  # the workers have exited, the store is closed
            return code
    except (ConfigError, OSError) as exc:
        print(f"pybroker-server: {exc}", file=sys.stderr)
        return 1
    if WORKER_ENV in os.environ:
        # Its supervisor stops the node, rather than restart it, on this code (the
        # supervisor's rule for a worker whose every log dir failed).
        from pybroker.runtime.halt import set_log_dirs_failed_exit_code
        set_log_dirs_failed_exit_code(LOG_DIRS_FAILED_EXIT)
    import trio
    try:
        trio.run(_run, config)
        # Stopped cleanly: the logs flushed and closed, the checkpoints and the clean
        # shutdown marker written, the dir lock released.
        _exit_without_final_collection()
    except KeyboardInterrupt:
        pass
    except BaseException as exc:  # noqa: BLE001 - an OSError at start is a one-line reason
        reason = _start_failure(exc)
        if reason is None:
            raise
        print(f"pybroker-server: {reason}", file=sys.stderr)
        return _start_failure_code(reason)
    return 0


def _start_failure_code(reason: OSError | ConfigError) -> int:
    """1, as any failed start; but a node's worker none of whose log dirs can be used exits as
    one whose dirs failed while it served (LOG_DIRS_FAILED_EXIT): restarted after a crash onto
    a disk that failed meanwhile, it would fail the same way at every retry."""
    if WORKER_ENV in os.environ:
        from pybroker.storage.log_dir_lock import LogDirsFailed
        if isinstance(reason, LogDirsFailed):
            return LOG_DIRS_FAILED_EXIT
    return 1


if __name__ == "__main__":
    sys.exit(main())
