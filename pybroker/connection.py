"""One task per connection: frames in, one request at a time, responses in request order.

Kafka mutes a channel until its response is sent; serving one request at a time per
connection gives the same ordering guarantee. A connection with no traffic for
`connections.max.idle.ms` is closed, as is one that sends a malformed frame.

The socket is read and written with plain system calls on its descriptor, and the task parks
in `trio.lowlevel.wait_readable` only when there is nothing to read. trio's socket methods
yield to the scheduler after every successful call and the idle timeout was a cancel scope per
receive; on these machines, where a round trip costs the broker mostly system calls, that was
an extra epoll pass and ~20 us of Python per request (issue #6: small-request latency).
Fairness is kept by yielding after every full read; idle connections are closed by one reaper
(pybroker/idle.py) rather than a deadline set per request.
"""
from __future__ import annotations

import contextlib
import logging
import os
import socket
import trio

from protocol.framing import NEED_DATA, FrameBuffer, FrameTooLarge
from protocol.primitives import FileRegion
from pybroker.dispatch import CloseConnection, dispatch
from pybroker.handlers.base import Services
from pybroker.connection_limits import ConnectionLimits
from pybroker.idle import IdleConnections, IdleWatch
from pybroker.memory_pool import SMALL_FRAME

log = logging.getLogger(__name__)
RECEIVE_SIZE = 256 * 1024
# A read while no large frame holds memory from the pool (see memory_pool.py).
SMALL_READ = 64 * 1024
MAX_IOV = 64


async def send_parts(fd: int, parts: list) -> None:
    """Write a response given as parts to the socket `fd`: buffers go out with gathered
    writes (no joining into one frame), a FileRegion straight from its file with sendfile."""
    buffers: list = []
    for part in parts:
        if type(part) is FileRegion:
            if buffers:
                await _send_buffers(fd, buffers)
                buffers = []
            await _send_region(fd, part)
        else:
            buffers.append(part)
    if buffers:
        await _send_buffers(fd, buffers)


async def _send_buffers(fd: int, parts: list) -> None:
    # No MSG_MORE before a region: corking the header stalled each response by ~200 ms.
    views = [memoryview(p) for p in parts if len(p)]
    while views:
        try:
            sent = os.writev(fd, views[:MAX_IOV]) if len(views) > 1 else os.write(fd, views[0])
        except BlockingIOError:
            await trio.lowlevel.wait_writable(fd)
            continue
        while sent:
            if sent >= len(views[0]):
                sent -= len(views.pop(0))
            else:
                views[0] = views[0][sent:]
                sent = 0


async def _send_region(fd: int, region: FileRegion) -> None:
    """sendfile the region; the file's descriptor is asked for before every call, so a
    segment closed meanwhile (topic deleted, log truncated) is noticed, not read through a
    descriptor number that may have been reused. Such a response cannot be completed: the
    connection is closed, and the client retries elsewhere or later."""
    offset, left = region.offset, region.length
    while left:
        try:
            sent = os.sendfile(fd, region.source.fileno(), offset, left)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(fd)
            continue
        except ValueError:
            raise CloseConnection(
                "the segment was closed while its records were being sent") from None
        if sent == 0:
            raise CloseConnection("the segment ended before its records were sent (truncated)")
        offset += sent
        left -= sent


def _in_memory(parts: list) -> int:
    """Bytes of a response held in memory (a FileRegion goes out with sendfile: none)."""
    return sum(len(p) for p in parts if type(p) is not FileRegion)


async def _serve(services: Services, fd: int, watch: IdleWatch, host: str, port: int,
                 listener: str) -> None:
    pool = services.memory
    limit = services.config.socket_request_max_bytes
    if pool.capacity is not None:
        limit = min(limit, pool.capacity)  # a frame the pool can never grant is refused
    frames = FrameBuffer(limit)
    readable = True
    reserved = 0  # taken from the pool for the frame being received, until it is answered
    mute = [0]  # a quota's throttle time (ms) set by the request just answered
    try:
        while True:
            if not readable:
                watch.wait_starts()
                await trio.lowlevel.wait_readable(fd)
                watch.waiting = False
            # Until a large frame has its memory, read only a little: enough for small
            # requests, and a bound on what a connection waiting for the pool holds.
            want = RECEIVE_SIZE if reserved else SMALL_READ
            try:
                data = os.read(fd, want)
            except BlockingIOError:
                readable = False
                continue
            if not data:
                return
            frames.receive_data(data)
            while True:
                if not reserved:
                    size = frames.pending_size()
                    if size is not None and SMALL_FRAME < size <= limit:
                        # Reserved before more of it is read; while the pool cannot grant
                        # it, nothing is read from this connection (backpressure).
                        await pool.allocate(size)
                        reserved = size
                frame = frames.next_frame()
                if frame is NEED_DATA:
                    break
                response = await dispatch(services, frame, host, port, listener, mute)
                del frame
                if response is not None:
                    held = _in_memory(response)
                    if held > SMALL_FRAME:
                        pool.take(held)
                        try:
                            await send_parts(fd, response)
                        finally:
                            pool.release(held)
                    else:
                        await send_parts(fd, response)
                    del response
                if reserved:
                    pool.release(reserved)
                    reserved = 0
                if mute[0]:
                    # Kafka's throttling (KIP-219): the response went out at once, whatever
                    # its version, and the channel stays muted for the throttle time; only
                    # this task sleeps, every other connection is served meanwhile.
                    throttle_s, mute[0] = mute[0] / 1000, 0
                    await trio.sleep(throttle_s)
            # A short read drained the socket: wait for more (that yields). A full one may
            # have left data behind: read again, but let other connections run first.
            readable = len(data) == want
            if readable:
                await trio.lowlevel.checkpoint()
    finally:
        if reserved:
            pool.release(reserved)


async def serve_connection(services: Services, stream: trio.SocketStream, *,
                           idle: IdleConnections, limits: ConnectionLimits,
                           listener: str | None = None) -> None:
    """Serve one accepted connection until it closes, idles out or misbehaves; `limits`
    decides whether it is served at all (max.connections, max.connections.per.ip)."""
    try:
        host, port = stream.socket.getpeername()[:2]
    except OSError:
        host, port = "?", 0
    if services.config.socket_send_buffer_bytes != -1:  # Kafka sets it on each accepted socket
        with contextlib.suppress(OSError):  # already reset: the first read will say so
            stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF,
                                     services.config.socket_send_buffer_bytes)
    try:
        async with stream, limits.admit(host) as admitted:
            if not admitted:
                return
            with idle.track() as watch:
                await _serve(services, stream.socket.fileno(), watch, host, port, listener)
            if watch.fired:
                log.info("closing idle connection from %s:%s", host, port)
    except (FrameTooLarge, CloseConnection) as exc:
        log.warning("closing connection from %s:%s: %s", host, port, exc)
    except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
        pass
    except Exception:
        # A bug on this connection's path (a response that fails to encode, ...) must not
        # escape into the server's nursery, which would take every connection down with it.
        log.exception("closing connection from %s:%s after an internal error", host, port)
