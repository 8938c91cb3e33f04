"""A small HTTP/1.1 server on trio with h11, for the broker's side door (/healthz, /readyz,
/metrics): what an operator's probes and Prometheus scrape, never what a Kafka client uses.

h11 does the protocol (sans-I/O: bytes in, events out); this module is the thin trio loop
around it, one task per connection, started in the server's nursery beside the Kafka
listeners and never sharing a task with them, so a bad HTTP client can delay nothing but
itself. What a bad client gets:

- a request head over `max_head_bytes` (huge headers): 431, then the connection is closed
  (h11 refuses to buffer more than that while a head is incomplete);
- a head not complete within `head_timeout` seconds of the first wait, however slowly it
  dribbles in (slowloris), or a kept-alive connection idle that long: closed;
- bytes that are not HTTP/1.x: 400, then closed;
- a method other than GET or HEAD: 405 and closed (its body, if any, is never read);
- an unknown path: 404 (the app says so), the connection kept;
- more than `max_connections` open at once: the newest is closed at once.

Requests on a connection are served one after the other (keep-alive; pipelined requests wait
in h11's buffer). The app is a plain function `app(method, path) -> HttpResponse`, called on
the event loop: it must be cheap and must not block.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from http import HTTPStatus
from dataclasses import dataclass

import h11
import trio

__all__ = ["HttpResponse", "serve_http"]

log = logging.getLogger(__name__)

# h11 refuses a head only while it is incomplete, so reads are kept small: a head is refused
# once it passes MAX_HEAD_BYTES by less than one read.
RECEIVE_SIZE = 4 * 1024
MAX_HEAD_BYTES = 16 * 1024
# Probes and scrapers need a handful; a flood of connections must not exhaust descriptors the
# Kafka listeners need.
MAX_CONNECTIONS = 64
# A response write that does not complete in this long (a client that stopped reading) ends
# the connection.
SEND_TIMEOUT = 10.0
LINGER_SECONDS = 1.0


@dataclass(frozen=True)
class HttpResponse:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"


App = Callable[[str, str], HttpResponse]


class _Closed(Exception):
    """The connection is over: the peer closed it, timed out, or broke the protocol."""


async def _send(stream: trio.SocketStream, conn: h11.Connection, *events: h11.Event) -> None:
    with trio.move_on_after(SEND_TIMEOUT) as scope:
        for event in events:
            data = conn.send(event)
            if data:
                await stream.send_all(data)
    if scope.cancelled_caught:
        raise _Closed("send timed out")


async def _respond(stream: trio.SocketStream, conn: h11.Connection, method: str,
                   response: HttpResponse, *, close: bool = False) -> None:
    headers = [("Content-Type", response.content_type),
               ("Content-Length", str(len(response.body))),
               ("Cache-Control", "no-store")]
    if close:
        headers.append(("Connection", "close"))
    events: list[h11.Event] = [h11.Response(status_code=response.status, headers=headers,
                                            reason=HTTPStatus(response.status).phrase)]
    if method != "HEAD" and response.body:
        events.append(h11.Data(data=response.body))
    events.append(h11.EndOfMessage())
    await _send(stream, conn, *events)


async def _next_event(stream: trio.SocketStream, conn: h11.Connection,
                      deadline: float) -> object:
    """The next h11 event, reading until it is complete or `deadline` passes."""
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        with trio.move_on_at(deadline):
            data = await stream.receive_some(RECEIVE_SIZE)
            conn.receive_data(data)  # b"" tells h11 the peer closed
            continue
        raise _Closed("request head not received in time")


async def _linger(stream: trio.SocketStream) -> None:
    """Close after an error answer without losing it: a socket closed with unread input
    resets the connection, and the client may then never read the answer. So the write side
    is shut, and what the client still sends is read and dropped, for a second at most."""
    with trio.move_on_after(LINGER_SECONDS):
        await stream.send_eof()
        while await stream.receive_some(RECEIVE_SIZE):
            pass


def _error(status: int, message: str) -> HttpResponse:
    return HttpResponse(status, (message + "\n").encode())


async def _serve_one(stream: trio.SocketStream, app: App, head_timeout: float,
                     max_head_bytes: int) -> None:
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=max_head_bytes)
    while True:
        deadline = trio.current_time() + head_timeout
        try:
            event = await _next_event(stream, conn, deadline)
        except h11.RemoteProtocolError as exc:
            if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                status = exc.error_status_hint
                reason = ("request head too large" if status == 431
                          else f"bad request: {exc}")
                await _respond(stream, conn, "GET", _error(status, reason), close=True)
                await _linger(stream)
            return
        if isinstance(event, h11.ConnectionClosed):
            return
        if not isinstance(event, h11.Request):  # cannot happen in state IDLE
            return
        method = event.method.decode("ascii", "replace")
        if method not in ("GET", "HEAD"):
            response = _error(405, f"method {method} not allowed; use GET or HEAD")
            await _respond(stream, conn, "GET", response, close=True)
            await _linger(stream)
            return
        target = event.target.decode("ascii", "replace")
        path = target.split("?", 1)[0]
        try:
            response = app(method, path)
        except Exception:
            log.exception("HTTP %s %s failed", method, path)
            response = _error(500, "internal error")
        # A GET may still carry a body (Content-Length): read it to the end, under the same
        # deadline, before the next request.
        while True:
            event = await _next_event(stream, conn, deadline)
            if isinstance(event, h11.EndOfMessage):
                break
            if isinstance(event, h11.ConnectionClosed):
                return
        await _respond(stream, conn, method, response)
        if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
            return
        conn.start_next_cycle()


async def _serve_connection(stream: trio.SocketStream, app: App, head_timeout: float,
                            max_head_bytes: int) -> None:
    try:
        async with stream:
            await _serve_one(stream, app, head_timeout, max_head_bytes)
    except (_Closed, h11.ProtocolError, trio.BrokenResourceError, trio.ClosedResourceError,
            ConnectionError):
        pass
    except Exception:
        # Never into the server's nursery: that would take the Kafka listeners down too.
        log.exception("HTTP connection failed")


async def serve_http(listeners: list[trio.SocketListener], app: App, *,
                     head_timeout: float = 10.0, max_head_bytes: int = MAX_HEAD_BYTES,
                     max_connections: int = MAX_CONNECTIONS,
                     handler_nursery: trio.Nursery | None = None) -> None:
    """Serve `app` on the bound `listeners` until cancelled. At most `max_connections` are
    served at once; one more is closed as soon as it is accepted."""
    open_now = 0

    async def handler(stream: trio.SocketStream) -> None:
        nonlocal open_now
        if open_now >= max_connections:
            await trio.aclose_forcefully(stream)
            return
        open_now += 1
        try:
            await _serve_connection(stream, app, head_timeout, max_head_bytes)
        finally:
            open_now -= 1
    await trio.serve_listeners(handler, listeners, handler_nursery=handler_nursery)
