"""Connections from this broker's coordinators to the other brokers: one per broker, opened on
first use on its inter-broker endpoint, secured as the inter-broker listener's client
(`pybroker.security.inter_broker`), and dropped on a failure so the next request opens a fresh one.

The transaction marker writer (WriteTxnMarkers to partition leaders) and the produce
verification (AddPartitionsToTxn verify-only to transaction coordinators) each keep their own
channels, as Kafka's marker channel manager and AddPartitionsToTxnManager each keep a network
client: a verification never waits behind a marker's acks=all write. The client's connection
code is imported only when a request first goes to another broker, so a single broker never
loads it (issue #15 §3).
"""
from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import trio

from pybroker.client.errors import KafkaConnectionError, KafkaTimeoutError

if TYPE_CHECKING:
    from pybroker.client.connection import BrokerConnection
    from pybroker.client.security import ClientSecurity

__all__ = ["BrokerChannels"]

log = logging.getLogger(__name__)


class BrokerChannels:
    def __init__(self, node_id: int, purpose: str,
                 endpoint_of: Callable[[int], tuple[str, int] | None],
                 security: ClientSecurity | None = None) -> None:
        """`purpose` names the connections' client id (`broker-<id>-<purpose>`), which the
        other broker's request log shows."""
        self.node_id = node_id
        self.client_id = f"broker-{node_id}-{purpose}"
        self.endpoint_of = endpoint_of
        self.security = security
        self._connections: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, trio.Lock] = defaultdict(trio.Lock)
        self._nursery: trio.Nursery | None = None

    async def request(self, node: int, api_key: int, body: Mapping[str, Any], *,
                      version: int | None = None) -> Any | None:
        """The response of `node` to one request, or None when it could not be had (no
        endpoint known, not running, the connection failed or timed out: logged, and the
        connection dropped). KafkaError(UNSUPPORTED_VERSION) when `node` does not serve it."""
        try:
            conn = await self._connection(node)
            if conn is None:
                return None
            return await conn.request(api_key, body, version=version)
        except (KafkaConnectionError, KafkaTimeoutError, OSError) as exc:
            log.info("%s: request %d to broker %d failed: %s", self.client_id, api_key, node,
                     exc)
            self._drop(node)
            return None

    async def _connection(self, node: int) -> BrokerConnection | None:
        conn = self._connections.get(node)
        if conn is not None and not conn.closed:
            return conn
        endpoint = self.endpoint_of(node)
        if endpoint is None or self._nursery is None:
            return None
        async with self._connecting[node]:
            conn = self._connections.get(node)
            if conn is not None and not conn.closed:
                return conn
            from pybroker.client.connection import BrokerConnection
            conn = await BrokerConnection.open(
                endpoint[0], endpoint[1], nursery=self._nursery, client_id=self.client_id,
                security=self.security)
            self._connections[node] = conn
            return conn

    def _drop(self, node: int) -> None:
        conn = self._connections.pop(node, None)
        if conn is not None and self._nursery is not None:
            self._nursery.start_soon(conn.aclose)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Holds the connections (their readers run here) until cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            self._connections.clear()
