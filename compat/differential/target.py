"""One broker under comparison, as the corpus sees it: requests in, decoded answers out.

An answer is what a client could observe, including the absence of one: a connection the
broker closed, or no response within the timeout. Those become observations (`CLOSED`,
`NO_RESPONSE`) rather than exceptions, so that two brokers closing on the same bad request
compare as identical.
"""
from __future__ import annotations

import socket
import time
from typing import Any

from compat.wire import read_frame
from protocol.codec import decode_response, encode_request

CLOSED = "<connection closed>"
NO_RESPONSE = "<no response>"


class Conn:
    """One client connection to a target; reopened after the broker closed it."""

    def __init__(self, target: "Target") -> None:
        self.target = target
        self.sock: socket.socket | None = None
        self.cid = 0
        self.pending: list[tuple[int, int, int]] = []  # (api, version, cid) sent, unread
        # The requests' client id: a case that sets a client quota uses one of its own, so
        # that the other cases' requests are never counted against it.
        self.client_id = "differential"

    def _socket(self) -> socket.socket:
        if self.sock is None:
            host, _, port = self.target.bootstrap.rpartition(":")
            self.sock = socket.create_connection((host, int(port)), timeout=self.target.timeout)
        return self.sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        self.pending.clear()

    def send(self, api: int, version: int, body: Any, *, raw: bytes | None = None) -> None:
        """Send without reading: the answer is collected by `receive` (for requests that
        park, such as a JoinGroup waiting for the other members)."""
        self.cid += 1
        frame = raw if raw is not None else encode_request(api, version, self.cid,
                                                            self.client_id, body)
        try:
            self._socket().sendall(frame)
        except OSError:
            self.close()
        self.pending.append((api, version, self.cid))

    def receive(self, timeout: float | None = None) -> Any:
        """The decoded answer to the oldest request sent and unread."""
        if not self.pending:
            raise RuntimeError("nothing sent")
        api, version, cid = self.pending.pop(0)
        if self.sock is None:
            return CLOSED
        self.sock.settimeout(timeout or self.target.timeout)
        try:
            got, body = decode_response(api, version, read_frame(self.sock))
        except socket.timeout:
            self.close()
            return NO_RESPONSE
        except (ConnectionError, OSError):
            self.close()
            return CLOSED
        if got != cid:
            raise AssertionError(f"correlation id {got} != {cid}")
        return body

    def request(self, api: int, version: int, body: Any, *, timeout: float | None = None) -> Any:
        self.send(api, version, body)
        return self.receive(timeout)

    def timed(self, api: int, version: int, body: Any) -> tuple[Any, float]:
        began = time.monotonic()
        answer = self.request(api, version, body)
        return answer, time.monotonic() - began


class Target:
    """A broker by its bootstrap address, with a default connection."""

    def __init__(self, name: str, bootstrap: str, timeout: float = 10.0) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.timeout = timeout
        self.conn = Conn(self)
        self._extra: list[Conn] = []

    def connect(self) -> Conn:
        """Another connection (a second group member); closed by `close`."""
        conn = Conn(self)
        self._extra.append(conn)
        return conn

    def request(self, api: int, version: int, body: Any, **kw: Any) -> Any:
        return self.conn.request(api, version, body, **kw)

    def close_extra(self) -> None:
        for conn in self._extra:
            conn.close()
        self._extra.clear()

    def close(self) -> None:
        self.close_extra()
        self.conn.close()
