"""One task per connection: frames in, one request at a time, responses in request order.

Kafka mutes a channel until its response is sent; serving one request at a time per
connection gives the same ordering guarantee. A connection with no traffic for
`connections.max.idle.ms` is closed, as is one that sends a malformed frame.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from protocol.framing import NEED_DATA, FrameBuffer, FrameTooLarge
from pybroker.dispatch import CloseConnection, dispatch

if TYPE_CHECKING:
    from pybroker.broker import Broker

log = logging.getLogger(__name__)
RECEIVE_SIZE = 256 * 1024


async def send_parts(stream: trio.SocketStream, parts: list) -> None:
    """Write a response given as buffers with gathered sends (no joining into one frame)."""
    if len(parts) == 1:
        await stream.send_all(parts[0])
        return
    sock = stream.socket
    views = [memoryview(p) for p in parts]
    while views:
        sent = await sock.sendmsg(views[:64])
        while sent and views:
            if sent >= len(views[0]):
                sent -= len(views.pop(0))
            else:
                views[0] = views[0][sent:]
                sent = 0


async def serve_connection(broker: "Broker", stream: trio.SocketStream) -> None:
    try:
        host, port = stream.socket.getpeername()[:2]
    except OSError:
        host, port = "?", 0
    frames = FrameBuffer(broker.config.socket_request_max_bytes)
    idle_s = broker.config.connections_max_idle_ms / 1000
    broker.connection_count += 1
    try:
        async with stream:
            while True:
                with trio.move_on_after(idle_s) as idle:
                    data = await stream.receive_some(RECEIVE_SIZE)
                if idle.cancelled_caught:
                    log.info("closing idle connection from %s:%s", host, port)
                    return
                if not data:
                    return
                frames.receive_data(data)
                while True:
                    frame = frames.next_frame()
                    if frame is NEED_DATA:
                        break
                    response = await dispatch(broker, frame, host, port)  # type: ignore[arg-type]
                    if response is not None:
                        await send_parts(stream, response)
    except (FrameTooLarge, CloseConnection) as exc:
        log.warning("closing connection from %s:%s: %s", host, port, exc)
    except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
        pass
    except Exception:
        # A bug on this connection's path (a response that fails to encode, ...) must not
        # escape into the server's nursery, which would take every connection down with it.
        log.exception("closing connection from %s:%s after an internal error", host, port)
    finally:
        broker.connection_count -= 1
