"""`serve`: the broker as a trio task, and the public embedding point.

A program or a test runs a real broker in-process with
`info = await nursery.start(serve, config)`; `info.port` is the bound port (listen on port 0
for an ephemeral one). No process-global state: several brokers can run in one process.
Cancelling the task shuts the broker down gracefully: connections are dropped, logs flushed,
and the clean-shutdown marker written.
"""
from __future__ import annotations

import logging
import socket
from dataclasses import dataclass, field
from functools import partial

import trio

from pybroker.accept import serve_listeners_draining
from pybroker.broker import Broker

from pybroker.connection import serve_connection
from pybroker.connection_limits import ConnectionLimits
from pybroker.idle import IdleConnections
from pybroker.open_files import raise_open_files_limit

log = logging.getLogger(__name__)


@dataclass
class ServerInfo:
    broker: Broker
    host: str
    port: int
    # The serving loop's token: another thread runs code in it with trio.from_thread.
    token: trio.lowlevel.TrioToken | None = None
    # The bound port of every listener, by name (`port` is the first's).
    ports: dict[str, int] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"


async def _bind(config, spec) -> list[trio.SocketListener]:  # type: ignore[no-untyped-def]
    """One listener's sockets, or an OSError naming the listener that could not be bound."""
    try:
        listeners = await trio.open_tcp_listeners(spec.port, host=spec.host or None,
                                                  backlog=config.socket_listen_backlog_size)
    except OSError as exc:
        raise OSError(exc.errno, f"listener {spec.url} cannot be bound: "
                                 f"{exc.strerror or exc}") from None
    if config.socket_receive_buffer_bytes != -1:
        # On the listening socket, as Kafka does: accepted sockets inherit it, and it must
        # be set before the handshake to shape the window the connection starts with.
        for listener in listeners:
            listener.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF,
                                       config.socket_receive_buffer_bytes)
    return listeners


async def _bind_all(config) -> dict[str, list[trio.SocketListener]]:  # type: ignore[no-untyped-def]
    """Every client listener of `listeners`, by name; all or none."""
    bound: dict[str, list[trio.SocketListener]] = {}
    try:
        for spec in config.broker_listeners:
            bound[spec.name] = await _bind(config, spec)
    except BaseException:
        await _close_all(bound)
        raise
    return bound


async def _close_all(bound: dict[str, list[trio.SocketListener]]) -> None:
    for sockets in bound.values():
        for listener in sockets:
            await trio.aclose_forcefully(listener)


def _advertised(config, bound: dict[str, list[trio.SocketListener]]  # type: ignore[no-untyped-def]
                ) -> dict[str, tuple[str, int]]:
    """Each listener's advertised endpoint: advertised.listeners' entry of the same name, with
    the bound port for port 0 and the listener's host (else localhost) for an empty host."""
    advertised = {item.name: item for item in config.advertised_listeners}
    endpoints = {}
    for spec in config.broker_listeners:
        bound_port = bound[spec.name][0].socket.getsockname()[1]
        ad = advertised.get(spec.name, spec)
        endpoints[spec.name] = (ad.host or spec.host or "localhost", ad.port or bound_port)
    return endpoints


async def serve(config, *, hooks=None, zk_client_class=None,  # type: ignore[no-untyped-def]
                clock=None, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Serve until cancelled. `hooks` (pybroker.request_hooks.RequestHooks) makes a test
    broker: requests are recorded and may be failed, dropped or delayed. `zk_client_class`:
    a kazoo-like client class for zookeeper.connect (the in-memory ZooKeeper of
    pybroker.testing's Cluster); kazoo's own by default. `clock` (pybroker.clock.Clock): the
    clock of the broker's timers, which a test advances; a fresh wall clock by default."""
    raise_open_files_limit()  # before the logs: their descriptor cache is sized from it
    first = config.broker_listeners[0]
    # The ports first: a start that fails because one is taken must not have opened (and
    # recovered, and marked) any log dir. Connections that arrive while the logs load wait
    # in the backlog.
    bound = await _bind_all(config)
    try:
        # Shielded: a cancel (SIGTERM) while the logs load still gets the broker closed below,
        # flushed and marked cleanly shut down, instead of dropping it half-open. Building it
        # takes each log dir's lock first (pybroker.storage.log_dir_lock).
        with trio.CancelScope(shield=True):
            broker = await trio.to_thread.run_sync(
                partial(Broker, config, hooks, zk_client_class=zk_client_class,
                        clock=clock))
    except BaseException:
        await _close_all(bound)
        raise
    try:
        broker.metadata.set_endpoints(_advertised(config, bound))
        # The connection layer is the server's: the broker never sees sockets.
        idle = IdleConnections(config.connections_max_idle_ms)
        limits = ConnectionLimits(config.max_connections, config.max_connections_per_ip)
        ports = {name: sockets[0].socket.getsockname()[1] for name, sockets in bound.items()}
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.run_background)
            nursery.start_soon(idle.reap)
            others = "".join(f"; listener {spec.name} on {spec.host or '0.0.0.0'}:"
                             f"{ports[spec.name]}" for spec in config.broker_listeners[1:])
            log.info("pybroker node %d listening on %s:%d (cluster id %s)%s",
                     broker.node_id, first.host, ports[first.name],
                     broker.metadata.image.cluster_id, others)
            task_status.started(ServerInfo(broker, first.host or "127.0.0.1", ports[first.name],
                                           trio.lowlevel.current_trio_token(), ports))
            for name, sockets in bound.items():
                # Each connection knows its listener: Metadata answers that listener's
                # endpoints (Kafka's rule).
                nursery.start_soon(partial(
                    serve_listeners_draining,
                    partial(serve_connection, broker.services, idle=idle, limits=limits,
                            listener=name),
                    sockets, handler_nursery=nursery))
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(broker.close)
            log.info("pybroker node %d shut down cleanly", broker.node_id)
