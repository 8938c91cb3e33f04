"""Prototype (a) of docs/DESIGN.md "One node, every core": the shard boundary, measured.

A shard-per-core node shows a stock client ONE broker (one id, one port), while N processes
each own a share of the partitions and forward what is not theirs. This prototype builds that
face in front of prototype (b)'s N brokers (node.py): N router processes bind the same port
with SO_REUSEPORT (the kernel spreads connections over them), each answers as broker
ROUTER_NODE_ID, and forwards every request over loopback to the broker that owns it. Router i
and broker i together stand for shard i; the prototype forwards every request across the
boundary (a real shard serves its own partitions in-process), so its cost is an upper bound.

With one backend (node.py's `frontends`) it is way (c)'s front-end, forwarding only.

What it routes, and only this (a bench front, not a broker): Produce is split by the
partitions' leaders (learned from the Metadata answers that pass through it, or asked of the
first backend for a partition this process has not seen) and the answers merged; Metadata is forwarded and rewritten so that the node is one broker leading every
partition; CreateTopics, DeleteTopics and CreatePartitions go to the controller, Fetch and
ListOffsets to the leader of their partitions (when one backend leads them all), every other
request to the first broker, as it is. acks=0 has no answer.
Records stay raw bytes: a Produce is re-framed, never re-batched.

    python -m tests.bench.multicore.router --port P --backends h:p,h:p
"""
from __future__ import annotations

import argparse
import itertools
import logging
import socket
import struct
from collections import defaultdict
from typing import Any

import trio

from protocol.api_keys import ApiKey
from protocol.codec import decode_request, decode_response, encode_request, encode_response
from protocol.headers import peek_request_prefix

ROUTER_NODE_ID = 0
SIZE = struct.Struct(">i")
log = logging.getLogger("router")

# (topic, partition) -> index of the backend that leads it, from Metadata answers that passed
# through this process (every connection's; the leaders are the backends' own).
LEADERS: dict[tuple[str, int], int] = {}
TOPIC_NAMES: dict[Any, str] = {}  # topic id -> name, for Fetch v13+
CONTROLLER = [0]  # index of the backend that is the controller (admin requests go there)
ADMIN_APIS = (ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS)


class FrameStream:
    """Size-prefixed frames off a trio stream, without the prefix."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.buf = bytearray()

    async def next(self) -> bytes | None:
        while len(self.buf) < 4:
            if not await self._fill():
                return None
        (size,) = SIZE.unpack_from(self.buf)
        while len(self.buf) < 4 + size:
            if not await self._fill():
                return None
        frame = bytes(self.buf[4:4 + size])
        del self.buf[:4 + size]
        return frame

    async def _fill(self) -> bool:
        data = await self.stream.receive_some(1 << 20)
        self.buf += data
        return bool(data)


class Slot:
    """One answer awaited from a backend, by correlation id."""

    def __init__(self) -> None:
        self.done = trio.Event()
        self.frame = b""


class Upstream:
    """One connection to one backend on behalf of one client connection: the client's
    correlation ids are kept (each client request sends at most one request to a backend)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.waiting: dict[int, Slot] = {}

    async def send(self, frame: bytes, correlation_id: int, answer: bool) -> Slot | None:
        slot = None
        if answer:
            slot = self.waiting[correlation_id] = Slot()
        await self.stream.send_all(frame)
        return slot

    async def read_answers(self) -> None:
        frames = FrameStream(self.stream)
        while (frame := await frames.next()) is not None:
            (cid,) = SIZE.unpack_from(frame)
            slot = self.waiting.pop(cid)
            slot.frame = frame
            slot.done.set()
        raise ConnectionError("backend closed the connection")


class Pending:
    """A client request in flight: the backends' slots and how to make one answer of them."""

    def __init__(self, api_key: int, version: int, cid: int, slots: list[Slot]) -> None:
        self.api_key, self.version, self.cid, self.slots = api_key, version, cid, slots

    async def answer(self, port: int, host: str) -> bytes:
        for slot in self.slots:
            await slot.done.wait()
        if self.api_key == ApiKey.METADATA:
            return _rewrite_metadata(self.slots[0].frame, self.version, self.cid, host, port)
        if self.api_key == ApiKey.PRODUCE and len(self.slots) > 1:
            return _merge_produce([s.frame for s in self.slots], self.version, self.cid)
        frame = self.slots[0].frame
        return SIZE.pack(len(frame)) + frame


def _learn(body: Any) -> None:
    """The leaders, topic ids and controller of a backend's Metadata answer."""
    ids = {b.node_id: i for i, b in enumerate(sorted(body.brokers, key=lambda b: b.node_id))}
    CONTROLLER[0] = ids.get(body.get("controller_id", -1), CONTROLLER[0])
    for topic in body.topics:
        if topic.get("topic_id") is not None and topic.name:
            TOPIC_NAMES[topic.topic_id] = topic.name
        for p in topic.partitions:
            if p.leader_id in ids:
                LEADERS[(topic.name, p.partition_index)] = ids[p.leader_id]


def _rewrite_metadata(frame: bytes, version: int, cid: int, host: str, port: int) -> bytes:
    """The backends' Metadata as one broker's: learn the leaders, then name this node."""
    _, body = decode_response(ApiKey.METADATA, version, frame)
    _learn(body)
    for topic in body.topics:
        for p in topic.partitions:
            if p.leader_id >= 0:
                p.leader_id = ROUTER_NODE_ID
            p.replica_nodes = [ROUTER_NODE_ID]
            p.isr_nodes = [ROUTER_NODE_ID] if p.isr_nodes else []
            p.offline_replicas = []
    body.brokers = [{"node_id": ROUTER_NODE_ID, "host": host, "port": port, "rack": None}]
    body.controller_id = ROUTER_NODE_ID
    return encode_response(ApiKey.METADATA, version, cid, body)


def _merge_produce(frames: list[bytes], version: int, cid: int) -> bytes:
    topics: dict[str, list[Any]] = defaultdict(list)
    throttle = 0
    for frame in frames:
        _, body = decode_response(ApiKey.PRODUCE, version, frame)
        throttle = max(throttle, body.get("throttle_time_ms", 0))
        for t in body.responses:
            topics[t.name].extend(t.partition_responses)
    merged = {"responses": [{"name": n, "partition_responses": ps} for n, ps in topics.items()],
              "throttle_time_ms": throttle, "node_endpoints": []}
    return encode_response(ApiKey.PRODUCE, version, cid, merged)


LEARN_VERSION = 12  # Metadata for all topics, names and ids both
_own_ids = itertools.count(-1, -1)  # the router's own correlation ids (clients' are >= 0)


async def _learn_from(up: Upstream) -> None:
    """Ask a backend for the whole image: a partition this router process has not seen in a
    Metadata answer yet (a client's connections may land on different routers, and its
    Metadata went through another) is routed by what the store says, as a shard would read
    its shared image, not sent to the wrong broker to fail with NOT_LEADER_OR_FOLLOWER."""
    cid = next(_own_ids)
    body = {"topics": None, "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}
    slot = await up.send(encode_request(ApiKey.METADATA, LEARN_VERSION, cid, "router", body),
                         cid, True)
    assert slot is not None
    await slot.done.wait()
    _learn(decode_response(ApiKey.METADATA, LEARN_VERSION, slot.frame)[1])


def _known(keys: list[tuple[str, int]]) -> bool:
    return all(k in LEADERS for k in keys)


def _partitions(api_key: int, body: Any) -> list[tuple[str, int]]:
    """The (topic, partition) pairs a Produce, Fetch or ListOffsets names."""
    if api_key == ApiKey.PRODUCE:
        return [(t.name, p.index) for t in body.topic_data for p in t.partition_data]
    if api_key == ApiKey.FETCH:
        return [(t.get("topic") or TOPIC_NAMES.get(t.get("topic_id"), ""), p.partition)
                for t in body.topics for p in t.partitions]
    return [(t.name, p.partition_index) for t in body.topics for p in t.partitions]


def _owner(api_key: int, body: Any) -> int:
    """The backend a request other than Produce goes to: admin requests to the controller;
    Fetch and ListOffsets to the leader of their partitions when one backend leads them all
    (this prototype does not split a fetch: a consumer of partitions led by several backends
    is not served by it); the rest to the first backend."""
    if api_key in ADMIN_APIS:
        return CONTROLLER[0]
    if api_key not in (ApiKey.FETCH, ApiKey.LIST_OFFSETS):
        return 0
    owners = {LEADERS.get(k, 0) for k in _partitions(api_key, body)}
    return owners.pop() if len(owners) == 1 else 0


async def _dispatch(frame: bytes, ups: list[Upstream]) -> Pending:
    prefix = peek_request_prefix(frame)
    assert prefix is not None, "short frame"
    api_key, version, cid = prefix
    framed = SIZE.pack(len(frame)) + frame
    request = None
    if api_key in (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS):
        request = decode_request(frame)
        if not _known(_partitions(api_key, request.body)):
            await _learn_from(ups[0])
    if api_key != ApiKey.PRODUCE:
        body = request.body if request is not None else None
        slot = await ups[_owner(api_key, body)].send(framed, cid, True)
        assert slot is not None
        return Pending(api_key, version, cid, [slot])
    assert request is not None
    body = request.body
    answer = body.acks != 0
    shares: dict[int, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for t in body.topic_data:
        for p in t.partition_data:
            shares[LEADERS.get((t.name, p.index), 0)][t.name].append(p)
    if len(shares) == 1:  # all to one backend: the frame as it came
        slots = [await ups[next(iter(shares))].send(framed, cid, answer)]
    else:
        slots = []
        for backend, topics in shares.items():
            sub = {"transactional_id": body.get("transactional_id"), "acks": body.acks,
                   "timeout_ms": body.timeout_ms,
                   "topic_data": [{"name": n, "partition_data": [
                       {"index": p.index, "records": p.records} for p in ps]}
                       for n, ps in topics.items()]}
            slots.append(await ups[backend].send(
                encode_request(ApiKey.PRODUCE, version, cid, request.header.client_id, sub),
                cid, answer))
    return Pending(api_key, version, cid, [s for s in slots if s is not None])


async def serve_client(client: trio.SocketStream, backends: list[tuple[str, int]],
                       host: str, port: int) -> None:
    """One client connection: requests in order out to the backends, answers in order back."""
    async with client, trio.open_nursery() as nursery:
        ups = []
        for bh, bp in backends:
            up = Upstream(await trio.open_tcp_stream(bh, bp))
            up.stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            nursery.start_soon(up.read_answers)
            ups.append(up)
        send, receive = trio.open_memory_channel[Pending](1000)

        async def answers() -> None:
            async for pending in receive:
                if pending.slots:
                    await client.send_all(await pending.answer(port, host))

        nursery.start_soon(answers)
        frames = FrameStream(client)
        try:
            while (frame := await frames.next()) is not None:
                await send.send(await _dispatch(frame, ups))
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
            pass
        nursery.cancel_scope.cancel()


def reuseport_socket() -> trio.socket.SocketType:
    """A socket for a port other processes bind too (SO_REUSEPORT: the kernel spreads new
    connections over the processes)."""
    sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    return sock


async def main(host: str, port: int, backends: list[tuple[str, int]]) -> None:
    sock = reuseport_socket()
    await sock.bind((host, port))
    sock.listen(1024)
    listener = trio.SocketListener(sock)
    print(f"router listening on {host}:{port}", flush=True)

    async def handler(stream: trio.SocketStream) -> None:
        try:
            await serve_client(stream, backends, host, port)
        except (OSError, trio.BrokenResourceError, ConnectionError) as exc:
            log.info("connection ended: %s", exc)

    await trio.serve_listeners(handler, [listener])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--backends", required=True)
    args = parser.parse_args()
    parsed = [(h, int(p)) for h, p in (b.rsplit(":", 1) for b in args.backends.split(","))]
    try:
        trio.run(main, args.host, args.port, parsed)
    except KeyboardInterrupt:
        pass
