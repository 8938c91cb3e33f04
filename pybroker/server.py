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
from dataclasses import dataclass
from functools import partial

import trio

from pybroker.accept import serve_listeners_draining
from pybroker.broker import Broker
from pybroker.config import ConfigError
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

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"


async def _bind(config) -> list[trio.SocketListener]:  # type: ignore[no-untyped-def]
    """The listening sockets, or an OSError naming the listener that could not be bound."""
    spec = config.broker_listeners[0]
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


def _refuse_what_cannot_run(config) -> None:  # type: ignore[no-untyped-def]
    """A ZooKeeper-coordinated cluster is not built yet: three brokers started from
    config/cluster/*.properties would each think they are alone (RF=3 topics fail, nothing is
    replicated). Refuse, in one line, rather than pretend."""
    if config.zookeeper_connect:
        raise ConfigError("zookeeper.connect", config.zookeeper_connect, "", message=(
            f"zookeeper.connect={config.zookeeper_connect}: several brokers coordinated "
            "through ZooKeeper are not supported yet (replication is not built); remove "
            "zookeeper.connect to run a single broker"))


async def serve(config, *, task_status=trio.TASK_STATUS_IGNORED) -> None:  # type: ignore[no-untyped-def]
    _refuse_what_cannot_run(config)
    raise_open_files_limit()  # before the logs: their descriptor cache is sized from it
    host = config.broker_listeners[0].host
    # The port first: a start that fails because it is taken must not have opened (and
    # recovered, and marked) any log dir. Connections that arrive while the logs load wait
    # in the backlog.
    listeners = await _bind(config)
    try:
        # Shielded: a cancel (SIGTERM) while the logs load still gets the broker closed below,
        # flushed and marked cleanly shut down, instead of dropping it half-open. Building it
        # takes each log dir's lock first (pybroker.storage.log_dir_lock).
        with trio.CancelScope(shield=True):
            broker = await trio.to_thread.run_sync(Broker, config)
    except BaseException:
        for listener in listeners:
            await trio.aclose_forcefully(listener)
        raise
    try:
        bound_port = listeners[0].socket.getsockname()[1]
        advertised = config.advertised_listeners[0]
        broker.metadata.set_endpoint(advertised.host or host or "localhost",
                                     advertised.port or bound_port)
        # The connection layer is the server's: the broker never sees sockets.
        idle = IdleConnections(config.connections_max_idle_ms)
        limits = ConnectionLimits(config.max_connections, config.max_connections_per_ip)
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.run_background)
            nursery.start_soon(idle.reap)
            log.info("pybroker node %d listening on %s:%d (cluster id %s)",
                     broker.node_id, host, bound_port, broker.metadata.image.cluster_id)
            task_status.started(ServerInfo(broker, host or "127.0.0.1", bound_port,
                                           trio.lowlevel.current_trio_token()))
            await serve_listeners_draining(
                partial(serve_connection, broker.services, idle=idle, limits=limits), listeners,
                handler_nursery=nursery)
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(broker.close)
            log.info("pybroker node %d shut down cleanly", broker.node_id)
