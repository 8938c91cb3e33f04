"""One task per connection: frames in, one request at a time, responses in request order.

Kafka mutes a channel until its response is sent; serving one request at a time per
connection gives the same ordering guarantee. A connection with no traffic for
`connections.max.idle.ms` is closed, as is one that sends a malformed frame.
"""
from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

import trio

from protocol.framing import NEED_DATA, FrameBuffer, FrameTooLarge
from protocol.primitives import FileRegion
from pybroker.dispatch import CloseConnection, dispatch

if TYPE_CHECKING:
    from pybroker.broker import Broker

log = logging.getLogger(__name__)
RECEIVE_SIZE = 256 * 1024


async def send_parts(stream: trio.SocketStream, parts: list) -> None:
    """Write a response given as parts: buffers go out with gathered sends (no joining into
    one frame), a FileRegion straight from its file with os.sendfile."""
    if len(parts) == 1 and type(parts[0]) is not FileRegion:
        await stream.send_all(parts[0])
        return
    sock = stream.socket
    buffers: list = []
    for part in parts:
        if type(part) is FileRegion:
            if buffers:
                await _send_buffers(sock, buffers)
                buffers = []
            await _send_region(sock, part)
        else:
            buffers.append(part)
    if buffers:
        await _send_buffers(sock, buffers)


async def _send_buffers(sock: trio.socket.SocketType, parts: list) -> None:
    # No MSG_MORE before a region: corking the header stalled each response by ~200 ms.
    views = [memoryview(p) for p in parts]
    while views:
        sent = await sock.sendmsg(views[:64])
        while sent and views:
            if sent >= len(views[0]):
                sent -= len(views.pop(0))
            else:
                views[0] = views[0][sent:]
                sent = 0


async def _send_region(sock: trio.socket.SocketType, region: FileRegion) -> None:
    """os.sendfile the region; the file's descriptor is asked for before every call, so a
    segment closed meanwhile (topic deleted, log truncated) is noticed, not read through a
    descriptor number that may have been reused. Such a response cannot be completed: the
    connection is closed, and the client retries elsewhere or later."""
    out = sock.fileno()
    offset, left = region.offset, region.length
    while left:
        try:
            sent = os.sendfile(out, region.source.fileno(), offset, left)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            continue
        except ValueError:
            raise CloseConnection(
                "the segment was closed while its records were being sent") from None
        if sent == 0:
            raise CloseConnection("the segment ended before its records were sent (truncated)")
        offset += sent
        left -= sent
    await trio.lowlevel.checkpoint()


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
