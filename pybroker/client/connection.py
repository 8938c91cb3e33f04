"""One TCP connection to one broker: frames, correlation ids, negotiated versions, pipelining.

Theory of operation. Requests are written whole under a send lock and may be pipelined: each
waits on its own slot, keyed by correlation id, which a reader task fills as response frames
arrive (Kafka answers in request order, but matching by id is what lets a timed-out request be
forgotten without confusing the next one). The reader task lives in a nursery owned by the
caller (`KafkaClient`), never raises, and on end of stream fails every waiting request with
`KafkaConnectionError`; after that the connection is dead and says so on the next request.

Right after connecting, ApiVersions is asked with our highest version (falling back to what the
broker names when it answers UNSUPPORTED_VERSION in a v0 body, KIP-511); every later request
then uses min(our highest, the broker's highest) for its API, so the same client speaks to
pybroker and to any Kafka broker. An API the broker does not serve in a version we declare
raises KafkaError(UNSUPPORTED_VERSION) naming it, before anything is sent.

Re-authentication (KIP-368): when SaslAuthenticate names a session lifetime, the connection
re-authenticates once 85-95 % of it has passed (Kafka's client's window, random so that many
connections do not re-authenticate together), before the next request is written, as Kafka's
client does it: lazily, so an idle connection re-authenticates when it is used again (a broker
accepts a SaslHandshake beginning re-authentication even after the session expired). The
exchange runs under the send lock, so no other request is written between its frames;
responses to requests already written keep arriving meanwhile. A failed re-authentication
fails the connection (the broker closes it too); the client's next use reconnects.
"""
from __future__ import annotations

import itertools
import os
import random
import ssl
import struct
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, overload

import trio
from construct import Container

from protocol.api_keys import ApiKey
from protocol.codec import ProtocolError, decode_response, encode_request
from protocol.errors import ErrorCode, KafkaError
from protocol.framing import NEED_DATA, FrameBuffer
from protocol.messages import APIS
from pybroker import __version__
from pybroker.client.errors import KafkaConnectionError, KafkaTimeoutError
from pybroker.client.sasl_client import authenticate
from pybroker.client.security import PLAINTEXT, ClientSecurity, SaslCredentials

__all__ = ["BrokerConnection", "PendingRequest", "CLIENT_SOFTWARE_NAME", "CLIENT_SOFTWARE_VERSION"]

CLIENT_SOFTWARE_NAME = "pybroker-client"
CLIENT_SOFTWARE_VERSION = __version__
_CORRELATION = struct.Struct(">i")
_ERROR_CODE = struct.Struct(">h")
_MAX_FRAME = 1 << 30  # a response may carry large fetches; refuse only absurd sizes
_CLOSE_TIMEOUT = 1.0
# Kafka's client re-authenticates between 85 and 95 % of the session lifetime.
_REAUTH_WINDOW = (0.85, 0.95)


@dataclass
class _Slot:
    """Where the reader task leaves one response (or the reason there will be none)."""

    done: trio.Event = field(default_factory=trio.Event)
    frame: bytes | None = None
    error: Exception | None = None


def _os_reason(exc: BaseException) -> str:
    """The errno text behind a connect failure (trio wraps per-address failures)."""
    seen: list[BaseException] = [exc]
    while seen:
        e = seen.pop(0)
        if isinstance(e, OSError) and isinstance(e.errno, int) and e.errno > 0:
            return os.strerror(e.errno)
        if isinstance(e, OSError) and e.strerror:
            return e.strerror
        if isinstance(e, BaseExceptionGroup):
            seen.extend(e.exceptions)
        if e.__cause__ is not None:
            seen.append(e.__cause__)
    return str(exc) or type(exc).__name__


def _broken_reason(exc: BaseException) -> str:
    """What broke a stream: TLS's alert (a broker refusing our certificate, or the lack of
    one, says so only after the handshake under TLS 1.3), else the error's own text."""
    cause = exc.__cause__
    if isinstance(cause, ssl.SSLError):
        return f"SSL: {cause.reason or cause}"
    return str(exc) or type(exc).__name__


async def _tls_handshake(stream: trio.abc.Stream, host: str, port: int,
                         security: ClientSecurity, timeout: float) -> trio.SSLStream:
    """`stream` wrapped in TLS, the broker's certificate verified (and its host name, unless
    ssl.endpoint.identification.algorithm is empty)."""
    assert security.ssl_context is not None
    tls = trio.SSLStream(stream, security.ssl_context, server_hostname=host)
    try:
        with trio.fail_after(timeout):
            await tls.do_handshake()
    except trio.TooSlowError:
        await trio.aclose_forcefully(stream)
        raise KafkaConnectionError(f"SSL handshake with {host}:{port} timed out after "
                                   f"{timeout:g}s (is it an SSL listener?)") from None
    except (trio.BrokenResourceError, ssl.SSLError, OSError) as exc:
        await trio.aclose_forcefully(stream)
        reason = exc.__cause__ if isinstance(exc, trio.BrokenResourceError) and \
            exc.__cause__ is not None else exc
        if isinstance(reason, ssl.SSLCertVerificationError):
            text = f"certificate verify failed: {reason.verify_message}"
        else:
            text = getattr(reason, "reason", None) or str(reason) or type(reason).__name__
        raise KafkaConnectionError(f"SSL handshake failed with {host}:{port} ({text})"
                                   ) from None
    return tls


class BrokerConnection:
    """A connection to `host:port`; `node_id` is -1 for a bootstrap address not yet named."""

    def __init__(self, stream: trio.abc.Stream, host: str, port: int, *, node_id: int = -1,
                 client_id: str | None = None, request_timeout: float = 30.0) -> None:
        self._stream = stream
        self.host, self.port, self.node_id = host, port, node_id
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._frames = FrameBuffer(_MAX_FRAME)
        self._slots: dict[int, _Slot] = {}
        self._ids = itertools.count(1)
        self._send_lock = trio.Lock()
        self._failure: KafkaConnectionError | None = None
        self.session_lifetime_ms = 0  # what SaslAuthenticate told (KIP-368); 0: unbounded
        self._sasl: SaslCredentials | None = None  # to re-authenticate with
        self._reauthenticate_at: float | None = None  # trio time; None: never
        self.reauthentications = 0  # completed on this connection

    def __repr__(self) -> str:
        return f"<BrokerConnection node {self.node_id} {self.address}>"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def closed(self) -> bool:
        return self._failure is not None

    # -- opening and closing -------------------------------------------------------------------

    @classmethod
    async def open(cls, host: str, port: int, *, nursery: trio.Nursery, node_id: int = -1,
                   client_id: str | None = None, connect_timeout: float = 10.0,
                   request_timeout: float = 30.0,
                   security: ClientSecurity | None = None) -> "BrokerConnection":
        """Connect, start the reader in `nursery`, and negotiate API versions.

        With `security`, TLS is handshaken before anything is sent and SASL authenticated
        right after ApiVersions, as Kafka's clients do. KafkaConnectionError if the address
        cannot be reached within `connect_timeout`, the TLS handshake fails, or the peer does
        not answer ApiVersions like a Kafka broker; KafkaError(SASL_AUTHENTICATION_FAILED or
        UNSUPPORTED_SASL_MECHANISM) if the broker refuses the credentials.
        """
        security = security or PLAINTEXT
        try:
            with trio.fail_after(connect_timeout):
                stream: trio.abc.Stream = await trio.open_tcp_stream(host, port)
        except trio.TooSlowError:
            raise KafkaConnectionError(
                f"timed out after {connect_timeout:g}s connecting to {host}:{port}") from None
        except OSError as exc:
            raise KafkaConnectionError(
                f"could not connect to {host}:{port} ({_os_reason(exc)})") from None
        if security.uses_tls:
            stream = await _tls_handshake(stream, host, port, security,
                                          min(connect_timeout, request_timeout))
        conn = cls(stream, host, port, node_id=node_id, client_id=client_id,
                   request_timeout=request_timeout)
        nursery.start_soon(conn._read_loop)
        step, authenticating = "did not answer ApiVersions (is it a Kafka broker?)", False
        try:
            with trio.fail_after(min(connect_timeout, request_timeout)):
                await conn._negotiate()
                if security.sasl is not None and security.uses_sasl:
                    step = f"did not complete SASL {security.sasl.mechanism} authentication"
                    authenticating = True
                    conn._sasl = security.sasl
                    conn._session_started(await authenticate(conn, security.sasl))
        except trio.TooSlowError:
            await conn.aclose()
            raise KafkaConnectionError(
                f"{host}:{port} accepted the connection but {step}") from None
        except KafkaConnectionError as exc:
            await conn.aclose()
            if security.uses_tls and not authenticating and not conn.api_versions:
                # TLS 1.3 ends the handshake before the broker has checked our certificate:
                # its refusal shows only as the first read failing.
                raise KafkaConnectionError(
                    f"SSL handshake failed with {host}:{port}: the broker closed the "
                    f"connection after the handshake ({exc}); does the listener require a "
                    f"client certificate (ssl.keystore.location) it does not trust?") from None
            if authenticating:
                raise KafkaConnectionError(
                    f"{host}:{port} closed the connection during SASL authentication "
                    f"(is it a SASL listener?): {exc}") from None
            raise
        except BaseException:
            await conn.aclose()
            raise
        return conn

    def _session_started(self, lifetime_ms: int) -> None:
        """Note the session lifetime the broker gave and when to re-authenticate."""
        self.session_lifetime_ms = lifetime_ms
        self._reauthenticate_at = None if lifetime_ms <= 0 else \
            trio.current_time() + lifetime_ms / 1000 * random.uniform(*_REAUTH_WINDOW)

    async def _reauthenticate(self) -> None:
        """Re-authenticate now; called holding the send lock. Any failure (the broker's
        refusal, a timeout, a cancellation mid-exchange) fails the connection: the broker
        has closed it, or its frames are no longer where either side expects."""
        assert self._sasl is not None
        try:
            with trio.fail_after(self.request_timeout):
                lifetime = await authenticate(_Reauthentication(self), self._sasl)
        except BaseException as exc:
            reason = "timed out" if isinstance(exc, trio.TooSlowError) else \
                (str(exc) or type(exc).__name__)
            self._fail(KafkaConnectionError(
                f"SASL re-authentication with {self.address} failed ({reason})"))
            await trio.aclose_forcefully(self._stream)
            if isinstance(exc, Exception):
                # _fail has just set it (or kept an earlier failure): never None here.
                raise self._failure from None  # type: ignore[misc]
            raise
        self.reauthentications += 1
        self._session_started(lifetime)

    async def aclose(self) -> None:
        self._fail(KafkaConnectionError(f"connection to {self.address} was closed"))
        with trio.CancelScope(shield=True):
            with trio.move_on_after(_CLOSE_TIMEOUT):  # TLS's close_notify must not hang us
                await self._stream.aclose()
            if isinstance(self._stream, trio.SSLStream):
                await trio.aclose_forcefully(self._stream.transport_stream)

    def _fail(self, error: KafkaConnectionError) -> None:
        if self._failure is None:
            self._failure = error
        for slot in self._slots.values():
            if not slot.done.is_set():
                slot.error = self._failure
                slot.done.set()
        self._slots.clear()

    async def _read_loop(self) -> None:
        """Fill slots from response frames until the stream ends; never raises."""
        reason = "the broker closed the connection"
        try:
            while True:
                data = await self._stream.receive_some(1 << 16)
                if not data:
                    break
                self._frames.receive_data(data)
                while True:
                    frame = self._frames.next_frame()
                    if frame is NEED_DATA:
                        break
                    assert isinstance(frame, bytes)
                    if len(frame) < 4:
                        raise ProtocolError("response frame too short for a correlation id")
                    (cid,) = _CORRELATION.unpack_from(frame)
                    slot = self._slots.pop(cid, None)
                    if slot is not None:  # else: its request timed out and was forgotten
                        slot.frame = frame
                        slot.done.set()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            reason = f"the connection failed ({_broken_reason(exc)})"
        except ProtocolError as exc:
            reason = f"the broker sent bytes that are not a Kafka response ({exc})"
        except trio.Cancelled:
            reason = "the client was closed"
            raise
        finally:
            self._fail(KafkaConnectionError(f"lost connection to {self.address}: {reason}"))

    # -- versions ------------------------------------------------------------------------------

    async def _negotiate(self) -> None:
        api = APIS[ApiKey.API_VERSIONS]
        body = {"client_software_name": CLIENT_SOFTWARE_NAME,
                "client_software_version": CLIENT_SOFTWARE_VERSION}
        version = api.max_version
        for _ in range(2):
            frame = await self._roundtrip(ApiKey.API_VERSIONS, version, body, self.request_timeout)
            assert frame is not None
            # The error code is the body's first field in every version; with
            # UNSUPPORTED_VERSION the broker answers in v0, whatever we asked.
            code = _ERROR_CODE.unpack_from(frame, 4)[0] if len(frame) >= 6 else -1
            decode_version = 0 if code == ErrorCode.UNSUPPORTED_VERSION else version
            try:
                _, resp = decode_response(ApiKey.API_VERSIONS, decode_version, frame)
            except ProtocolError as exc:
                raise KafkaConnectionError(
                    f"{self.address} did not answer ApiVersions like a Kafka broker ({exc})"
                ) from None
            if resp.error_code == ErrorCode.UNSUPPORTED_VERSION:
                theirs = [k.max_version for k in resp.api_keys if k.api_key == ApiKey.API_VERSIONS]
                version = min(version, theirs[0] if theirs else 0)
                continue
            if resp.error_code:
                raise KafkaError(resp.error_code, f"ApiVersions failed at {self.address}")
            self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            return
        raise KafkaConnectionError(f"could not agree on an ApiVersions version with {self.address}")

    def supports(self, api_key: int) -> bool:
        """Whether the broker serves some version of `api_key` that we also declare."""
        try:
            self.pick_version(api_key)
        except KafkaError:
            return False
        return True

    def pick_version(self, api_key: int, min_version: int | None = None,
                     max_version: int | None = None) -> int:
        """min(our highest, the broker's highest) within the caller's bounds."""
        api = APIS[api_key]
        low = max(api.min_version, min_version if min_version is not None else 0)
        high = api.max_version if max_version is None else min(api.max_version, max_version)
        theirs = self.api_versions.get(int(api_key))
        if theirs is None:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION,
                             f"the broker at {self.address} does not support {api.name}")
        version = min(high, theirs[1])
        if version < max(low, theirs[0]):
            raise KafkaError(
                ErrorCode.UNSUPPORTED_VERSION,
                f"the broker at {self.address} serves {api.name} v{theirs[0]}-{theirs[1]}, "
                f"this client needs v{low}-{high}")
        return version

    # -- requests ------------------------------------------------------------------------------

    # Only a request sent without expecting a response gives None: the overloads let the
    # callers that expect one read the body without a check for None.
    @overload
    async def request(self, api_key: int, body: Mapping[str, Any], *,
                      version: int | None = None, min_version: int | None = None,
                      max_version: int | None = None, timeout: float | None = None,
                      expect_response: Literal[True] = True) -> Container: ...
    @overload
    async def request(self, api_key: int, body: Mapping[str, Any], *,
                      version: int | None = None, min_version: int | None = None,
                      max_version: int | None = None, timeout: float | None = None,
                      expect_response: bool) -> Container | None: ...
    async def request(self, api_key: int, body: Mapping[str, Any], *,
                      version: int | None = None, min_version: int | None = None,
                      max_version: int | None = None, timeout: float | None = None,
                      expect_response: bool = True) -> Container | None:
        """Send one request and return the decoded response body.

        `expect_response=False` is for Produce with acks=0, which the broker never answers:
        it returns None once the request is written. Raises KafkaConnectionError,
        KafkaTimeoutError, KafkaError(UNSUPPORTED_VERSION); error codes inside the body are the
        caller's to read, since most responses carry one per topic or partition.
        """
        pending = await self.start_request(api_key, body, version=version,
                                           min_version=min_version, max_version=max_version,
                                           timeout=timeout, expect_response=expect_response)
        return await pending.response()

    async def start_request(self, api_key: int, body: Mapping[str, Any], *,
                            version: int | None = None, min_version: int | None = None,
                            max_version: int | None = None, timeout: float | None = None,
                            expect_response: bool = True) -> "PendingRequest":
        """Write one request now; await `.response()` on the result later.

        Requests written one after another reach the broker in that order, which is what lets
        a producer pipeline several batches of one partition without reordering them.
        """
        if version is None:
            version = self.pick_version(api_key, min_version, max_version)
        timeout = self.request_timeout if timeout is None else timeout
        deadline = trio.current_time() + timeout
        cid, slot = await self._write(api_key, version, body, timeout, expect_response)
        return PendingRequest(self, api_key, version, cid, slot, deadline, timeout)

    async def _roundtrip(self, api_key: int, version: int, body: Mapping[str, Any],
                         timeout: float) -> bytes:
        cid, slot = await self._write(api_key, version, body, timeout, True)
        assert slot is not None
        return await self._wait(api_key, cid, slot, trio.current_time() + timeout, timeout)

    async def _write(self, api_key: int, version: int, body: Mapping[str, Any],
                     timeout: float, expect_response: bool) -> tuple[int, _Slot | None]:
        if self._failure is not None:
            raise self._failure
        cid = next(self._ids) & 0x7FFFFFFF
        frame = encode_request(api_key, version, cid, self.client_id, body)
        slot = _Slot() if expect_response else None
        if slot is not None:
            self._slots[cid] = slot
        try:
            with trio.fail_after(timeout):
                async with self._send_lock:
                    if self._failure is not None:
                        raise self._failure
                    if self._reauthenticate_at is not None \
                            and trio.current_time() >= self._reauthenticate_at:
                        await self._reauthenticate()
                    await self._send_frame(frame)
        except trio.TooSlowError:
            self._slots.pop(cid, None)
            raise KafkaTimeoutError(f"{APIS[api_key].name} request to {self.address} timed "
                                    f"out after {timeout:g}s") from None
        except BaseException:
            self._slots.pop(cid, None)
            raise
        return cid, slot

    async def _send_frame(self, frame: bytes) -> None:
        """Write one whole frame; the caller holds the send lock."""
        try:
            await self._stream.send_all(frame)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self._fail(KafkaConnectionError(
                f"lost connection to {self.address} ({str(exc) or type(exc).__name__})"))
            # _fail has just set it (or kept an earlier failure): never None here.
            raise self._failure from None  # type: ignore[misc]
        except BaseException:
            # Cancelled mid-frame: the stream is no longer aligned on frames.
            self._fail(KafkaConnectionError(
                f"connection to {self.address} abandoned mid-request"))
            raise

    async def _request_holding_lock(self, api_key: int, body: Mapping[str, Any], *,
                                    version: int | None = None, min_version: int | None = None,
                                    max_version: int | None = None) -> Container:
        """One request and its decoded response, written by a task that holds the send lock
        (re-authentication's SASL requests)."""
        if version is None:
            version = self.pick_version(api_key, min_version, max_version)
        cid = next(self._ids) & 0x7FFFFFFF
        slot = self._slots[cid] = _Slot()
        try:
            await self._send_frame(encode_request(api_key, version, cid, self.client_id, body))
        except BaseException:
            self._slots.pop(cid, None)
            raise
        timeout = self.request_timeout
        frame = await self._wait(api_key, cid, slot, trio.current_time() + timeout, timeout)
        try:
            return decode_response(api_key, version, frame)[1]
        except ProtocolError as exc:
            raise KafkaConnectionError(
                f"could not read the {APIS[api_key].name} v{version} response from "
                f"{self.address}: {exc}") from None

    async def _wait(self, api_key: int, cid: int, slot: _Slot, deadline: float,
                    timeout: float) -> bytes:
        try:
            with trio.move_on_at(deadline):
                await slot.done.wait()
        finally:
            if not slot.done.is_set():
                self._slots.pop(cid, None)
        if not slot.done.is_set():
            raise KafkaTimeoutError(f"{APIS[api_key].name} request to {self.address} timed "
                                    f"out after {timeout:g}s")
        if slot.error is not None:
            raise slot.error
        assert slot.frame is not None
        return slot.frame


class PendingRequest:
    """A request already written; `response()` waits for (and decodes) its answer."""

    def __init__(self, conn: BrokerConnection, api_key: int, version: int, cid: int,
                 slot: _Slot | None, deadline: float, timeout: float) -> None:
        self.conn, self.api_key, self.version = conn, api_key, version
        self._cid, self._slot = cid, slot
        self._deadline, self._timeout = deadline, timeout

    async def response(self) -> Container | None:
        """The decoded body; None for a request that gets no response (acks=0)."""
        if self._slot is None:
            return None
        frame = await self.conn._wait(self.api_key, self._cid, self._slot, self._deadline,
                                      self._timeout)
        try:
            return decode_response(self.api_key, self.version, frame)[1]
        except ProtocolError as exc:
            raise KafkaConnectionError(
                f"could not read the {APIS[self.api_key].name} v{self.version} response from "
                f"{self.conn.address}: {exc}") from None


class _Reauthentication:
    """The connection as sasl_client.authenticate sees it while re-authenticating: its
    requests are written by the task already holding the send lock."""

    def __init__(self, conn: BrokerConnection) -> None:
        self._conn = conn
        self.address = conn.address

    async def request(self, api_key: int, body: Mapping[str, Any], *,
                      version: int | None = None, min_version: int | None = None,
                      max_version: int | None = None) -> Container:
        return await self._conn._request_holding_lock(
            api_key, body, version=version, min_version=min_version, max_version=max_version)
