"""TLS on a connection's raw descriptor: an `ssl.SSLObject` between two memory BIOs.

trio's SSLStream put a trio socket receive (a scheduler pass, a checkpoint, a retry wrapper)
behind every TLS record: a 16 KB record per `receive_some`, so a 400 KB Produce cost ~25 trips
through the event loop. Profiled under bench_tls.py's 1 KB-record produce, that path (and
the loop around it) was most of the broker's CPU beside the log append; decryption itself is
~0.35 ms a megabyte. Here the TLS loop reads like the plaintext one: `os.read` takes as much
ciphertext as the socket has (up to what the request loop wants), OpenSSL decrypts it
record by record from the incoming BIO, and the task parks in `wait_readable` only when both
are drained. Responses are encrypted into the outgoing BIO and written with `os.write`,
waiting in `wait_writable` only when the socket's buffer is full.

Every record OpenSSL produces on its own (the handshake's flights, TLS 1.3 session tickets,
alerts) lands in the outgoing BIO and goes out with the next `flush`. Renegotiation is
refused by the listener's context (ssl.OP_NO_RENEGOTIATION; TLS 1.3 has none).
"""
from __future__ import annotations

import os
import ssl
from typing import Iterator

import trio

from protocol.primitives import FileRegion
from pybroker.network.errors import CloseConnection

# The largest plaintext a TLS record carries: what one SSLObject.read returns at most.
RECORD_SIZE = 16384
# Plaintext handed to SSLObject.write at once (fewer, fuller records; a bound on the memory a
# large response holds while it is encrypted).
WRITE_SIZE = 256 * 1024
HANDSHAKE_READ = 64 * 1024


class TlsClosed(Exception):
    """The peer closed the connection: its close_notify, or end of stream in a handshake."""


class TlsTransport:
    """One server-side TLS connection on a non-blocking descriptor. Reading and decrypting
    are separate steps: what one read brings is decrypted whole (at most what the request
    loop asked for, plus one partial record kept in the incoming BIO)."""

    __slots__ = ("fd", "tls", "incoming", "outgoing")

    def __init__(self, fd: int, context: ssl.SSLContext) -> None:
        self.fd = fd
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_side=True)

    async def handshake(self) -> None:
        """Drive the handshake to its end; ssl.SSLError when it fails (the alert explaining
        why is sent first, best effort), TlsClosed when the peer goes away. No deadline here:
        the caller counts the handshake as idle time, so a stalled one is reaped."""
        tls = self.tls
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self.flush()
                await trio.lowlevel.wait_readable(self.fd)
                try:
                    data = os.read(self.fd, HANDSHAKE_READ)
                except BlockingIOError:
                    continue
                if not data:
                    raise TlsClosed("connection closed") from None
                self.incoming.write(data)
            except ssl.SSLError:
                self._send_alert()
                raise
        await self.flush()

    def _send_alert(self) -> None:
        pending = self.outgoing.read()
        if pending:
            try:
                os.write(self.fd, pending)
            except OSError:
                pass

    def getpeercert(self) -> dict | None:
        return self.tls.getpeercert()

    def read_ciphertext(self, want: int) -> int | None:
        """Move up to `want` bytes from the socket into the incoming BIO: the count, 0 at
        end of stream, None when the socket has nothing now."""
        try:
            data = os.read(self.fd, want)
        except BlockingIOError:
            return None
        if data:
            self.incoming.write(data)
        return len(data)

    def plaintext(self) -> Iterator[bytes]:
        """The plaintext of every whole record in the incoming BIO, a record at a time. Ends
        when only a partial record is left; TlsClosed at the peer's close_notify (which
        SSLObject.read reports as b""), ssl.SSLError for a corrupt record."""
        read = self.tls.read
        while True:
            try:
                chunk = read(RECORD_SIZE)
            except ssl.SSLWantReadError:
                return
            if not chunk:
                raise TlsClosed("close_notify")
            yield chunk

    async def flush(self) -> None:
        """Write everything in the outgoing BIO to the socket."""
        if not self.outgoing.pending:
            return
        data = memoryview(self.outgoing.read())
        fd = self.fd
        while data:
            try:
                sent = os.write(fd, data)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(fd)
                continue
            data = data[sent:]

    async def send_parts(self, parts: list) -> None:
        """Encrypt and send a response given as parts: buffers are gathered into writes of up
        to WRITE_SIZE (one burst of full records for a small response); a FileRegion's bytes
        are read from its segment (sendfile cannot encrypt) in WRITE_SIZE pieces, so a large
        response never sits in memory whole."""
        out: list = []
        size = 0
        for part in parts:
            if type(part) is not FileRegion:
                out.append(part)
                size += len(part)
                continue
            offset, left = part.offset, part.length
            while left:
                try:
                    fileno = part.source.fileno()
                except ValueError:
                    raise CloseConnection(
                        "the segment was closed while its records were being sent") from None
                chunk = os.pread(fileno, min(left, WRITE_SIZE), offset)
                if not chunk:
                    raise CloseConnection(
                        "the segment ended before its records were sent (truncated)")
                out.append(chunk)
                size += len(chunk)
                offset += len(chunk)
                left -= len(chunk)
                if size >= WRITE_SIZE:
                    await self._send(out)
                    out, size = [], 0
        if out:
            await self._send(out)

    async def _send(self, out: list) -> None:
        data = b"".join(out) if len(out) > 1 else out[0]
        if len(data):
            self.tls.write(data)
        await self.flush()
