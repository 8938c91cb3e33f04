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
from pybroker.connection import serve_connection
from pybroker.open_files import raise_open_files_limit

log = logging.getLogger(__name__)


@dataclass
class ServerInfo:
    broker: Broker
    host: str
    port: int

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"


async def serve(config, *, task_status=trio.TASK_STATUS_IGNORED) -> None:  # type: ignore[no-untyped-def]
    listener_spec = config.broker_listeners[0]
    host, port = listener_spec.host, listener_spec.port
    raise_open_files_limit()  # before the logs: their descriptor cache is sized from it
    # Shielded: a cancel (SIGTERM) while the logs load still gets the broker closed below,
    # flushed and marked cleanly shut down, instead of dropping it half-open.
    with trio.CancelScope(shield=True):
        broker = await trio.to_thread.run_sync(Broker, config)
    try:
        listeners = await trio.open_tcp_listeners(port, host=host or None,
                                                  backlog=config.socket_listen_backlog_size)
        if config.socket_receive_buffer_bytes != -1:
            # On the listening socket, as Kafka does: accepted sockets inherit it, and it must
            # be set before the handshake to shape the window the connection starts with.
            for listener in listeners:
                listener.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF,
                                           config.socket_receive_buffer_bytes)
        bound_port = listeners[0].socket.getsockname()[1]
        advertised = config.advertised_listeners[0]
        broker.metadata.set_endpoint(advertised.host or host or "localhost",
                                     advertised.port or bound_port)
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.run_background)
            log.info("pybroker node %d listening on %s:%d (cluster id %s)",
                     broker.node_id, host, bound_port, broker.metadata.image.cluster_id)
            task_status.started(ServerInfo(broker, host or "127.0.0.1", bound_port))
            await serve_listeners_draining(partial(serve_connection, broker), listeners,
                                           handler_nursery=nursery)
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(broker.close)
            log.info("pybroker node %d shut down cleanly", broker.node_id)
