"""The node supervisor: `pybroker-server` with `num.cores` > 1 runs N brokers and answers for all.

Theory of operation. The supervisor is a plain process (threads, no trio): it starts the N
workers (pybroker.node.worker), forwards their stderr to its own line by line, and watches
them. What it promises:

- Start: one log line per worker (id, listeners, log dirs), then "N brokers ready" once every
  worker logged its "listening" line and then that it is in sync with its node: it sees every
  broker of the node and a controller, and every partition that can have a leader has one
  (pybroker.node.readiness; after a restart of the node, the controller's elections for the
  workers that registered last). A worker that exits before then stops the node (exit 1,
  and the last line is the worker's one-line reason, as a single broker's failed start ends):
  a port taken or a bad log dir does not get better by retrying.
- Ctrl-C / SIGTERM: forwarded to every worker, one after the other from the last (see
  `_stop_next`): each hands its leaderships over (controlled shutdown), and the next one is
  signalled as soon as it has, while it closes its logs cleanly; the supervisor exits 0 once
  all of them did. A second signal is forwarded to all at once: each worker then stops at
  once, as a single broker does.
  Workers run in a process group of their own, so the terminal's Ctrl-C reaches them once,
  through the supervisor, not twice (which a worker would read as "stop at once").
- kill -9 of the supervisor: every worker gets SIGKILL from the kernel (PR_SET_PDEATHSIG),
  so no worker serves on alone. What a worker acknowledged is in its segment files (the page
  cache) and survives, as for a single broker killed -9; the next start recovers each dir.
- A worker that dies: restarted, at most 3 times in any minute (`RESTARTS_PER_MINUTE`); the
  next death in that minute stops the whole node (exit 1, the reason logged). The node is
  whole or stopped, never half-alive. While a worker is down the cluster code handles it as a
  broker failure: its ZooKeeper session ends and its leaderships move to live replicas.
- A worker that stopped because every one of its log dirs failed (it exits with
  `LOG_DIRS_FAILED_EXIT` after Kafka's CRITICAL "Shutdown broker because all log dirs in ...
  have failed", pybroker.runtime.halt) is not restarted: its disks are still failed, so a
  restart would only fail again, each time with that line. Kafka halts such a broker and
  leaves it down until an operator has replaced the disk; the node does the same with the
  whole of itself: it stops at once (exit 1, one ERROR line naming the worker, its dirs and
  the reason), its other workers stopping cleanly, each handing its leaderships over first,
  as on SIGTERM. The node stops rather than serve on without that broker: on a machine all of
  a node's dirs (`<dir>`, `<dir>-K`) are normally on one disk, which the other workers would
  meet next, and a node with a broker down for good is the half-alive node this supervisor
  never leaves running. A dir that fails while others of the worker serve takes only that
  dir offline (KIP-112); the worker serves on and the node does not notice.
- The metadata store: with zookeeper.connect set, the workers use that ZooKeeper. Without it
  (the standalone default) the supervisor serves the node's store itself
  (pybroker.node.metadata_service) on a Unix socket, and each worker gets
  `zookeeper.connect=unix:<socket>`. Over a single broker's log dir, its first start imports
  that broker's metadata files into the store (pybroker.node.metadata_import).

Spawning happens on the main thread only: PR_SET_PDEATHSIG fires when the forking thread
exits, so a worker forked by a short-lived thread would be killed with it.
"""
from __future__ import annotations

import hashlib
import logging
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING, Any, Callable

from pybroker.config import BrokerConfig, ConfigError
from pybroker.node.import_check import METADATA_DIR, import_pending
from pybroker.node.readiness import IN_SYNC_LINE, NODE_BROKERS_ENV
from pybroker.node.worker import HANDED_OVER_LINE, LISTENING, LOG_DIRS_FAILED_EXIT, NODE_FILE, \
    WORKER_ENV, WorkerPlan, die_with_parent, plan_workers, worker_command

if TYPE_CHECKING:
    from pybroker.node.metadata_service import MetadataService

log = logging.getLogger("pybroker.node")

RESTARTS_PER_MINUTE = 3
# How long a node stopping on its own (a worker died too often) waits for the other workers'
# controlled shutdown before it kills them.
LOUD_STOP_TIMEOUT_S = 60.0
_IN_SYNC = re.compile(r"broker (\d+) " + re.escape(IN_SYNC_LINE))
_HANDED_OVER = re.compile(r"broker (\d+) " + re.escape(HANDED_OVER_LINE))


@dataclass
class _Worker:
    plan: WorkerPlan
    command: list[str]
    proc: subprocess.Popen[str] | None = None
    generation: int = 0
    port: int | None = None  # its first listener's bound port, once it is listening
    in_sync: bool = False  # it logged that it sees its node, leaders elected (readiness)
    last_lines: deque[str] = field(default_factory=lambda: deque(maxlen=20))
    deaths: deque[float] = field(default_factory=deque)
    stop_sent: bool = False  # SIGTERM sent to its current process
    handed_over: bool = False  # its controlled shutdown is over or skipped; it closes its logs


class Supervisor:
    """Runs the node's workers until a signal or a fatal death; `run()` is the exit code."""

    def __init__(self, plans: list[WorkerPlan], commands: list[list[str]],
                 env: dict[str, str] | None = None,
                 on_stopped: Callable[[], None] | None = None,
                 store: "MetadataService | None" = None) -> None:
        """`store`: the node's metadata service, when the supervisor runs it; a node whose
        store stopped serving stops loudly (its workers could only keep reconnecting to
        nothing, half-alive)."""
        self.workers = [_Worker(plan, command) for plan, command in zip(plans, commands)]
        self.env = env
        self.on_stopped = on_stopped
        self.store = store
        # What the main loop waits for: workers' lines and exits, signals, the store stopping.
        # It sleeps until one comes (or a stop's deadline), with no tick: an idle node's
        # supervisor does not wake. SimpleQueue because a signal handler puts into it, and
        # its put is reentrant (the handler may run while the main thread is inside get).
        self._events: queue.SimpleQueue[tuple[str, int, int, Any]] = queue.SimpleQueue()
        self._signals: deque[int] = deque()
        self._out_lock = threading.Lock()
        self._preexec = die_with_parent()
        # Why the node could not start, when a worker failed before it served.
        self.start_failure: str | None = None
        # Whether every worker has served once (the node logged "ready").
        self.serving = False

    # -- process handling (main thread) ------------------------------------------------------
    def _spawn(self, worker: _Worker) -> None:
        worker.generation += 1
        worker.port = None
        worker.in_sync = False
        worker.stop_sent = False
        worker.handed_over = False
        env = dict(self.env if self.env is not None else os.environ,
                   **{WORKER_ENV: str(worker.plan.index),
                      NODE_BROKERS_ENV: ",".join(str(w.plan.node_id) for w in self.workers)})
        proc = subprocess.Popen(worker.command, stdin=subprocess.DEVNULL, stdout=None,
                                stderr=subprocess.PIPE, text=True, errors="replace",
                                env=env, process_group=0, preexec_fn=self._preexec)
        worker.proc = proc
        log.info("worker %d (broker %d) started, pid %d", worker.plan.index,
                 worker.plan.node_id, proc.pid)
        assert proc.stderr is not None
        threading.Thread(target=self._read, args=(worker, worker.generation, proc, proc.stderr),
                         name=f"worker-{worker.plan.index}-stderr", daemon=True).start()

    def _read(self, worker: _Worker, generation: int, proc: subprocess.Popen[str],
              stream: IO[str]) -> None:
        """One worker's stderr, forwarded line by line; its "listening" line and its exit
        become events for the main thread."""
        for line in stream:
            # A worker's failed start ends with its one-line reason ("pybroker-server: ..."),
            # which the node repeats as its own last line while it has not served yet: shown
            # once, not twice (a single broker's failed start says its reason once).
            if self.serving or not line.startswith("pybroker-server: "):
                self._write(line)
            worker.last_lines.append(line.rstrip("\n"))
            if "pybroker node" in line and (m := LISTENING.search(line)):
                self._events.put(("up", worker.plan.index, generation, int(m.group(2))))
            elif (m := _IN_SYNC.search(line)) and int(m.group(1)) == worker.plan.node_id:
                self._events.put(("in sync", worker.plan.index, generation, 0))
            elif (m := _HANDED_OVER.search(line)) and int(m.group(1)) == worker.plan.node_id:
                self._events.put(("handed over", worker.plan.index, generation, 0))
        self._events.put(("exit", worker.plan.index, generation, proc.wait()))

    def _write(self, text: str) -> None:
        """`text` to the node's stderr. Once that is a pipe whose reader has gone (the node's
        parent died or closed it: Python ignores SIGPIPE, so the write raises
        BrokenPipeError), fd 2 is pointed at /dev/null and the node goes on: an exception
        here would end a worker's reader thread, whose events (its handover, its exit) the
        stop waits for, and the node would never stop (a SIGTERM left it running, its
        workers after the first still serving). The log handler writes to the same fd, so
        it too is quiet from then on instead of failing on every line."""
        with self._out_lock:
            try:
                sys.stderr.write(text)
                sys.stderr.flush()
            except OSError:
                devnull = os.open(os.devnull, os.O_WRONLY)
                try:
                    os.dup2(devnull, sys.stderr.fileno())
                finally:
                    os.close(devnull)

    def _signal(self, workers: list[_Worker], signum: int) -> None:
        for worker in workers:
            if worker.proc is not None and worker.proc.poll() is None:
                try:
                    worker.proc.send_signal(signum)
                except ProcessLookupError:
                    pass

    def _live(self) -> list[_Worker]:
        return [w for w in self.workers if w.proc is not None and w.proc.returncode is None]

    # -- the main loop ------------------------------------------------------------------------
    def run(self) -> int:
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            for worker in self.workers:
                log.info("%s", worker.plan.describe())
            for worker in self.workers:
                self._spawn(worker)
            if self.store is not None:
                threading.Thread(target=self._watch_store, args=(self.store,), daemon=True,
                                 name="node-store-watch").start()
            return self._watch()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            if self.on_stopped is not None:
                self.on_stopped()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals.append(signum)  # deque.append is safe here; the loop does the work
        self._events.put(("wake", -1, 0, None))

    def _watch_store(self, store: "MetadataService") -> None:
        store.stopped.wait()
        self._events.put(("wake", -1, 0, None))

    def _watch(self) -> int:
        ready = False
        stopping: str | None = None  # why the node stops: None while it serves
        code = 0
        deadline: float | None = None
        while True:
            while self._signals:
                signum = self._signals.popleft()
                name = signal.Signals(signum).name
                if stopping is None:
                    stopping = f"received {name}"
                    log.info("received %s, stopping the node's %d brokers, the last first",
                             name, len(self.workers))
                    self._stop_next()
                else:
                    log.info("received %s again, stopping the brokers at once", name)
                    self._signal(self._live(), signal.SIGTERM)
            if stopping is not None and not self._live():
                log.info("node stopped (%s)", stopping)
                if self.start_failure is not None:
                    # The last line, as a single broker's failed start ends: one line saying
                    # why, in the words of the worker that could not start.
                    self._write(f"pybroker-server: {self.start_failure}\n")
                return code
            if stopping is None and self.store is not None \
                    and (why := why_stopped(self.store)) is not None:
                lost = f"the node's metadata service stopped: {why}"
                log.error("stopping the node: %s", lost)
                stopping, code = lost, 1
                deadline = time.monotonic() + LOUD_STOP_TIMEOUT_S
                self._stop_next()
            if deadline is not None and time.monotonic() > deadline:
                log.error("brokers still running %.0f s after the stop; killing them",
                          LOUD_STOP_TIMEOUT_S)
                self._signal(self._live(), signal.SIGKILL)
                deadline = None
            try:
                kind, index, generation, value = self._events.get(
                    timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                continue  # the stop's deadline came
            if kind == "wake":
                continue  # a signal or the store: the loop's top looks at both
            worker = self.workers[index]
            if generation != worker.generation:
                continue
            if kind == "handed over":
                worker.handed_over = True
                if stopping is not None:
                    self._stop_next()
                continue
            if kind in ("up", "in sync"):
                if kind == "up":
                    worker.port = value
                else:
                    worker.in_sync = True
                if not ready and all(w.port is not None and w.in_sync for w in self.workers):
                    ready = self.serving = True
                    self._log_ready()
                elif ready and kind == "up":
                    log.info("worker %d (broker %d) is serving again on port %d", index,
                             worker.plan.node_id, value)
                continue
            # kind == "exit"
            if stopping is not None:
                # Killed by the SIGTERM the stop sent: it had not installed its handler yet,
                # which `pybroker.__main__` does before it opens any log dir, so nothing was
                # left half-written; a broker still starting stops as cleanly as one serving.
                if value == LOG_DIRS_FAILED_EXIT:
                    log.error("while stopping the node: %s", log_dirs_failed(worker.plan))
                    code = 1
                elif value != 0 and value != -signal.SIGTERM:
                    log.error("worker %d (broker %d) exited with code %s while stopping",
                              index, worker.plan.node_id, value)
                    code = 1
                self._stop_next()
                continue
            reason = self._death(worker, value, ready)
            if reason is None:
                self._spawn(worker)
                continue
            log.error("stopping the node: %s", reason)
            stopping, code = reason, 1
            deadline = time.monotonic() + LOUD_STOP_TIMEOUT_S
            self._stop_next()

    def _stop_next(self) -> None:
        """SIGTERM to the live worker of the highest index not yet signalled, unless one is
        still in its controlled shutdown.

        One controlled shutdown at a time: it moves the worker's leaderships to the other
        replicas in the ISR, and on a node alone those are the node's other workers; stopped
        all at once, each would wait for the others (20 s, then give up uncleanly). But only
        the handover is one at a time: once a worker logged HANDED_OVER_LINE it leads no
        partition that a live replica could take, the controller has taken it out of every
        ISR it was in (Kafka's controlled shutdown, `decisions.controlled_shutdown_moves`) and
        it is never again chosen to lead (its registration says it is shutting down), so the
        next worker's handover needs nothing more of it; it closes its logs meanwhile."""
        live = self._live()
        if any(w.stop_sent and not w.handed_over for w in live):
            return
        waiting = [w for w in live if not w.stop_sent]
        if not waiting:
            return
        waiting[-1].stop_sent = True
        self._signal(waiting[-1:], signal.SIGTERM)

    def _death(self, worker: _Worker, returncode: int, ready: bool) -> str | None:
        """Why the node must stop after this worker's death, or None to restart it."""
        plan = worker.plan
        last = worker.last_lines[-1] if worker.last_lines else "(nothing logged)"
        how = (f"killed by {signal.Signals(-returncode).name}" if returncode < 0
               else f"exit code {returncode}")
        if ready and returncode == LOG_DIRS_FAILED_EXIT:
            # Not its last line, which is its CRITICAL one, already forwarded: quoted, the
            # node's log would say it twice.
            return log_dirs_failed(plan) + "; a restart would meet the same failed disks"
        if not ready:
            # The worker's reason is the node's last line (`start_failure`, written once all
            # workers are down); the log lines before it name the worker and how it ended,
            # not the reason again: an operator reads it once, as a single broker says it.
            own = last.removeprefix("pybroker-server: ") if last.startswith(
                "pybroker-server: ") else None
            failed = f"worker {plan.index} (broker {plan.node_id}) failed to start ({how})"
            self.start_failure = own or f"{failed}: {last}"
            return failed
        now = time.monotonic()
        while worker.deaths and now - worker.deaths[0] > 60:
            worker.deaths.popleft()
        if len(worker.deaths) >= RESTARTS_PER_MINUTE:
            return (f"worker {plan.index} (broker {plan.node_id}) died ({how}) after "
                    f"{RESTARTS_PER_MINUTE} restarts in a minute; last line: {last}")
        worker.deaths.append(now)
        log.error("worker %d (broker %d) died (%s); restarting it (restart %d of at most %d "
                  "a minute); last line: %s", plan.index, plan.node_id, how,
                  len(worker.deaths), RESTARTS_PER_MINUTE, last)
        return None

    def _log_ready(self) -> None:
        first = self.workers[0]
        host = first.plan.listeners[0].host or "127.0.0.1"
        brokers = ", ".join(f"{w.plan.node_id} on {w.plan.listeners[0].host or '0.0.0.0'}:"
                            f"{w.port}" for w in self.workers)
        log.info("pybroker node of %d brokers ready, listening on %s:%d (brokers %s)",
                 len(self.workers), host, first.port, brokers)


def log_dirs_failed(plan: WorkerPlan) -> str:
    """What the node says of a worker that stopped because all its log dirs failed."""
    return (f"worker {plan.index} (broker {plan.node_id}) stopped because every one of its "
            f"log dirs failed ({', '.join(plan.log_dirs)})")


def run_node(config: BrokerConfig, cores: int, config_file: str | None,
             overrides: list[str]) -> int:
    """`pybroker-server` for `num.cores` = cores > 1: the node's exit code. A problem found
    before any worker starts is a ConfigError (one line), as a single broker's."""
    plans = plan_workers(config, cores)
    check_ports_free(plans)
    if not config.zookeeper_connect and import_pending(Path(config.log_dirs[0])):
        # First, so that a file it refuses leaves the dir as it was (no core count recorded).
        # Imported here only: the importer brings the storage layer and trio with its readers.
        from pybroker.node.metadata_import import import_single_broker
        import_single_broker(config)
    check_core_count(config, cores)
    extra: dict[str, str] = {}
    on_stopped: Callable[[], None] | None = None
    service: "MetadataService | None" = None
    if not config.zookeeper_connect:
        service, connect = _start_metadata_service(config)
        extra["zookeeper.connect"] = connect
        on_stopped = service.close
    commands = [worker_command(config_file, overrides + [f"{k}={v}" for k, v in extra.items()],
                               plan) for plan in plans]
    return Supervisor(plans, commands, on_stopped=on_stopped, store=service).run()


def check_ports_free(plans: list[WorkerPlan]) -> None:
    """OSError naming the first of the workers' listeners whose port is taken, in the words of
    a broker that cannot bind it (pybroker.server), before the node touches its log dir: a
    single broker binds its ports before it opens a log dir, so that a start on a taken port
    (the same configuration started twice) fails without touching the live broker's dir; the
    node's metadata service would lock and read that dir first. Port 0 is always free."""
    for plan in plans:
        for item in plan.listeners:
            if not item.port:
                continue
            try:
                addresses = socket.getaddrinfo(item.host or None, item.port,
                                               type=socket.SOCK_STREAM,
                                               flags=socket.AI_PASSIVE)
            except OSError:
                continue  # a name that does not resolve: the worker says so itself
            for family, kind, proto, _, address in addresses:
                with socket.socket(family, kind, proto) as probe:
                    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    try:
                        probe.bind(address)
                    except OSError as exc:
                        raise OSError(exc.errno, f"listener {item.url} cannot be bound: "
                                                 f"{exc.strerror or exc}") from None


def why_stopped(service: "MetadataService") -> str | None:
    """Why the node's metadata service no longer serves (its log failed, or it was closed),
    or None while it serves."""
    if not service.stopped.is_set():
        return None
    return str(service.failure) if service.failure is not None else "it was closed"


# -- the node's record of its core count -------------------------------------------------------

def recorded_cores(log_dir: Path) -> int | None:
    """The core count the node in `log_dir` (its first log dir) last ran with, if recorded."""
    path = log_dir / NODE_FILE
    if not path.exists():
        return None
    for line in path.read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "num.cores":
            return int(value.strip())
    return None


def check_core_count(config: BrokerConfig, cores: int) -> None:
    """Refuse a start that would strand partitions, then record `cores` for the next start.

    Fewer workers than last time takes the brokers of the workers left out away from the
    cluster with the partitions they lead: refused, naming the fix. More is fine (the new
    brokers join empty). `cores` = 1 is the single broker's path (pybroker.__main__)."""
    log_dir = Path(config.log_dirs[0])
    before = recorded_cores(log_dir)
    if before is not None and cores < before:
        gone = ", ".join(str(config.node_id + 1000 * k) for k in range(cores, before))
        raise ConfigError("num.cores", cores, "", message=(
            f"{log_dir / NODE_FILE} says this node ran {before} brokers; num.cores={cores} would "
            f"leave brokers {gone} out with their partitions: set num.cores={before}, or move "
            f"their partitions to other brokers (kafka-reassign-partitions) and delete "
            f"{log_dir / NODE_FILE}"))
    if cores > 1 and before != cores:
        log_dir.mkdir(parents=True, exist_ok=True)
        tmp = log_dir / (NODE_FILE + ".tmp")
        tmp.write_text(f"# written by pybroker-server: the brokers this node runs\n"
                       f"num.cores={cores}\n")
        os.replace(tmp, log_dir / NODE_FILE)


_SOCKET_PATH_MAX = 107  # sun_path holds 108 bytes with the NUL


def _socket_path(data_dir: Path) -> Path:
    """`data_dir`/metadata.sock, or, when that path is too long for a Unix socket, one in the
    temp dir named after a hash of `data_dir` (the same node finds the same name again)."""
    preferred = data_dir.resolve() / "metadata.sock"
    if len(os.fsencode(preferred)) <= _SOCKET_PATH_MAX:
        return preferred
    digest = hashlib.sha256(os.fsencode(data_dir.resolve())).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"pybroker-node-{digest}.sock"


def _start_metadata_service(config: BrokerConfig) -> tuple["MetadataService", str]:
    """The standalone node's metadata service, started, and the workers' zookeeper.connect."""
    from pybroker.node.metadata_service import MetadataService
    data_dir = Path(config.log_dirs[0]) / METADATA_DIR
    service = MetadataService(_socket_path(data_dir), data_dir,
                              config.zookeeper_session_timeout_ms)
    try:
        service.start()
    except RuntimeError as exc:  # the dir is another running node's
        raise ConfigError("log.dirs", ",".join(config.log_dirs), "", message=str(exc)) from None
    return service, service.connect
