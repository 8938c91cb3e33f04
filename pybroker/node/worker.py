"""The brokers of one node: what worker K of a `num.cores` = N node is, and how it is started.

A Python process serves with one core (one trio loop, one GIL), so a node with N cores runs N
ordinary brokers, one process each, as one cluster (docs/DESIGN.md, "One node, every core",
design b). Clients see N brokers and route themselves by Metadata, as in any cluster. Worker K
is `python -m pybroker` with the node's own configuration (file and --override, as given) and a
few keys derived from it (`WorkerPlan.overrides`):

- `node.id` (and `broker.id`): node.id for K = 0, node.id + 1000 K above; 1000 is Kafka's
  `reserved.broker.max.id`, which configured ids stay under, so no two nodes' workers meet as
  long as each node's own id does;
- every listener's port + K (`listeners`, `advertised.listeners` when set, `http.listeners`;
  port 0 stays 0: each picks a free one);
- `log.dirs`, each suffixed `-K` for K > 0, so worker 0 keeps the data of the node's single
  broker of before: going from 1 core to N keeps its id, its partitions and its ports;
- `broker.rack` defaulting to the host name, so that rack-aware assignment puts the replicas of
  a partition on different nodes (rack = node), never on two workers of one machine;
- `num.cores=1`: a worker is one broker, on today's single-process path.

`worker_command` and `die_with_parent` start a worker so that it cannot outlive the
supervisor: PR_SET_PDEATHSIG asks the kernel to SIGKILL it when the thread that forked it
exits, which covers a kill -9 of the supervisor (nothing of the supervisor runs then).
"""
from __future__ import annotations

import ctypes
import os
import re
import signal
import socket
import sys
from dataclasses import dataclass
from typing import Callable

from pybroker.config import BrokerConfig, ConfigError, Listener

# Kafka's reserved.broker.max.id: configured ids stay at or under it, generated ones above.
WORKER_ID_STRIDE = 1000
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# In a node's first log dir: the number of brokers it last ran (pybroker.node.supervisor).
NODE_FILE = "pybroker-node.properties"
# Set in a worker's environment to its index: it is one broker of a node, not a node.
WORKER_ENV = "PYBROKER_NODE_WORKER"
# A worker's exit code when every one of its log dirs has failed (pybroker.runtime.halt):
# sysexits.h's EX_IOERR. A single broker exits 1 then, as Kafka's `Exit.halt(1)`; a worker
# says it apart from a crash because its supervisor must not restart it onto the same failed
# disks (pybroker.node.supervisor stops the node instead).
LOG_DIRS_FAILED_EXIT = 74
# What a stopping worker logs ("broker <id> ...") once its controlled shutdown is over, or at
# once where controlled.shutdown.enable=false skips it, before it closes its logs: the
# supervisor's cue to stop the next worker (pybroker.node.supervisor). It names no controlled
# shutdown, which may not have happened (Kafka says nothing of one it skips).
HANDED_OVER_LINE = "stops serving and closes its logs"
# A broker's "listening on HOST:PORT" line, read by the supervisor and the test kit; HOST is
# what its listener names: an address, a host name (`SASL_SSL://localhost:9093`, the README's
# secure broker) or a bracketed IPv6 one. Groups: host, port.
LISTENING = re.compile(r"listening on (\[[^\]]*\]|[^\s:\[]*):(\d+)")
_ADVERTISED_KEYS = frozenset({"advertised.listeners", "advertised.host.name", "advertised.port"})


def cores_to_use(config: BrokerConfig) -> int:
    """num.cores, with -1 read as every CPU this process may run on (its affinity mask, which
    taskset and a container's cpuset narrow; os.cpu_count() would count the machine's)."""
    return config.num_cores if config.num_cores != -1 else len(os.sched_getaffinity(0))


@dataclass(frozen=True)
class WorkerPlan:
    """Worker K of the node: its broker id, listeners, log dirs and rack."""

    index: int
    node_id: int
    listeners: tuple[Listener, ...]
    advertised_listeners: tuple[Listener, ...] | None  # None: not configured (= listeners)
    http_listeners: tuple[Listener, ...]
    log_dirs: tuple[str, ...]
    rack: str

    def overrides(self) -> dict[str, str]:
        """The keys worker K gets on top of the node's configuration; they come last on its
        command line, so they win over the node's file and --override."""
        out = {"num.cores": "1", "node.id": str(self.node_id), "broker.id": str(self.node_id),
               "listeners": ",".join(item.url for item in self.listeners),
               "log.dirs": ",".join(self.log_dirs), "broker.rack": self.rack}
        if self.advertised_listeners is not None:
            out["advertised.listeners"] = ",".join(a.url for a in self.advertised_listeners)
        if self.http_listeners:
            out["http.listeners"] = ",".join(
                f"http://{item.url.partition('://')[2]}" for item in self.http_listeners)
        return out

    def describe(self) -> str:
        """The supervisor's one line about this worker at start."""
        return (f"worker {self.index}: broker {self.node_id}, listeners "
                f"{','.join(item.url for item in self.listeners)}, log.dirs "
                f"{','.join(self.log_dirs)}, broker.rack {self.rack}")


def _shifted(listeners: tuple[Listener, ...], by: int, key: str) -> tuple[Listener, ...]:
    out = []
    for item in listeners:
        port = item.port + by if item.port else 0
        if port > 65535:
            raise ConfigError(key, item.url, "", message=(
                f"num.cores: worker {by} would listen on port {port} ({item.url} + {by}), "
                "past 65535; lower the port or num.cores"))
        out.append(item._replace(port=port))
    return tuple(out)


def worker_log_dir(log_dir: str, k: int) -> str:
    """Worker K's copy of one of the node's log dirs (K > 0; worker 0 keeps the node's own):
    the dir's path suffixed -K."""
    return f"{log_dir.rstrip('/') or '/'}-{k}"


def plan_workers(config: BrokerConfig, cores: int, host_name: str | None = None
                 ) -> list[WorkerPlan]:
    """The node's `cores` workers. ConfigError (one line) when two of them would take the same
    port: with listeners on 9092 and 9093, worker 1's first listener is worker 0's second."""
    rack = config.broker_rack or host_name or socket.gethostname()
    # Configured (advertised.listeners, or Kafka 0.8's advertised.host.name / .port): each
    # worker advertises it + K. Unset: each advertises its own listeners, as a broker does.
    advertised = (config.advertised_listeners if _ADVERTISED_KEYS & config.explicit
                  else None)
    plans = []
    for k in range(cores):
        plans.append(WorkerPlan(
            k, config.node_id + WORKER_ID_STRIDE * k,
            _shifted(config.listeners, k, "listeners"),
            None if advertised is None else _shifted(advertised, k, "advertised.listeners"),
            _shifted(config.http_listeners, k, "http.listeners"),
            tuple(config.log_dirs) if k == 0 else tuple(
                worker_log_dir(d, k) for d in config.log_dirs), rack))
    taken: dict[int, str] = {}
    for plan in plans:
        for item in plan.listeners + plan.http_listeners:
            if item.port and item.port in taken:
                raise ConfigError("listeners", item.url, "", message=(
                    f"num.cores={cores}: worker {plan.index}'s {item.url} takes the port of "
                    f"{taken[item.port]} (worker K listens on every port + K): space the "
                    "listeners' ports at least num.cores apart"))
            if item.port:
                taken[item.port] = f"worker {plan.index}'s {item.url}"
    return plans


def worker_command(config_file: str | None, overrides: list[str], plan: WorkerPlan
                   ) -> list[str]:
    """`python -m pybroker` for worker K: the node's file (or --defaults) and --override
    items as given, then the worker's own keys."""
    args = [sys.executable, "-m", "pybroker"]
    args += [config_file] if config_file is not None else ["--defaults"]
    for item in overrides:
        args += ["--override", item]
    for key, value in plan.overrides().items():
        args += ["--override", f"{key}={value}"]
    return args


def die_with_parent() -> Callable[[], None]:
    """A preexec_fn for a worker: the kernel SIGKILLs it when its parent dies (a kill -9 of
    the supervisor included), so a node is never left half-alive. prctl is looked up here,
    in the parent: the child only calls it (no dlopen between fork and exec). The parent may
    have died before prctl took effect; the child then sees another parent and exits.

    PR_SET_PDEATHSIG fires when the forking THREAD exits, so call this, and spawn workers,
    from the supervisor's main thread only."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def preexec() -> None:
        if prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0 or os.getppid() != parent:
            os._exit(127)
    return preexec
