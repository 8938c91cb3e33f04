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
(pybroker/network/idle.py) rather than a deadline set per request.
"""
from __future__ import annotations

import contextlib
import logging
import os
import socket
import ssl
from functools import partial
from typing import Awaitable, Callable, Mapping

import trio

from protocol.framing import NEED_DATA, FrameBuffer, FrameTooLarge
from protocol.primitives import FileRegion
from pybroker.network.dispatch import dispatch
from pybroker.network.errors import CloseConnection
from pybroker.handlers import Services
from pybroker.security.sasl_session import frame_limit
from pybroker.network.connection_limits import ConnectionLimits
from pybroker.network.idle import IdleConnections, IdleWatch
from pybroker.network.request_hooks import RequestHooks
from pybroker.quota.memory_pool import SMALL_FRAME
from pybroker.security.session import Session
from pybroker.security.tls_context import NoMatchingRule, TlsListener
from pybroker.network.tls_transport import TlsClosed, TlsTransport

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
    # The header before a region goes out on its own, not with MSG_MORE or under TCP_CORK.
    # With either, librdkafka's answers stalled ~208 ms each. The first sendfile stopped
    # after one 64 KB pipe chunk, the next got EAGAIN, and the held partial segment waited
    # for the kernel's timer. A cork cleared while waiting ends the stall, but costs about
    # seven system calls more an answer (4 setsockopt, 2 sendfile, 1 epoll_wait), and
    # consume MB/s did not move (docs/PERFORMANCE.md, "A sendfile answer corked").
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
    """Bytes of a response held in memory (a FileRegion goes out with sendfile: none). A
    plain loop: a generator costs more than the few parts of a response."""
    held = 0
    for p in parts:
        if type(p) is not FileRegion:
            held += len(p)
    return held


class _Requests:
    """The half of a serve loop both transports share: bytes in, frames out, each request
    dispatched and answered in order, memory taken from the pool for large frames and large
    responses. The plaintext loop (system calls on the descriptor) and the TLS loop (the same
    calls, through tls_transport's memory BIOs) differ only in how they read and send."""

    __slots__ = ("services", "host", "port", "listener", "session", "hooks", "pool", "limit",
                 "frames", "reserved")

    def __init__(self, services: Services, host: str, port: int, listener: str | None,
                 session: Session, hooks: RequestHooks | None = None) -> None:
        self.services, self.host, self.port = services, host, port
        self.listener, self.session, self.hooks = listener, session, hooks
        self.pool = services.memory
        limit = services.config.socket_request_max_bytes
        if self.pool.capacity is not None:
            limit = min(limit, self.pool.capacity)  # a frame the pool can never grant is refused
        self.limit = limit
        self.frames = FrameBuffer(limit)
        self.reserved = 0  # taken from the pool for the frame being received, until answered

    def want(self) -> int:
        # Until a large frame has its memory, read only a little: enough for small requests,
        # and a bound on what a connection waiting for the pool holds.
        return RECEIVE_SIZE if self.reserved else SMALL_READ

    async def receive(self, data: bytes, send: Callable[[list], Awaitable[None]]) -> bool:
        """Take `data` read from the connection; answer every request it completes. False:
        close the connection now (a failed SASL exchange, after its answer, as Kafka does)."""
        self.frames.receive_data(data)
        return await self.answer(send)

    async def answer(self, send: Callable[[list], Awaitable[None]]) -> bool:
        """Answer every request the bytes already in `frames` complete; False as receive."""
        frames, pool, session = self.frames, self.pool, self.session
        while True:
            if not session.authenticated:  # sasl.server.max.receive.size, from the prefix
                sasl_limit = frame_limit(self.services.config.sasl_listeners, session)
                size = frames.pending_size()
                if sasl_limit is not None and size is not None and size > sasl_limit:
                    raise CloseConnection(f"a {size}-byte frame before SASL authentication "
                                          f"(sasl.server.max.receive.size is {sasl_limit})")
            if not self.reserved:
                size = frames.pending_size()
                if size is not None and SMALL_FRAME < size <= self.limit:
                    # Reserved before more of it is read; while the pool cannot grant it,
                    # nothing is read from this connection (backpressure).
                    await pool.allocate(size)
                    self.reserved = size
                    # The rest of it is received into one buffer of its size (the plaintext
                    # loop reads straight into it): no chunks joined, no copy of its records.
                    frames.open_frame()
            frame = frames.next_frame()
            if frame is NEED_DATA:
                return True
            response = await dispatch(self.services, frame, self.host, self.port,
                                      self.listener, self.session, self.hooks)
            del frame
            if response is not None:
                held = _in_memory(response)
                if held > SMALL_FRAME:
                    pool.take(held)
                    try:
                        await send(response)
                    finally:
                        pool.release(held)
                else:
                    await send(response)
                del response
            if self.reserved:
                pool.release(self.reserved)
                self.reserved = 0
            if session.close_after_response:
                return False
            if session.throttle_ms:
                # Kafka's throttling (KIP-219): the response went out at once, whatever its
                # version, and the channel stays muted for the throttle time; only this task
                # sleeps, every other connection is served meanwhile.
                throttle_s, session.throttle_ms = session.throttle_ms / 1000, 0
                await trio.sleep(throttle_s)

    def release(self) -> None:
        if self.reserved:
            self.pool.release(self.reserved)
            self.reserved = 0


async def _serve(fd: int, watch: IdleWatch, requests: _Requests) -> None:
    """The plaintext loop: reads with os.read, parks in wait_readable only when drained."""
    send = partial(send_parts, fd)
    readable = True
    while True:
        if not readable:
            watch.wait_starts()
            await trio.lowlevel.wait_readable(fd)
            watch.waiting = False
        into = requests.frames.receive_into()
        if into is not None:  # a large frame, its memory reserved: read into its buffer
            want = len(into)
            try:
                got = os.readv(fd, (into,))
            except BlockingIOError:
                readable = False
                continue
            finally:
                into.release()
            if not got:
                return
            requests.frames.received(got)
            if not await requests.answer(send):
                return
        else:
            want = requests.want()
            try:
                data = os.read(fd, want)
            except BlockingIOError:
                readable = False
                continue
            if not data:
                return
            got = len(data)
            if not await requests.receive(data, send):
                return
        # A short read drained the socket: wait for more (that yields). A full one may have
        # left data behind: read again, but let other connections run first.
        readable = got == want
        if readable:
            await trio.lowlevel.checkpoint()


async def _serve_tls(transport: TlsTransport, watch: IdleWatch, requests: _Requests) -> None:
    """The TLS loop, shaped like the plaintext one: ciphertext read with os.read as the socket
    has it (up to what the request loop wants), decrypted, then answered."""
    send = transport.send_parts
    fd, frames = transport.fd, requests.frames
    readable = True
    while True:
        # What is in the incoming BIO first: the handshake's last read may carry requests.
        # All of one read is decrypted before it is answered, as the plaintext loop answers
        # a whole read: no more memory, and one pass of the request loop rather than one per
        # 16 KB record.
        closing = False
        try:
            for chunk in transport.plaintext():
                frames.receive_data(chunk)
        except TlsClosed:  # the client's close_notify: answer what came before it, then close
            closing = True
        if not await requests.answer(send) or closing:
            return
        await transport.flush()  # whatever OpenSSL answered by itself (an alert, a key update)
        if readable:
            # A full read may have left data behind: read again, other connections first.
            await trio.lowlevel.checkpoint()
        else:
            watch.wait_starts()
            await trio.lowlevel.wait_readable(fd)
            watch.waiting = False
        want = requests.want()
        got = transport.read_ciphertext(want)
        if got is None:
            readable = False
            continue
        if not got:
            return
        readable = got == want


async def _handshake(fd: int, tls: TlsListener, watch: IdleWatch, session: Session, host: str,
                     port: int) -> TlsTransport | None:
    """The TLS handshake, then the session's principal from the client's certificate; None
    (the connection is closed) when it fails. The handshake counts as waiting for a request:
    one that stalls is closed by the idle reaper after connections.max.idle.ms, as Kafka's
    selector closes it, while other connections go on."""
    transport = TlsTransport(fd, tls.context)
    watch.wait_starts()
    try:
        await transport.handshake()
    except (ssl.SSLError, TlsClosed, ConnectionError) as exc:
        # A plaintext client, an untrusted or expired certificate, no common protocol: one
        # line, as Kafka logs a failed authentication, never a traceback.
        log.info("TLS handshake with %s:%s failed: %s", host, port,
                 getattr(exc, "reason", None) or str(exc) or "connection closed")
        return None
    finally:
        watch.waiting = False
    try:
        session.principal = tls.principal(transport.getpeercert())
    except NoMatchingRule as exc:
        log.warning("closing TLS connection from %s:%s: %s (ssl.principal.mapping.rules)",
                    host, port, exc)
        return None
    return transport


def _protocol_of(services: Services, listener: str | None) -> str:
    if listener is None:
        return "PLAINTEXT"
    return services.config.listener_security_protocol_map.get(listener, "PLAINTEXT")


async def serve_connection(services: Services, stream: trio.SocketStream, *,
                           idle: IdleConnections, limits: ConnectionLimits,
                           listener: str | None = None,
                           tls: Mapping[str, TlsListener] | None = None,
                           hooks: RequestHooks | None = None) -> None:
    """Serve one accepted connection until it closes, idles out or misbehaves; `limits`
    decides whether it is served at all (max.connections, max.connections.per.ip). On a
    listener that has a context in `tls` (an SSL listener's), the connection is a TLS one,
    with the context as it is when the connection arrives (a rotated keystore, KIP-226,
    serves the connections that come after it). `hooks`: a test broker's request hooks,
    handed to dispatch (None in production)."""
    tls_listener = None if tls is None or listener is None else tls.get(listener)
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
            name = listener or ""
            services.stats.connection_opened(name)
            requests = None
            session = None
            try:
                with idle.track() as watch:
                    session = Session.on(listener, _protocol_of(services, listener))
                    requests = _Requests(services, host, port, listener, session, hooks)
                    if tls_listener is None:
                        await _serve(stream.socket.fileno(), watch, requests)
                    else:
                        fd = stream.socket.fileno()
                        transport = await _handshake(fd, tls_listener, watch, session, host,
                                                     port)
                        if transport is not None:
                            await _serve_tls(transport, watch, requests)
            finally:
                if requests is not None:
                    requests.release()
                if session is not None and services.shares is not None:
                    services.shares.connection_closed(session)  # its share sessions end
                services.stats.connection_closed(name)
            if watch.fired:
                log.info("closing idle connection from %s:%s", host, port)
    except (FrameTooLarge, CloseConnection) as exc:
        log.warning("closing connection from %s:%s: %s", host, port, exc)
    except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
        pass
    except ssl.SSLError as exc:  # a corrupt or forged record after the handshake
        log.info("closing TLS connection from %s:%s: %s", host, port, exc.reason or exc)
    except Exception:
        # A bug on this connection's path (a response that fails to encode, ...) must not
        # escape into the server's nursery, which would take every connection down with it.
        log.exception("closing connection from %s:%s after an internal error", host, port)
