"""Real brokers for test suites: in-process on a background thread, or as a subprocess that a
test can kill -9.

The beginning of the testing kit (issue #16 builds on it): pybroker's own tests and the
compatibility suite (`compat/`) use these, so neither imports the other. Brokers listen on
an ephemeral loopback port and get test-friendly defaults: no initial rebalance delay (a
group forms at once) and five `__consumer_offsets` and `__transaction_state` partitions
instead of fifty (less to create). Everything else is the broker's real defaults.
"""
from __future__ import annotations

import atexit
import collections
import logging
import os
import re
import random
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator, Mapping, Sequence, TypeVar

import trio

from pybroker.runtime.clock import Clock
from pybroker.config import BrokerConfig, load_broker_config
from pybroker.network.request_hooks import RequestHooks
from pybroker.node.worker import LISTENING, cores_to_use, worker_log_dir
from pybroker.server import ServerInfo, serve
from pybroker.testing.cluster import Cluster
from pybroker.testing.loop import LoopThread, off_trio, on_a_thread

T = TypeVar("T")

__all__ = ["broker_config", "broker_in_thread", "BrokerProcess", "Broker", "Cluster",
           "ExternalBroker", "StartWatch"]

# The directory holding the pybroker package: a subprocess broker imports the same code.
_SOURCE = Path(__file__).resolve().parents[2]


def broker_config(log_dir: Path, **overrides: str) -> BrokerConfig:
    """A config on an ephemeral loopback port; overrides as keywords, `_` for `.`."""
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(log_dir),
             "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "5",
             "transaction.state.log.num.partitions": "5"}
    props.update({k.replace("_", "."): v for k, v in overrides.items()})
    return load_broker_config(None, props)


@contextmanager
def broker_in_thread(log_dir: Path, hooks: RequestHooks | bool = False,
                     clock: Clock | None = None, **overrides: str) -> Iterator[ServerInfo]:
    """A real broker on an ephemeral port, served by trio in a background thread. With
    `hooks` (True for a fresh `RequestHooks`, or one to share) it records requests and
    serves `info.hooks` (pybroker.network.request_hooks); `clock` is the clock of
    its timers (pybroker.runtime.clock), one a test advances."""
    config = broker_config(log_dir, **overrides)
    if hooks is True:
        hooks = RequestHooks()
    loop = LoopThread()
    info = loop.start(30, partial(serve, config, hooks=hooks or None, clock=clock))
    try:
        yield info
    finally:
        loop.close(30)


# The test kit's brokers run as ONE process unless PYBROKER_NUM_CORES says otherwise,
# whatever the server's own default (-1, every CPU: issue #29). A test broker is one
# broker: a test that asks for `broker.port` or kills "the broker" means one process, the
# thread mode cannot be several processes anyway, and a test whose broker count followed the
# machine's cores would behave differently on a laptop and a 64-core CI runner. The suite
# runs with PYBROKER_NUM_CORES=2 as well (docs/TESTING.md), so the node path is exercised.
DEFAULT_NUM_CORES = 1


def num_cores_default() -> int:
    """PYBROKER_NUM_CORES (the tier runner's override, so the suite runs with 1 and with 2
    brokers a node), else DEFAULT_NUM_CORES; ValueError naming it when it is not a count."""
    raw = os.environ.get("PYBROKER_NUM_CORES", "").strip()
    if not raw:
        return DEFAULT_NUM_CORES
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"PYBROKER_NUM_CORES={raw!r}: expected -1 or a count of at least 1"
                         ) from None
    if value != -1 and value < 1:
        raise ValueError(f"PYBROKER_NUM_CORES={raw!r}: expected -1 or a count of at least 1")
    return value


_WORKER_STARTED = re.compile(r"worker (\d+) \(broker \d+\) started, pid (\d+)")
# A node's supervisor's line once every worker is in sync: "... brokers ready, " and then a
# broker's listening line (host, port).
_NODE_READY = re.compile(r"brokers ready, " + LISTENING.pattern)


class StartWatch:
    """Reads a `pybroker-server` process's stderr lines, however many brokers it runs: `feed`
    gives the port it serves on once it does. A single broker serves once it logs `listening
    on`; a node of several (num.cores, whose default follows the machine's CPUs) once its
    supervisor logs `brokers ready`: its workers' own `listening on` lines come first, while
    they do not yet see each other. A node says it is one (a `worker K ... started` line)
    before any worker can listen."""

    def __init__(self) -> None:
        self.node = False

    def feed(self, line: str) -> int | None:
        self.node = self.node or _WORKER_STARTED.search(line) is not None
        m = (_NODE_READY if self.node else LISTENING).search(line)
        return int(m.group(2)) if m else None

# The lowest port a node's block of ports is taken from (below: the well-known and the
# commonly configured ports).
_BLOCK_PORTS_FROM = 10000


def free_port_block(host: str, count: int) -> int:
    """A port P such that P .. P + count - 1 are free on `host` now, below the kernel's
    ephemeral range (ip_local_port_range): a node's worker K listens on P + K, and a port
    the kernel hands out (to a client's connection or a port-0 listener) never lands in
    the block, so a restart of the node finds its ports again. Where every port has been
    tried, OSError."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    bases = list(range(_BLOCK_PORTS_FROM, max(_BLOCK_PORTS_FROM + 1, low - count + 1), count))
    random.shuffle(bases)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for base in bases:
        taken = []
        try:
            for port in range(base, base + count):
                sock = socket.socket(family, socket.SOCK_STREAM)
                taken.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((host, port))
        except OSError:
            continue
        finally:
            for sock in taken:
                sock.close()
        return base
    raise OSError(f"no {count} consecutive free ports on {host} below {low}")


def process_running(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for init to reap it serves nothing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


class BrokerProcess:
    """`python -m pybroker` as a child process, so a test can kill -9 it."""

    def __init__(self, log_dir: Path, port: int = 0, config: str | None = None,
                 open_files: int | None = None, file_size_limit: int | None = None,
                 python: str | None = None, source: Path | None = None,
                 host: str = "127.0.0.1",
                 wrap: Callable[[Sequence[str]], list[str]] | None = None,
                 pin_cores: bool = True, **overrides: str) -> None:
        """With `config`, the file is used as given but for port and log dir (and an HTTP
        side door the file asks for moves to an ephemeral port, `http_port`). `open_files`
        sets the child's RLIMIT_NOFILE, soft and hard (`ulimit -Hn`: the broker raises its
        soft limit to the hard one); `file_size_limit` its RLIMIT_FSIZE (`ulimit -f`: a
        write past it fails, as on a full disk). `python` and `source` run another build
        (an interpreter and the tree it imports pybroker from: the benchmark's A/B mode).
        `host`: the address it listens on; `wrap` turns the command line into the one that
        runs it elsewhere (`pybroker.testing.network.Network.command`: in a network
        namespace whose address is `host`). `pin_cores`=False leaves num.cores to the file
        (or the built-in default, every CPU) when no override names it, as a user's start
        does: the README's commands; otherwise the kit's count (`num_cores_default`)."""
        self.host = host
        self.wrap = wrap
        self.python = python or sys.executable
        self.source = source or _SOURCE
        self.config = config
        self.open_files = open_files
        self.file_size_limit = file_size_limit
        self.log_dir = log_dir
        self.port = port
        self.overrides = overrides
        self.pin_cores = pin_cores
        self.proc: subprocess.Popen | None = None
        self.stderr_lines: list[str] = []
        # Reads the rest of stderr into stderr_lines once started; `wait` joins it, so the
        # lines a broker wrote just before it exited are there once it is reaped.
        self._drainer: threading.Thread | None = None
        # The bound port of the first of http.listeners, once started (None without one).
        self.http_port: int | None = None

    def start(self, timeout: float = 30) -> "BrokerProcess":
        cores = self.num_cores
        if cores > 1 and self.port == 0 and self.wrap is None:
            # Worker K listens on port + K: with port 0 each would take an ephemeral port of
            # its own, and a restart on `port` would put worker 1 on port + 1, which nothing
            # kept free. A block of the node's own keeps every worker's port across restarts.
            self.port = free_port_block(self.host, cores)
        args = [self.python, "-m", "pybroker",
                "--override", f"listeners=PLAINTEXT://{self.host}:{self.port}",
                "--override", f"log.dirs={self.log_dir}"]
        if self.config is not None:
            args.insert(3, self.config)
            if not {"http_listeners", "http.listeners"} & set(self.overrides):
                args += ["--override", "http.listeners=http://127.0.0.1:0"]
        else:
            args += ["--defaults", "--override", "group.initial.rebalance.delay.ms=0",
                     "--override", "offsets.topic.num.partitions=5",
                     "--override", "transaction.state.log.num.partitions=5"]
        if self.pin_cores and not {"num_cores", "num.cores"} & set(self.overrides):
            args += ["--override", f"num.cores={cores}"]
        for k, v in self.overrides.items():
            args += ["--override", f"{k.replace('_', '.')}={v}"]
        watch = StartWatch()
        env = dict(os.environ, PYTHONPATH=str(self.source))
        limited = self.open_files is not None or self.file_size_limit is not None
        self.proc = subprocess.Popen(self.wrap(args) if self.wrap else args,
                                     stderr=subprocess.PIPE, text=True, env=env,
                                     cwd=self.source,
                                     preexec_fn=self._limit if limited else None)
        deadline = time.monotonic() + timeout
        assert self.proc.stderr is not None
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError("broker exited early:\n" + "".join(self.stderr_lines))
            self.stderr_lines.append(line)
            http = re.search(r"HTTP \(.*\) on http://\S*:(\d+)", line)
            if http and self.http_port is None:
                self.http_port = int(http.group(1))
            port = watch.feed(line)
            if port is not None:
                self.port = port
                self._drainer = threading.Thread(target=self._drain, daemon=True)
                self._drainer.start()
                return self
        # Given up on: killed, so that it neither runs on beside the next test (its ports,
        # its dir, its CPU) nor outlives the run; a node's workers die with it (PDEATHSIG).
        self.proc.kill()
        self.proc.wait()
        raise RuntimeError(f"broker did not start in {timeout:g} s (killed):\n"
                           + "".join(self.stderr_lines))

    @property
    def num_cores(self) -> int:
        """The brokers this process runs (num.cores): the num_cores override, else
        PYBROKER_NUM_CORES, else 1 (`DEFAULT_NUM_CORES`), -1 read as the CPUs it may use;
        without `pin_cores`, the override, else what the file (or the default) says."""
        given = self.overrides.get("num_cores", self.overrides.get("num.cores"))
        if given is None and not self.pin_cores:
            return cores_to_use(load_broker_config(self.config, {}, quiet=True))
        cores = int(given if given is not None else num_cores_default())
        return len(os.sched_getaffinity(0)) if cores == -1 else cores

    def log_dirs(self) -> list[Path]:
        """The log dirs of the brokers this process runs: `log_dir`, and for a node of N
        brokers also worker K's `log_dir`-K (pybroker.node.worker)."""
        return [self.log_dir] + [Path(worker_log_dir(str(self.log_dir), k))
                                 for k in range(1, self.num_cores)]

    def partition_dir(self, partition: str) -> Path:
        """The directory of `partition` (`topic-N`) in whichever of `log_dirs()` holds it: on a
        node, the partition lives with the worker that was assigned it. FileNotFoundError
        naming the dirs looked in when none holds it; ValueError when several do (a
        replicated partition: say which broker's copy)."""
        found = [d / partition for d in self.log_dirs() if (d / partition).is_dir()]
        if not found:
            raise FileNotFoundError(f"no {partition} in {[str(d) for d in self.log_dirs()]}")
        if len(found) > 1:
            raise ValueError(f"{partition} is in several log dirs: {[str(d) for d in found]}")
        return found[0]

    def _limit(self) -> None:
        if self.open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files, self.open_files))
        if self.file_size_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE,
                               (self.file_size_limit, self.file_size_limit))

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def wait(self, timeout: float) -> int:
        """The broker's exit status, once it has exited and everything it wrote to stderr is
        in `stderr_lines` (`proc.wait` alone returns while the reading thread may still be
        behind: a broker's last line, such as its CRITICAL one, could then be missing)."""
        assert self.proc is not None
        rc = self.proc.wait(timeout)
        if self._drainer is not None:
            self._drainer.join(timeout)
        return rc

    def kill(self) -> None:
        """SIGKILL. A node's workers die with it (the kernel's PR_SET_PDEATHSIG), a moment
        after it: this returns once they are gone too, so a restart finds its ports and log
        dirs free."""
        assert self.proc is not None
        workers = self.worker_pids()
        self.proc.send_signal(signal.SIGKILL)
        self.wait(10)
        deadline = time.monotonic() + 10
        while any(process_running(pid) for pid in workers):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the node's workers {workers} outlived its kill -9")
            time.sleep(0.01)

    def worker_pids(self) -> list[int]:
        """The pids of a node's workers (num.cores > 1), their latest processes, from the
        supervisor's log; none for a single broker."""
        pids: dict[str, int] = {}
        for line in list(self.stderr_lines):
            m = _WORKER_STARTED.search(line)
            if m:
                pids[m.group(1)] = int(m.group(2))
        return list(pids.values())

    @property
    def serving_pid(self) -> int:
        """The pid of the process that serves `bootstrap` (its memory, its descriptors): the
        broker's own, or on a node worker 0's, the supervisor's child on the first port."""
        assert self.proc is not None
        first = [int(m.group(2)) for line in list(self.stderr_lines)
                 if (m := _WORKER_STARTED.search(line)) and m.group(1) == "0"]
        return first[-1] if first else self.proc.pid

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.wait(20)


class _RecentLog(logging.Handler):
    """The last lines the in-process brokers logged: a failing test shows them."""

    def __init__(self, size: int) -> None:
        super().__init__(logging.INFO)
        self.lines: collections.deque[str] = collections.deque(maxlen=size)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(self.format(record))
        except Exception:  # pragma: no cover - a bad log call must not break the broker
            self.handleError(record)


class Broker:
    """A real broker for a test suite: an ephemeral loopback port, a temporary log dir.

    By default it is served by trio in a background thread of this process (so plain,
    asyncio and trio tests can all use it, and request hooks reach it); `process=True` runs
    it as `python -m pybroker` in a child process instead, for tests that kill -9 it.
    Keywords are broker config keys with `_` for `.` (`num_partitions=3`); the defaults are
    Kafka's but for the test-friendly ones of `broker_config`. The log dir is removed at
    `stop()` unless `keep=True` or it was given as `log_dir`.
    """

    def __init__(self, process: bool = False, *, keep: bool = False,
                 log_dir: str | os.PathLike[str] | None = None, log_lines: int = 200,
                 **config: object) -> None:
        self.process = process
        self.keep = keep or log_dir is not None
        self._given_log_dir = Path(log_dir) if log_dir is not None else None
        self.log_dir: Path | None = self._given_log_dir
        self.config = {k: _prop(v) for k, v in config.items()}
        self.port = 0
        self._stack: ExitStack | None = None
        self._info: ServerInfo | None = None
        self._proc: BrokerProcess | None = None
        self._log = _RecentLog(log_lines)
        # The timers' clock, kept across restarts: time a test advanced stays advanced.
        self.clock = Clock()

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> "Broker":
        if self.running:
            raise RuntimeError("the broker is already running")
        if self.log_dir is None:
            self.log_dir = Path(tempfile.mkdtemp(prefix="pybroker-test-"))
        overrides = dict(self.config)
        # A broker left running is stopped before the interpreter freezes its thread (else
        # exit hangs on it); stop() takes this back.
        atexit.register(self.stop)
        if self.port:  # a restart keeps the port clients were told about
            overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{self.port}"
        if self.process:
            # The overrides are Kafka's keys with `_` for `.`: none spells config, open_files,
            # file_size_limit, python or source. (Kafka 0.8's `port` would meet the port
            # keyword and fail with a TypeError: listeners is the key to give.)
            self._proc = BrokerProcess(self.log_dir, port=self.port,
                                       **overrides).start()  # type: ignore[arg-type]
            self.port = self._proc.port
            return self
        stack = ExitStack()
        logger = logging.getLogger("pybroker")
        if logger.getEffectiveLevel() > logging.INFO:
            # INFO is where the broker says what it did (topics, groups, elections).
            previous = logger.level
            logger.setLevel(logging.INFO)
            stack.callback(logger.setLevel, previous)
        logger.addHandler(self._log)
        stack.callback(logger.removeHandler, self._log)
        try:
            self._info = stack.enter_context(broker_in_thread(self.log_dir, hooks=True,
                                                              clock=self.clock, **overrides))
        except BaseException:
            stack.close()
            raise
        self._stack = stack
        self.port = self._info.port
        return self

    def stop(self) -> None:
        """Stop the broker (SIGTERM in process mode) and remove a temporary log dir."""
        atexit.unregister(self.stop)
        self._halt()
        if not self.keep and self.log_dir is not None:
            shutil.rmtree(self.log_dir, ignore_errors=True)
            self.log_dir = None
            self.port = 0

    def restart(self) -> "Broker":
        """Stop and start again on the same port with the same log dir (what survives is
        what the broker wrote to disk)."""
        self._halt()
        return self.start()

    def kill(self) -> None:
        """SIGKILL the broker process; restart() brings it back on the same port and logs."""
        if not self.process:
            raise RuntimeError("kill() needs Broker(process=True): a broker in this process's "
                               "thread cannot be killed without killing the test run")
        assert self._proc is not None, "the broker is not running"
        self._proc.kill()
        self._proc = None

    def _halt(self) -> None:
        if self._proc is not None:
            self._proc.stop()
            self._proc = None
        if self._stack is not None:
            stack, self._stack, self._info = self._stack, None, None
            off_trio(stack.close)

    @property
    def running(self) -> bool:
        return self._proc is not None or self._stack is not None

    def __enter__(self) -> "Broker":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what a test uses ----------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log_dirs(self) -> list[Path]:
        """The log dir of each broker it runs, worker K's K-th (`BrokerProcess.log_dirs`):
        a node of several brokers (process mode with num.cores > 1) has one per worker, whose
        broker id is node.id + 1000 K; a single broker has `log_dir` alone."""
        if self._proc is not None:
            return self._proc.log_dirs()
        assert self.log_dir is not None, "the broker is not running"
        return [self.log_dir]

    @property
    def http_port(self) -> int | None:
        """The bound port of the broker's first HTTP listener (/healthz, /readyz, /metrics),
        when `http_listeners` was given (e.g. "http://127.0.0.1:0")."""
        if self._proc is not None:
            return self._proc.http_port
        return None if self._info is None else self._info.http_port

    @property
    def server_info(self) -> ServerInfo:
        """The in-process server (thread mode only): its broker, port and trio token."""
        if self._info is None:
            raise RuntimeError("server_info is for a running Broker() in thread mode"
                               + (" (this one is process=True)" if self.process else ""))
        return self._info

    def recent_log(self, lines: int = 50) -> list[str]:
        """The broker's last log lines (thread mode: every in-process broker's INFO and
        above; process mode: the child's stderr)."""
        if self.process:
            return list(self._proc.stderr_lines[-lines:]) if self._proc is not None else []
        return list(self._log.lines)[-lines:]

    def create_topic(self, name: str, partitions: int = 1,
                     config: Mapping[str, object] | None = None) -> None:
        """Create a topic and return once it has a leader with its log made (in process:
        the topic admin; in a subprocess: CreateTopics). KafkaError if the broker refuses."""
        configs = {k: _prop(v) for k, v in (config or {}).items()}
        if self._info is not None:
            self._in_broker(lambda: self._create_here(name, partitions, configs))
        else:
            on_a_thread(lambda: trio.run(self._create_over_wire, name, partitions, configs))

    async def _create_here(self, name: str, partitions: int, configs: dict[str, str]) -> None:
        from protocol.errors import KafkaError
        topics = self.server_info.broker.services.topics
        async with topics.changes:
            code, message = await topics.create_topic(name, partitions, 1, configs)
        if code:
            raise KafkaError(code, message)

    async def _create_over_wire(self, name: str, partitions: int,
                                configs: dict[str, str]) -> None:
        await create_topic_over_wire(self.bootstrap, name, partitions, configs)

    def _in_broker(self, fn: Callable[[], Awaitable[T]]) -> T:
        """fn() on the broker's own trio loop, from any thread but that loop's."""
        token = self.server_info.token
        return off_trio(lambda: trio.from_thread.run(fn, trio_token=token))

    # -- chaos verbs: what the broker otherwise does on its own clock --------------------------
    def compact(self) -> int:
        """Run the log cleaner now over every compacted log that needs it (thread mode), as
        its background pass would after log.cleaner.backoff.ms; how many logs it cleaned."""
        return self._in_broker(self.server_info.broker.log_jobs.clean_logs)

    def apply_retention(self) -> int:
        """Apply retention now (thread mode), as the broker does every
        log.retention.check.interval.ms: segments past retention.ms / retention.bytes, and
        below a DeleteRecords log start, go; how many segments were deleted."""
        async def retention() -> int:
            return self.server_info.broker.log_jobs.apply_retention()
        return self._in_broker(retention)

    def advance_time(self, ms: int) -> None:
        """Move the broker's timers `ms` milliseconds forward (thread mode) and run at once
        what became due, as if the time had passed: group members whose session ran out are
        removed (their groups rebalance), transactions open longer than their timeout are
        aborted (their producer fenced), transactional ids and committed offsets past their
        expiration go, and retention.ms deletes old segments. Record timestamps, segment
        rolling, connection idling and fetch waits keep the wall clock (docs/TESTING.md)."""
        if self.process:
            raise RuntimeError("advance_time() needs a Broker() in thread mode: a "
                               "process=True broker runs on its own clock")
        broker = self.server_info.broker

        async def advance() -> None:
            broker.clock.advance(ms)
            await broker.time_advanced()
        self._in_broker(advance)

    def fence_producer(self, transactional_id: str) -> tuple[int, int]:
        """Fence the producer of `transactional_id` (thread mode) as a new producer's
        InitProducerId would: its epoch is bumped and its open transaction aborted, so its
        next request is answered PRODUCER_FENCED (INVALID_PRODUCER_EPOCH in the older API
        versions that lack it). Returns (producer id, new epoch); KafkaError
        (TRANSACTIONAL_ID_NOT_FOUND, ...) if the coordinator refuses."""
        from protocol.errors import KafkaError
        coordinator = self.server_info.broker.transactions

        async def fence() -> tuple[int, int]:
            code, producer_id, epoch = await coordinator.fence_producer(transactional_id)
            if code:
                raise KafkaError(code, f"fencing {transactional_id!r}")
            return producer_id, epoch
        return self._in_broker(fence)

    # -- request hooks (pybroker.network.request_hooks) ----------------------------------------
    @property
    def hooks(self) -> Any:
        hooks = getattr(self.server_info, "hooks", None)
        if hooks is None:
            raise RuntimeError("request hooks are not available: this pybroker has no "
                               "pybroker.network.request_hooks (ServerInfo.hooks)")
        return hooks

    def control(self, api: object, handler: Callable[..., Any], *, times: int | None = 1
                ) -> Any:
        """server_info.hooks.control(...): intercept requests of `api`."""
        return self.hooks.control(api, handler, times=times)

    @property
    def requests(self) -> Any:
        """What clients sent, as recorded by the request hooks."""
        return self.hooks.requests


async def create_topic_over_wire(bootstrap: str, name: str, partitions: int,
                                 configs: Mapping[str, str], *,
                                 replication_factor: int = 1, timeout: float = 30) -> None:
    """CreateTopics, then Metadata until every partition has a leader: a broker that
    answers CreateTopics from its controller (Apache Kafka) may not know the topic yet."""
    from protocol.errors import ErrorCode, KafkaError
    from pybroker.client.admin import Admin, NewTopic
    from pybroker.client.client import open_client
    async with open_client(bootstrap) as client:
        admin = Admin(client)
        result = await admin.create_topics(
            [NewTopic(name, partitions, replication_factor, dict(configs))])
        if isinstance(result[name], BaseException):
            raise result[name]
        with trio.move_on_after(timeout):
            while True:
                topic = (await admin.describe_topics([name]))[name]
                if (not isinstance(topic, BaseException) and len(topic.partitions) == partitions
                        and all(p.has_leader for p in topic.partitions.values())):
                    return
                await trio.sleep(0.02)
        raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE,
                         f"topic {name!r} has no leader for every partition after {timeout} s")


class ExternalBroker:
    """A broker this test run did not start (Apache Kafka, another pybroker), seen as the
    pytest plugin's `kafka_broker`: the same `bootstrap` and `create_topic`, over the wire,
    so a suite written for pybroker runs unchanged against any Kafka. What only a broker in
    this process can do (request hooks, compact, apply_retention) says so when asked."""

    process = False

    def __init__(self, bootstrap: str) -> None:
        from pybroker.client.client import parse_bootstrap
        parse_bootstrap(bootstrap)  # ValueError now for "host" without a port
        self._bootstrap = bootstrap

    @property
    def bootstrap(self) -> str:
        return self._bootstrap

    @property
    def running(self) -> bool:
        return True

    def create_topic(self, name: str, partitions: int = 1,
                     config: Mapping[str, object] | None = None) -> None:
        """CreateTopics on the external broker; returns once every partition has a leader."""
        configs = {k: _prop(v) for k, v in (config or {}).items()}
        on_a_thread(lambda: trio.run(create_topic_over_wire, self._bootstrap, name, partitions,
                                      configs))

    def recent_log(self, lines: int = 50) -> list[str]:
        """Nothing: the external broker's log is its own."""
        return []

    def __getattr__(self, name: str) -> Any:
        if name in {"control", "requests", "hooks", "compact", "apply_retention", "kill",
                    "restart", "server_info"}:
            raise RuntimeError(
                f"{name} needs a pybroker broker that this test run started; kafka_broker is "
                f"the external broker {self._bootstrap} (--kafka-bootstrap / "
                f"PYBROKER_TEST_BOOTSTRAP)")
        raise AttributeError(name)


def _prop(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)
