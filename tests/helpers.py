"""Running real brokers for integration tests: `pybroker.testing`'s, and the test's broker at
the suite's core count (`serving_broker`, `Broker`: tests/in_process.py says why), and the
repository's root."""
from __future__ import annotations

import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import trio

from pybroker.config import Listener
from pybroker.runtime.clock import Clock
from pybroker.network.request_hooks import RequestHooks
from pybroker.node.worker import WORKER_ID_STRIDE
from pybroker.server import ServerInfo
from pybroker.testing import BrokerProcess, broker_config
from pybroker.testing import Broker as KitBroker
from pybroker.testing import broker_in_thread as kit_broker_in_thread
from pybroker.testing.broker import create_topic_over_wire, free_port_block, num_cores_default
from pybroker.testing.loop import on_a_thread
from tests import in_process

__all__ = ["ROOT", "Broker", "BrokerProcess", "WireBroker", "broker_config", "broker_in_thread",
           "serving_broker"]

ROOT = Path(__file__).resolve().parents[1]


def venv_not_ready() -> str | None:
    """Why bin/ scripts would install a virtual environment before running (so a test that
    runs them without a network, or timed, cannot), or None when they run at once. bin/test
    installs it with the test extras first, so under bin/test this is None."""
    import os
    venv = Path(os.environ.get("PYBROKER_VENV", ROOT / ".venv"))
    stamps = [s for s in (venv / ".installed-test", venv / ".installed") if s.exists()]
    if not (venv / "bin" / "python").exists() or not stamps:
        return f"bin/_bootstrap would create {venv} first (no {venv / '.installed'})"
    # As bin/_bootstrap: a plain command is served by either stamp that is newer than
    # pyproject.toml (an install with the test extras serves the plain commands too).
    built = (ROOT / "pyproject.toml").stat().st_mtime
    if all(built > s.stat().st_mtime for s in stamps):
        return "bin/_bootstrap would reinstall: pyproject.toml is newer than the venv stamp"
    return None


@dataclass
class Result:
    """What a command-line tool's main() did: its exit code and captured output."""

    rc: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


# What only a broker in this process has: a WireBroker (or a wire-only `Broker`) refuses them
# by name, so that a test that reads them says why (tests/in_process.py).
_IN_PROCESS_ONLY = frozenset({"broker", "token", "hooks", "server_info", "control", "requests",
                              "compact", "apply_retention", "advance_time", "fence_producer"})


def _needs_the_mark(what: str) -> RuntimeError:
    return RuntimeError(
        f"{what} is the broker in this process, which this test does not hold: a test that "
        "needs it says why with @pytest.mark.in_process(\"reason\") (tests/in_process.py). "
        "Without it an integration test's broker is seen over the wire, as a node of "
        "PYBROKER_NUM_CORES brokers when that is above 1")


@dataclass
class WireBroker:
    """An integration test's broker as its clients see it: where it listens and the log dirs
    it writes. Behind it, a thread broker (PYBROKER_NUM_CORES unset or 1) or a node of
    PYBROKER_NUM_CORES brokers (`process`); `ports` and `http_port` are its first broker's
    (a node's worker K listens on each + K)."""

    host: str
    port: int
    ports: dict[str, int]
    http_port: int | None
    log_dir: Path
    process: BrokerProcess | None = None
    dirs: list[Path] = field(default_factory=list)
    node_id: int = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def brokers(self) -> list[tuple[int, int]]:
        """(broker id, port) of each broker, as Metadata lists them: a node's worker K is
        broker node.id + 1000 K on port + K (pybroker.node.worker)."""
        return [(self.node_id + WORKER_ID_STRIDE * k, self.port + k)
                for k in range(len(self.dirs))]

    def log_dirs(self) -> list[Path]:
        """The log dir of each broker, worker K's K-th (`BrokerProcess.log_dirs`)."""
        return list(self.dirs)

    def partition_dir(self, partition: str) -> Path:
        """The dir of `partition` (`topic-N`) in whichever broker's log dir holds it."""
        found = [d / partition for d in self.dirs if (d / partition).is_dir()]
        if len(found) != 1:
            raise FileNotFoundError(f"{partition} is in {len(found)} of {self.dirs}")
        return found[0]

    def __getattr__(self, name: str) -> Any:
        if name in _IN_PROCESS_ONLY:
            raise _needs_the_mark(f"`{name}`")
        raise AttributeError(name)


def _node_listeners(config_overrides: dict[str, Any], log_dir: Path, cores: int
                    ) -> tuple[dict[str, str], dict[str, int], int | None]:
    """A node's listeners: each of the test's port-0 listeners (the kit's default is one,
    PLAINTEXT) on a block of `cores` free ports, worker K on port + K, as the node plans them
    (pybroker.node.worker): a port-0 listener would give each worker an ephemeral port,
    which neither the test nor a restart could find. The overrides to start it with, the
    first worker's port of each listener, and its HTTP port."""
    config = broker_config(log_dir, **config_overrides)
    listeners: list[Listener] = list(config.listeners)
    http: list[Listener] = list(config.http_listeners)
    base = free_port_block("127.0.0.1", cores * (len(listeners) + len(http)))
    blocks = iter(range(base, base + cores * (len(listeners) + len(http)), cores))
    listeners = [item if item.port else item._replace(port=next(blocks)) for item in listeners]
    http = [item if item.port else item._replace(port=next(blocks)) for item in http]
    overrides = {"listeners": ",".join(item.url for item in listeners)}
    if http:
        overrides["http_listeners"] = ",".join(
            "http://" + item.url.partition("://")[2] for item in http)
    return (overrides, {item.name: item.port for item in listeners},
            http[0].port if http else None)


def _cores(overrides: dict[str, Any]) -> int:
    """The brokers a test's broker runs: its num_cores, else the kit's (PYBROKER_NUM_CORES);
    a test about one broker pins num_cores="1" and says why."""
    given = overrides.get("num_cores", overrides.get("num.cores"))
    return int(given) if given is not None else num_cores_default()


@contextmanager
def serving_broker(log_dir: Path, **overrides: Any) -> Iterator[Any]:
    """The test's broker, on `log_dir`, with `overrides` (config keys, `_` for `.`): for a
    test marked in_process (tests/in_process.py) the thread broker itself (`ServerInfo`),
    for any other integration test a `WireBroker`, a node of PYBROKER_NUM_CORES brokers when
    that is above 1; outside the integration tier (the fast tier's single brokers) the
    thread broker."""
    if not in_process.over_the_wire():
        with kit_broker_in_thread(log_dir, **overrides) as info:
            yield info
        return
    cores = _cores(overrides)
    if cores == 1:
        with kit_broker_in_thread(log_dir, **overrides) as info:
            yield WireBroker(info.host, info.port, dict(info.ports), info.http_port, log_dir,
                             None, [log_dir], info.broker.node_id)
        return
    given = {k.replace(".", "_"): v for k, v in overrides.items()}
    node, ports, http_port = _node_listeners(given, log_dir, cores)
    proc = BrokerProcess(log_dir, **{**given, **node}).start()
    try:
        yield WireBroker(proc.host, proc.port, ports, http_port, log_dir, proc,
                         proc.log_dirs(), broker_config(log_dir, **given).node_id)
    finally:
        if proc.proc is not None and proc.proc.poll() is None:
            proc.stop()


@contextmanager
def broker_in_thread(log_dir: Path, hooks: RequestHooks | bool = False,
                     clock: Clock | None = None, **overrides: Any) -> Iterator[ServerInfo]:
    """pybroker.testing's thread broker, for a test that holds it in this process and says
    why (`in_process` mark): with request hooks or a clock of its own, a test has no other."""
    if in_process.over_the_wire():
        raise _needs_the_mark("broker_in_thread")
    with kit_broker_in_thread(log_dir, hooks=hooks, clock=clock, **overrides) as info:
        yield info


def force_a_lost_join_round(control: Any, topic: str) -> None:
    """Request hooks, through `control` (a `RequestHooks`' or a kit Broker's), that force the
    kafka-python 3.0.12 defect a kafka-python group consumer with short polls meets
    (docs/TESTING.md, the `test_groups.py` row of the flaky tests): its first Metadata naming
    `topic` comes a second late, so its first join, as leader, assigns nothing ("No
    partition metadata"); the metadata then starts a second round, whose SyncGroup (and
    every later one) is held 0.5 s, past a 200 ms poll, and kafka-python drops a round that
    completes after the poll waiting for it gave up."""
    from protocol.api_keys import ApiKey
    from pybroker.testing import DELAY, HookRequest

    def late_metadata(req: HookRequest) -> DELAY | None:
        return DELAY(1.0) if req.client_id.startswith("kafka-python") and \
            any(t.name == topic for t in req.body.topics or []) else None

    def slow_second_sync(req: HookRequest) -> DELAY | None:
        return DELAY(0.5) if req.client_id.startswith("kafka-python") and \
            req.body.generation_id >= 2 else None

    control(ApiKey.METADATA, late_metadata, times=1)
    control(ApiKey.SYNC_GROUP, slow_second_sync, times=None)


# pybroker.testing.Broker's keywords that are not broker config.
_BROKER_KEYWORDS = frozenset({"keep", "log_dir", "log_lines"})


class Broker(KitBroker):
    """pybroker.testing.Broker at the suite's setting: in an integration test not marked
    in_process (tests/in_process.py), `process` left out means a node of PYBROKER_NUM_CORES
    brokers when that is above 1, and the in-process verbs (`server_info`, `control`,
    `compact`, ...) are refused at every setting, so that a test relying on them says so."""

    def __init__(self, process: bool | None = None, **kwargs: Any) -> None:
        self.wire_only = in_process.over_the_wire()
        cores = _cores(kwargs)
        if process is None:
            process = self.wire_only and cores > 1
        # A node's listeners on blocks of ports, as serving_broker's: its first worker's HTTP
        # port is then known (each worker logs its own, in no set order).
        self._node_http_port: int | None = None
        if process and cores > 1:
            config = {k: v for k, v in kwargs.items() if k not in _BROKER_KEYWORDS}
            node, _, self._node_http_port = _node_listeners(config, Path(tempfile.gettempdir()),
                                                            cores)
            kwargs.update(node)
        super().__init__(process, **kwargs)

    @property
    def http_port(self) -> int | None:
        if self._node_http_port is not None and self.running:
            return self._node_http_port
        return super().http_port

    @property
    def server_info(self) -> ServerInfo:
        if self.wire_only:
            raise _needs_the_mark("`server_info`")
        return super().server_info

    def create_topic(self, name: str, partitions: int = 1,
                     config: Any = None) -> None:
        """Over the wire when the test holds no in-process broker (the kit's thread mode would
        use the broker's topic admin)."""
        if not self.wire_only or self.process:
            return super().create_topic(name, partitions, config)
        configs = {k: ("true" if v else "false") if isinstance(v, bool) else str(v)
                   for k, v in (config or {}).items()}
        on_a_thread(lambda: trio.run(create_topic_over_wire, self.bootstrap, name, partitions,
                                     configs))
