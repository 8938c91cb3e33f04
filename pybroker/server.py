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
from typing import TYPE_CHECKING, Any

import trio

from pybroker.network.accept import serve_listeners_draining
from pybroker.broker import Broker
from pybroker.config import BrokerConfig, ConfigError
from pybroker.config.dynamic import CONNECTION_CONFIGS, TLS_CONFIGS, split_listener_key
from pybroker.cluster.dynamic_broker_config import Reconfigurable

from pybroker.network.connection import serve_connection
from pybroker.network.connection_limits import ConnectionLimits
from pybroker.network.idle import IdleConnections
from pybroker.network.request_hooks import RequestHooks
from pybroker.runtime.open_files import raise_open_files_limit
from pybroker.security.tls_context import TlsListener, tls_listener

if TYPE_CHECKING:
    from pybroker.config import Listener
    from pybroker.ops.endpoints import OpsEndpoints
    from pybroker.runtime.clock import Clock

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
    # The bound port of each http.listeners entry, in order (none when it is empty).
    http_ports: list[int] = field(default_factory=list)
    # A test broker's request hooks, which every connection hands to dispatch (`serve`'s
    # `hooks`); None otherwise.
    hooks: RequestHooks | None = None

    @property
    def http_port(self) -> int | None:
        """The first HTTP listener's port (/healthz, /readyz, /metrics), if any."""
        return self.http_ports[0] if self.http_ports else None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"


async def _bind(config: BrokerConfig, spec: Listener) -> list[trio.SocketListener]:
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


async def _bind_all(config: BrokerConfig) -> dict[str, list[trio.SocketListener]]:
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


def _advertised(config: BrokerConfig, bound: dict[str, list[trio.SocketListener]]
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


async def _bind_http(config: BrokerConfig
                     ) -> list[tuple[Listener, list[trio.SocketListener]]]:
    """Every listener of http.listeners that can be bound, with its spec.

    The side door is optional, so an address that cannot be bound is a warning, not a failed
    start: Kafka's quickstart makes a second broker by copying server.properties and editing
    broker.id, port and log.dir, and that copy names the first broker's HTTP port too. The
    Kafka listeners, bound before, stay all or none."""
    bound: list[tuple[Listener, list[trio.SocketListener]]] = []
    for spec in config.http_listeners:
        try:
            bound.append((spec, await trio.open_tcp_listeners(spec.port,
                                                               host=spec.host or None)))
        except OSError as exc:
            log.warning("HTTP listener http://%s:%d cannot be bound: %s; this broker serves "
                        "no HTTP there (set http.listeners to a free port, or empty)",
                        spec.host, spec.port, exc.strerror or exc)
    return bound


def _tls_listeners(config: BrokerConfig) -> dict[str, TlsListener]:
    """Each SSL and SASL_SSL client listener's TLS context and principal rules, by listener
    name (on SASL_SSL the SASL principal replaces the certificate's once authenticated)."""
    return {spec.name: tls_listener(config, spec.name) for spec in config.broker_listeners
            if config.listener_security_protocol_map[spec.name] in ("SSL", "SASL_SSL")}


def _follow_dynamic_configs(broker: Broker, tls: dict[str, TlsListener],
                            limits: ConnectionLimits) -> None:
    """The connection layer's dynamic configs (KIP-226): a TLS listener's key material and
    settings (each new connection handshakes with the context as it is then: a rotated
    certificate without a restart), and the connection limits. A broker restarted with
    dynamic TLS configs stored serves with them from its first connection."""
    dynamic = broker.dynamic_config

    def rebuild_tls(old: BrokerConfig, new: BrokerConfig) -> None:
        tls.update(_tls_listeners(new))

    def check_tls(old: BrokerConfig, new: BrokerConfig) -> None:
        tls_names = set(_tls_listeners(new))  # ConfigError: a store that does not load
        for name in new.originals:
            listener, base = split_listener_key(name)
            if listener is not None and base.startswith("ssl.") and listener not in tls_names:
                raise ConfigError(name, new.originals[name], "", message=(
                    f"Listener {listener} is not an SSL or SASL_SSL listener of this broker"))

    def reconfigure_limits(old: BrokerConfig, new: BrokerConfig) -> None:
        limits.reconfigure(new.max_connections, new.max_connections_per_ip)

    if dynamic.current is not broker.config:
        try:
            rebuild_tls(broker.config, dynamic.current)
        except ConfigError as exc:
            log.error("stored dynamic TLS configs are ignored: %s", exc)
    dynamic.add(Reconfigurable("TLS listeners", TLS_CONFIGS.__contains__, rebuild_tls,
                               check_tls))
    dynamic.add(Reconfigurable("connection limits", CONNECTION_CONFIGS.__contains__,
                               reconfigure_limits))


async def serve(config: BrokerConfig, *, hooks: RequestHooks | None = None,
                zk_client_class: Any = None, clock: Clock | None = None,
                task_status: trio.TaskStatus[ServerInfo] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve until cancelled. `hooks` (pybroker.network.request_hooks.RequestHooks) makes a test
    broker: requests are recorded and may be failed, dropped or delayed; the connections
    hand them to dispatch, and `ServerInfo.hooks` to the test. `zk_client_class`:
    a kazoo-like client class for zookeeper.connect (the in-memory ZooKeeper of
    pybroker.testing's Cluster); kazoo's own by default. `clock` (pybroker.runtime.clock.Clock): the
    clock of the broker's timers, which a test advances; a fresh wall clock by default."""
    raise_open_files_limit()  # before the logs: their descriptor cache is sized from it
    # Key material is checked before anything is bound or opened: a bad key, file or password
    # is a start error naming the key, not a failure at every handshake.
    tls = _tls_listeners(config)
    # The ports first: a start that fails because one is taken must not have opened (and
    # recovered, and marked) any log dir. Connections that arrive while the logs load wait
    # in the backlog.
    bound = await _bind_all(config)
    try:
        http_specs = await _bind_http(config)
    except BaseException:
        await _close_all(bound)
        raise
    http_bound = [sockets for _, sockets in http_specs]
    if not http_bound:
        await _serve_broker(config, bound, None, [], tls, hooks=hooks,
                            zk_client_class=zk_client_class, clock=clock,
                            task_status=task_status)
        return
    # The side door's code (h11, the status page) is imported only when one is bound: a
    # broker without http.listeners starts without it (issue #15 §3, start time).
    from pybroker.ops.http_server import serve_http
    from pybroker.ops.endpoints import OpsEndpoints
    # The HTTP side door serves from now on, in a nursery of its own: /healthz answers and
    # /readyz says 503 while the logs recover.
    ops = OpsEndpoints()
    http_ports = [sockets[0].socket.getsockname()[1] for sockets in http_bound]
    async with trio.open_nursery() as side_door:
        for sockets in http_bound:
            side_door.start_soon(partial(
                serve_http, sockets, ops,
                head_timeout=config.http_request_timeout_ms / 1000))
        for (spec, _), port in zip(http_specs, http_ports):
            log.info("HTTP (/healthz, /readyz, /metrics) on http://%s:%d",
                     spec.host or "0.0.0.0", port)
        try:
            await _serve_broker(config, bound, ops, http_ports, tls, hooks=hooks,
                                zk_client_class=zk_client_class, clock=clock,
                                task_status=task_status)
        finally:
            side_door.cancel_scope.cancel()


async def _serve_broker(config: BrokerConfig, bound: dict[str, list[trio.SocketListener]],
                        ops: OpsEndpoints | None, http_ports: list[int],
                        tls: dict[str, TlsListener], *, hooks: RequestHooks | None,
                        zk_client_class: Any, clock: Clock | None,
                        task_status: trio.TaskStatus[ServerInfo]) -> None:
    first = config.broker_listeners[0]
    try:
        # Shielded: a cancel (SIGTERM) while the logs load still gets the broker closed below,
        # flushed and marked cleanly shut down, instead of dropping it half-open. Building it
        # takes each log dir's lock first (pybroker.storage.log_dir_lock).
        with trio.CancelScope(shield=True):
            broker = await trio.to_thread.run_sync(
                partial(Broker, config, zk_client_class=zk_client_class, clock=clock))
    except BaseException:
        await _close_all(bound)
        raise
    try:
        broker.metadata.set_endpoints(_advertised(config, bound))
        status = None
        if ops is not None:
            from pybroker.ops.status.page import StatusPage
            status = StatusPage(broker.node_id, broker.metadata, broker.replicas,
                                broker.groups, broker.services.stats,
                                sample_interval=config.http_status_sample_interval_ms / 1000)
            # The registry (prometheus_client, ~40 ms to import) is built at the first scrape.
            ops.broker_built(lambda: broker.metrics_registry, broker.registered, status)
        # The connection layer is the server's: the broker never sees sockets.
        idle = IdleConnections(config.connections_max_idle_ms)
        current = broker.dynamic_config.current
        limits = ConnectionLimits(current.max_connections, current.max_connections_per_ip)
        _follow_dynamic_configs(broker, tls, limits)
        ports = {name: sockets[0].socket.getsockname()[1] for name, sockets in bound.items()}
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.run_background)
            nursery.start_soon(idle.reap)
            if status is not None:  # the status page's charts: a few numbers every few seconds
                nursery.start_soon(status.run_sampler)
            others = "".join(f"; listener {spec.name} on {spec.host or '0.0.0.0'}:"
                             f"{ports[spec.name]}" for spec in config.broker_listeners[1:])
            log.info("pybroker node %d listening on %s:%d (cluster id %s)%s",
                     broker.node_id, first.host, ports[first.name],
                     broker.metadata.image.cluster_id, others)
            task_status.started(ServerInfo(broker, first.host or "127.0.0.1", ports[first.name],
                                           trio.lowlevel.current_trio_token(), ports,
                                           http_ports, hooks))
            for name, sockets in bound.items():
                # Each connection knows its listener: Metadata answers that listener's
                # endpoints (Kafka's rule).
                nursery.start_soon(partial(
                    serve_listeners_draining,
                    partial(serve_connection, broker.services, idle=idle, limits=limits,
                            listener=name, tls=tls, hooks=hooks),
                    sockets, handler_nursery=nursery))
            if ops is not None:
                ops.serving()
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(broker.close)
            log.info("pybroker node %d shut down cleanly", broker.node_id)
