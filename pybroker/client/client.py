"""`KafkaClient`: bootstrap, one connection per broker, metadata, and routing.

The client is the network layer the producer, consumer and admin helpers share: it connects to
a bootstrap address, learns the brokers and the topics it is asked about from Metadata, keeps
one `BrokerConnection` per broker (reusing the bootstrap connection for the broker it turns out
to be), and routes: to a partition's leader, to a group's coordinator, to the controller, or to
any broker. Connection reader tasks live in the client's nursery, so `open_client` is an async
context manager and nothing outlives it.

Failures are reported, not hidden: an unreachable bootstrap list raises KafkaConnectionError
with one line naming what was tried; a partition without a leader or an unknown topic raises
KafkaError with Kafka's code. Retrying after a metadata refresh is offered (`retrying`) for the
callers that want it, with a deadline rather than a count.
"""
from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence, TypeVar

import trio
from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError
from pybroker.client.cluster import BrokerNode, ClusterMetadata, TopicMetadata, ZERO_UUID
from pybroker.client.connection import BrokerConnection
from pybroker.client.errors import KafkaConnectionError, KafkaTimeoutError
from pybroker.client.security import ClientSecurity

__all__ = ["KafkaClient", "open_client", "parse_bootstrap", "collapse_exception_group"]

T = TypeVar("T")
DEFAULT_PORT = 9092
_RETRY_BACKOFF = 0.1
# Codes after which a fresh look at metadata (or the coordinator) may succeed.
REFRESH_CODES = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_CONTROLLER, ErrorCode.REPLICA_NOT_AVAILABLE,
})


def parse_bootstrap(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """`host:port[,host:port...]` (or a list of them) as (host, port) pairs.

    ValueError with a readable message for an entry without a usable port, as Kafka's tools
    refuse them before connecting.
    """
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out: list[tuple[str, int]] = []
    for item in (s.strip() for s in items):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host:
            raise ValueError(f"Invalid url in bootstrap.servers: {item} (expected host:port)")
        host = host.strip("[]")  # [::1]:9092
        try:
            number = int(port)
        except ValueError:
            raise ValueError(f"Invalid port in bootstrap.servers: {item}") from None
        if not 0 < number < 65536:
            raise ValueError(f"Invalid port in bootstrap.servers: {item}")
        out.append((host, number))
    if not out:
        raise ValueError("No resolvable bootstrap urls given in bootstrap.servers")
    return out


def collapse_exception_group(exc: BaseException) -> BaseException:
    """The one exception inside (nested) single-member exception groups, else `exc`.

    trio nurseries wrap whatever escapes them in an ExceptionGroup; a caller of the client
    wants the KafkaError or KafkaConnectionError that actually happened.
    """
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


@asynccontextmanager
async def open_client(bootstrap_servers: str | Sequence[str], **kwargs: Any
                      ) -> AsyncIterator["KafkaClient"]:
    """A connected KafkaClient for the duration of the block; see KafkaClient for options."""
    try:
        async with trio.open_nursery() as nursery:
            client = KafkaClient(bootstrap_servers, nursery=nursery, **kwargs)
            try:
                await client.bootstrap()
                yield client
            finally:
                await client.aclose()
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        inner = collapse_exception_group(group)
        if inner is group:
            raise
        raise inner from None


class KafkaClient:
    """Connections, metadata and routing for one cluster.

    `request_timeout` bounds every request, `connect_timeout` every connection attempt;
    `client_id` goes into every request header (brokers log it, groups report it).
    `on_unreachable` is told, in one line, when a broker cannot be reached after the client
    had been connected: once per outage (the first failed attempt), not once per retry, and
    again only after some connection has succeeded since. Callers that retry through an
    outage (a console consumer) would otherwise wait in silence; the first bootstrap is not
    reported, since its failure is raised. `security` (TLS, SASL) applies to every
    connection; see pybroker.client.security.client_security for Kafka's properties.
    """

    def __init__(self, bootstrap_servers: str | Sequence[str], *, nursery: trio.Nursery,
                 client_id: str = "pybroker-client", request_timeout: float = 30.0,
                 connect_timeout: float = 10.0,
                 on_unreachable: Callable[[str], None] | None = None,
                 security: ClientSecurity | None = None) -> None:
        self.bootstrap_servers = parse_bootstrap(bootstrap_servers)
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.connect_timeout = min(connect_timeout, request_timeout)
        self._nursery = nursery
        self._bootstrap_conn: BrokerConnection | None = None
        self._connections: dict[int, BrokerConnection] = {}
        self._connect_locks: dict[int, trio.Lock] = {}
        self.brokers: dict[int, BrokerNode] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.controller_id = -1
        self.cluster_id: str | None = None
        self._on_unreachable = on_unreachable
        self.security = security
        self._connected_once = False
        self._in_outage = False

    @property
    def nursery(self) -> trio.Nursery:
        """The client's nursery, for background tasks that must not outlive it."""
        return self._nursery

    # -- connections ---------------------------------------------------------------------------

    async def bootstrap(self) -> None:
        """Connect to the first reachable bootstrap address and learn the brokers."""
        failures = []
        for host, port in self.bootstrap_servers:
            try:
                conn = await self._open(host, port, -1)
            except KafkaConnectionError as exc:
                failures.append(str(exc))
                continue
            self._bootstrap_conn = conn
            await self.refresh_metadata([])
            return
        if len(failures) == 1:
            raise KafkaConnectionError(failures[0])
        raise KafkaConnectionError("could not connect to any bootstrap server: "
                                   + "; ".join(failures))

    async def _open(self, host: str, port: int, node_id: int) -> BrokerConnection:
        try:
            conn = await BrokerConnection.open(
                host, port, nursery=self._nursery, node_id=node_id, client_id=self.client_id,
                connect_timeout=self.connect_timeout, request_timeout=self.request_timeout,
                security=self.security)
        except KafkaConnectionError:
            if self._connected_once and not self._in_outage and self._on_unreachable:
                self._in_outage = True
                # Kafka's NetworkClient says it in these words.
                self._on_unreachable(f"Connection to node {node_id} ({host}:{port}) could not "
                                     "be established. Broker may not be available.")
            raise
        self._connected_once, self._in_outage = True, False
        return conn

    async def aclose(self) -> None:
        conns = {id(c): c for c in self._connections.values()}
        if self._bootstrap_conn is not None:
            conns[id(self._bootstrap_conn)] = self._bootstrap_conn
        for conn in conns.values():
            await conn.aclose()
        self._connections.clear()
        self._bootstrap_conn = None

    async def connection(self, node_id: int) -> BrokerConnection:
        """The open connection to broker `node_id`, connecting (once) if needed."""
        conn = self._connections.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        lock = self._connect_locks.setdefault(node_id, trio.Lock())
        async with lock:
            conn = self._connections.get(node_id)
            if conn is not None and not conn.closed:
                return conn
            node = self.brokers.get(node_id)
            if node is None:
                await self.refresh_metadata([])
                node = self.brokers.get(node_id)
                if node is None:
                    raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE,
                                     f"broker {node_id} is not in the cluster metadata")
            boot = self._bootstrap_conn
            if (boot is not None and not boot.closed
                    and (boot.host, boot.port) == (node.host, node.port)):
                boot.node_id = node_id
                conn = boot
            else:
                conn = await self._open(node.host, node.port, node_id)
            self._connections[node_id] = conn
            return conn

    async def open_connection(self, node: BrokerNode) -> BrokerConnection:
        """A new connection of the caller's own, not shared and not cached (the caller closes
        it): for traffic that must not queue behind others' requests, such as a group
        member's JoinGroup, which the coordinator holds until the rebalance completes."""
        self.brokers.setdefault(node.node_id, node)
        return await self._open(node.host, node.port, node.node_id)

    async def connection_to(self, node: BrokerNode) -> BrokerConnection:
        """A connection to a node named outside the metadata (FindCoordinator answers)."""
        if node.node_id not in self.brokers:
            self.brokers[node.node_id] = node
        return await self.connection(node.node_id)

    async def any_connection(self) -> BrokerConnection:
        """Some live connection: the bootstrap one, another open one, or a new one."""
        boot = self._bootstrap_conn
        if boot is not None and not boot.closed:
            return boot
        for conn in self._connections.values():
            if not conn.closed:
                return conn
        for node_id in list(self.brokers):
            try:
                return await self.connection(node_id)
            except KafkaConnectionError:
                continue
        await self.bootstrap()
        assert self._bootstrap_conn is not None
        return self._bootstrap_conn

    async def request(self, api_key: int, body: Mapping[str, Any], *,
                      node_id: int | None = None, **kwargs: Any) -> Container:
        """One request to broker `node_id` (or any broker); see BrokerConnection.request."""
        conn = await (self.any_connection() if node_id is None else self.connection(node_id))
        result = await conn.request(api_key, body, **kwargs)
        assert result is not None
        return result

    async def supports(self, api_key: int) -> bool:
        return (await self.any_connection()).supports(api_key)

    # -- metadata ------------------------------------------------------------------------------

    async def refresh_metadata(self, topics: Iterable[str] | None = None, *,
                               allow_auto_create: bool = False) -> ClusterMetadata:
        """Ask for `topics` (None: every topic, []: brokers only) and merge what comes back."""
        conn = await self.any_connection()
        version = conn.pick_version(ApiKey.METADATA)
        names = None if topics is None else list(topics)
        wanted: list[dict[str, Any]] | None
        if names is None:
            wanted = [] if version == 0 else None
        else:
            if version == 0 and not names:
                names = ["__pybroker_no_such_topic__"]  # v0 reads [] as "all topics"
            wanted = [{"name": n, "topic_id": ZERO_UUID} for n in names]
        body = {"topics": wanted, "allow_auto_topic_creation": allow_auto_create,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False}
        resp = await conn.request(ApiKey.METADATA, body, version=version)
        meta = ClusterMetadata.from_response(resp)
        self.brokers = dict(meta.brokers)
        self.controller_id = meta.controller_id
        self.cluster_id = meta.cluster_id
        for name, topic in meta.topics.items():
            if topic.error == ErrorCode.NONE:
                self.topics[name] = topic
            else:
                self.topics.pop(name, None)
        if names is None:  # a full listing also forgets deleted topics
            self.topics = {n: t for n, t in meta.topics.items() if t.error == ErrorCode.NONE}
        return meta

    async def topic(self, name: str, *, refresh: bool = False,
                    allow_auto_create: bool = False) -> TopicMetadata:
        """The topic's metadata; KafkaError(UNKNOWN_TOPIC_OR_PARTITION, ...) when it has none."""
        if refresh or name not in self.topics:
            meta = await self.refresh_metadata([name], allow_auto_create=allow_auto_create)
            found = meta.topics.get(name)
            if found is not None and found.error != ErrorCode.NONE:
                raise KafkaError(found.error, _topic_error_text(name, found.error))
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             _topic_error_text(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        return topic

    async def leader(self, topic: str, partition: int, *, refresh: bool = False) -> int:
        """The node id leading the partition; KafkaError when there is none (yet)."""
        meta = await self.topic(topic, refresh=refresh)
        part = meta.partitions.get(partition)
        if part is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"Partition {topic}-{partition} does not exist.")
        if part.leader < 0:
            raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE,
                             f"Partition {topic}-{partition} has no leader.")
        return part.leader

    async def controller(self) -> BrokerConnection:
        """The controller if the cluster names one (where Kafka wants CreateTopics), else any."""
        if self.controller_id >= 0 and self.controller_id in self.brokers:
            try:
                return await self.connection(self.controller_id)
            except KafkaConnectionError:
                pass
        return await self.any_connection()

    async def find_coordinator(self, key: str, *, key_type: int = 0,
                               timeout: float | None = None) -> BrokerNode:
        """The coordinator of group (key_type 0) or transactional id (1) `key`.

        Retries while the broker says the coordinator is loading or not available (a fresh
        `__consumer_offsets` topic is created on first lookup), up to `timeout`.
        """
        async def attempt() -> BrokerNode:
            conn = await self.any_connection()
            body = {"key": key, "key_type": key_type, "coordinator_keys": [key]}
            resp = await conn.request(ApiKey.FIND_COORDINATOR, body)
            if resp.coordinators:
                c = resp.coordinators[0]
                code, message, node = c.error_code, c.error_message, (c.node_id, c.host, c.port)
            else:
                code, message = resp.error_code, resp.error_message
                node = (resp.node_id, resp.host, resp.port)
            if code:
                raise KafkaError(code, message)
            broker = BrokerNode(*node)
            self.brokers.setdefault(broker.node_id, broker)
            return broker

        return await self.retrying(attempt, timeout=timeout, refresh=False)

    async def retrying(self, attempt: Callable[[], Awaitable[T]], *,
                       timeout: float | None = None, refresh: bool = True,
                       codes: frozenset[ErrorCode] = REFRESH_CODES,
                       any_retriable: bool = True) -> T:
        """Run `attempt` until it succeeds, retrying on `codes` (and, with `any_retriable`,
        every code Kafka marks retriable) and on lost connections.

        Between tries the metadata is refreshed (`refresh`) after a short backoff. When the
        deadline passes the last error is raised as it was, so the caller reports the real
        reason rather than "timed out".
        """
        deadline = trio.current_time() + (self.request_timeout if timeout is None else timeout)
        backoff = _RETRY_BACKOFF
        while True:
            try:
                return await attempt()
            except KafkaError as exc:
                if exc.code not in codes and not (any_retriable and exc.retriable):
                    raise
                last: Exception = exc
            except KafkaConnectionError as exc:
                last = exc
            if trio.current_time() + backoff >= deadline:
                raise last
            await trio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)
            if refresh:
                try:
                    await self.refresh_metadata(list(self.topics))
                except (KafkaConnectionError, KafkaTimeoutError):
                    pass


def _topic_error_text(name: str, code: ErrorCode) -> str:
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return f"Topic '{name}' does not exist."
    if code == ErrorCode.INVALID_TOPIC_EXCEPTION:
        return f"Topic name '{name}' is not valid."
    return f"{code.message} (topic '{name}')"
