"""Wire building blocks for Kafka's protocol, as construct classes that also compile.

Kafka has two encodings for every variable-length value: the classic one (int16 lengths for
strings, int32 for bytes and arrays, -1 for null) and the compact one used from an API's first
flexible version (unsigned varint of N+1, 0 for null). Every class here is null-safe: a length
below -1, or larger than the bytes left in the frame, fails at once and never allocates by it.

Each class implements construct's plain `_parse`/`_build` (the readable reference, used to
report paths) and `_emitparse`/`_emitbuild` (the compiled fast path); both call the helper
functions below, so the two cannot disagree.
"""
from __future__ import annotations

import struct
import uuid
from io import BytesIO
from typing import Any

from construct import Construct, ConstructError

__all__ = [
    "WireError", "INT8", "INT16", "INT32", "INT64", "UINT16", "UINT32", "FLOAT64", "BOOL",
    "FrameReader", "GatherIO", "Records", "UVARINT", "VARINT", "VARLONG", "UUID", "String", "Bytes", "Array",
    "read_uvarint", "write_uvarint", "uvarint_bytes", "zigzag_decode", "zigzag_encode",
]


class WireError(ConstructError):
    """Malformed bytes: a bad length, a short read, bad UTF-8, a varint too long."""


# -- helpers shared by the plain and compiled paths --------------------------------------------

def remaining(io: BytesIO | FrameReader) -> int:
    """Bytes left after the position. Seeking to the end and back costs two calls; the
    frame's size through `getbuffer()` would copy it: a BytesIO over a request's bytes shares
    them until a buffer is exported, and then unshares them (a 1 MB Produce frame copied
    once more on every request that has a length to check)."""
    here = io.tell()
    end = io.seek(0, 2)
    io.seek(here)
    return end - here


def read_exact(io: BytesIO | FrameReader, n: int) -> bytes:
    data = io.read(n)
    if len(data) != n:
        raise WireError(f"needed {n} bytes, {len(data)} left")
    return data


def read_uvarint(io: BytesIO | FrameReader) -> int:
    shift = 0
    result = 0
    read = io.read
    while True:
        b = read(1)
        if not b:
            raise WireError("varint runs past the end of the frame")
        byte = b[0]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result
        shift += 7
        if shift > 63:
            raise WireError("varint longer than 10 bytes")


def uvarint_bytes(value: int) -> bytes:
    if value < 0:
        raise WireError(f"unsigned varint cannot hold {value}")
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def write_uvarint(io: BytesIO, value: int) -> None:
    io.write(uvarint_bytes(value))


def zigzag_decode(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def zigzag_encode(n: int, bits: int = 64) -> int:
    return (n << 1) ^ (n >> (bits - 1))


def read_length(io: BytesIO | FrameReader, compact: bool, fmt: struct.Struct) -> int:
    """Length or count of the next value; -1 for null. Never trusts a length past the frame."""
    if compact:
        n = read_uvarint(io) - 1
    else:
        n = fmt.unpack(read_exact(io, fmt.size))[0]
    if n < -1:
        raise WireError(f"negative length {n}")
    if n > remaining(io):
        raise WireError(f"length {n} exceeds the {remaining(io)} bytes left")
    return n


def write_length(io: BytesIO, n: int, compact: bool, fmt: struct.Struct) -> None:
    if compact:
        io.write(uvarint_bytes(n + 1))
    else:
        io.write(fmt.pack(n))


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def read_string(io: BytesIO | FrameReader, compact: bool, nullable: bool) -> str | None:
    n = read_length(io, compact, _I16)
    if n < 0:
        if not nullable:
            raise WireError("null in a non-nullable string")
        return None
    try:
        return read_exact(io, n).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WireError(f"bad UTF-8: {exc}") from None


def write_string(io: BytesIO, value: str | None, compact: bool, nullable: bool) -> None:
    if value is None:
        if not nullable:
            raise WireError("None for a non-nullable string")
        write_length(io, -1, compact, _I16)
        return
    data = value.encode("utf-8")
    if not compact and len(data) > 0x7FFF:
        raise WireError("string longer than 32767 bytes")
    write_length(io, len(data), compact, _I16)
    io.write(data)


def read_bytes(io: BytesIO | FrameReader, compact: bool, nullable: bool) -> bytes | None:
    n = read_length(io, compact, _I32)
    if n < 0:
        if not nullable:
            raise WireError("null in non-nullable bytes")
        return None
    return read_exact(io, n)


def read_records(io: BytesIO | FrameReader, compact: bool, nullable: bool,
                 ) -> bytearray | memoryview | None:
    """A record set as a mutable buffer: the broker patches base offsets and leader epochs
    into it in place. From a frame received in place (a `FrameReader`), a writable view of
    the frame's own bytes, not copied at all; from bytes, a copy, made once, here."""
    n = read_length(io, compact, _I32)
    if n < 0:
        if not nullable:
            raise WireError("null in non-nullable records")
        return None
    if type(io) is FrameReader:
        view = io.take(n)
        if len(view) != n:
            raise WireError(f"needed {n} bytes of records")
        return view
    buf = bytearray(n)
    if io.readinto(buf) != n:
        raise WireError(f"needed {n} bytes of records")
    return buf


def write_bytes(io: BytesIO, value: Any, compact: bool, nullable: bool) -> None:
    if value is None:
        if not nullable:
            raise WireError("None for non-nullable bytes")
        write_length(io, -1, compact, _I32)
        return
    write_length(io, len(value), compact, _I32)
    if type(io) is GatherIO and (len(value) >= GatherIO.LARGE or type(value) is FileRegion):
        io.gather(value)
    else:
        io.write(value)


class FileRegion:
    """`length` bytes at `offset` of an open file, to go to the socket as they are.

    A Fetch response can carry its records this way, so that the broker sends them from the
    segment file with os.sendfile instead of reading them into memory first. `source` owns the
    descriptor: `source.fileno()` gives it, or raises ValueError once the file is closed. Only
    `encode_parts` (GatherIO) accepts a region; `parts()` hands it out as one part.
    """

    __slots__ = ("source", "offset", "length")

    def __init__(self, source: Any, offset: int, length: int) -> None:
        self.source = source
        self.offset = offset
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return f"FileRegion({self.source!r}, offset={self.offset}, length={self.length})"


class FrameReader:
    """The reading half of BytesIO over a bytearray frame (one received in place, see
    `protocol.framing`), without copying it: BytesIO shares a bytes object but copies any
    other buffer it is given, a whole 1 MB Produce frame. `take` hands out a view of the
    frame's next bytes, writable, which `read_records` gives as a partition's records; the
    view keeps the frame alive, and the frame is never reused."""

    __slots__ = ("_view", "_pos", "_end")

    def __init__(self, frame: bytearray) -> None:
        self._view = memoryview(frame)
        self._pos = 0
        self._end = len(frame)

    def read(self, n: int = -1) -> bytes:
        pos = self._pos
        end = self._end if n < 0 else min(self._end, pos + n)
        self._pos = end
        return self._view[pos:end].tobytes()

    def readinto(self, buf: Any) -> int:
        with memoryview(buf) as out:
            got = self.take(len(out))
            out[:len(got)] = got
            return len(got)

    def take(self, n: int) -> memoryview:
        """The next `n` bytes (fewer at the end of the frame) as a view, skipped over."""
        pos = self._pos
        end = min(self._end, pos + n)
        self._pos = end
        return self._view[pos:end]

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = (0, self._pos, self._end)[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos


class GatherIO(BytesIO):
    """A BytesIO that keeps large byte values (record sets) as separate parts, uncopied.

    `parts()` gives the encoded message as a list of buffers for one gathered send, so a
    Fetch response's records go from the log to the socket without being copied into a frame.
    A `FileRegion` value is always a part of its own, whatever its size.
    """

    LARGE = 4096

    def __init__(self) -> None:
        super().__init__()
        self._parts: list[Any] = []

    def gather(self, data: Any) -> None:
        if self.tell():
            self._parts.append(self.getvalue())
            self.seek(0)
            self.truncate()
        self._parts.append(data)

    def parts(self) -> list[Any]:
        tail = self.getvalue()
        return self._parts + [tail] if tail else list(self._parts)


def read_uuid(io: BytesIO | FrameReader) -> uuid.UUID:
    return uuid.UUID(bytes=read_exact(io, 16))


def write_uuid(io: BytesIO, value: uuid.UUID | None) -> None:
    io.write(b"\x00" * 16 if value is None else value.bytes)


# -- construct classes -------------------------------------------------------------------------

_HELPERS = "from protocol.primitives import *\nfrom protocol import primitives as P"


class Fixed(Construct):
    """A big-endian fixed-width number."""

    def __init__(self, fmt: str, default: Any = 0) -> None:
        super().__init__()
        self.fmt = struct.Struct(">" + fmt)
        self.default = default
        self.flagbuildnone = False

    def _parse(self, stream: BytesIO, context: Any, path: str) -> Any:
        return self.fmt.unpack(read_exact(stream, self.fmt.size))[0]

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        try:
            stream.write(self.fmt.pack(obj))
        except struct.error as exc:
            raise WireError(str(exc)) from None
        return obj

    def _emitparse(self, code: Any) -> str:
        name = f"fixed_{code.allocateId()}"
        code.append(_HELPERS)
        code.append(f"{name} = struct.Struct({self.fmt.format!r})")
        return f"{name}.unpack(P.read_exact(io, {self.fmt.size}))[0]"

    def _emitbuild(self, code: Any) -> str:
        name = f"fixed_{code.allocateId()}"
        code.append(f"{name} = struct.Struct({self.fmt.format!r})")
        return f"io.write({name}.pack(obj))"


class _Bool(Fixed):
    def __init__(self) -> None:
        super().__init__("?", False)

    def _parse(self, stream: BytesIO, context: Any, path: str) -> Any:
        return read_exact(stream, 1) != b"\x00"

    def _emitparse(self, code: Any) -> str:
        code.append(_HELPERS)
        return "(P.read_exact(io, 1) != b'\\x00')"

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        stream.write(b"\x01" if obj else b"\x00")
        return obj

    def _emitbuild(self, code: Any) -> str:
        return "io.write(b'\\x01' if obj else b'\\x00')"


class _Call(Construct):
    """A value read and written by one helper pair with constant arguments."""

    def __init__(self, reader: str, writer: str, args: str = "", default: Any = None) -> None:
        super().__init__()
        self.reader, self.writer, self.args, self.default = reader, writer, args, default
        self._r = globals()[reader]
        self._w = globals()[writer]
        self._a = eval(f"({args}{',' if args else ''})") if args else ()
        self.flagbuildnone = False

    def _parse(self, stream: BytesIO, context: Any, path: str) -> Any:
        return self._r(stream, *self._a)

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        self._w(stream, obj, *self._a)
        return obj

    def _emitparse(self, code: Any) -> str:
        code.append(_HELPERS)
        sep = ", " if self.args else ""
        return f"P.{self.reader}(io{sep}{self.args})"

    def _emitbuild(self, code: Any) -> str:
        sep = ", " if self.args else ""
        return f"P.{self.writer}(io, obj{sep}{self.args})"


def _read_varint(io: BytesIO | FrameReader) -> int:
    return zigzag_decode(read_uvarint(io))


def _write_varint(io: BytesIO, value: int) -> None:
    io.write(uvarint_bytes(zigzag_encode(value)))


def _write_uvarint(io: BytesIO, value: int) -> None:
    io.write(uvarint_bytes(value))


INT8 = Fixed("b")
INT16 = Fixed("h")
INT32 = Fixed("i")
INT64 = Fixed("q")
UINT16 = Fixed("H")
UINT32 = Fixed("I")
FLOAT64 = Fixed("d", 0.0)
BOOL = _Bool()
UVARINT = _Call("read_uvarint", "_write_uvarint", default=0)
VARINT = _Call("_read_varint", "_write_varint", default=0)
VARLONG = VARINT
UUID = _Call("read_uuid", "write_uuid", default=uuid.UUID(int=0))


def String(compact: bool, nullable: bool) -> Construct:
    return _Call("read_string", "write_string", f"{compact}, {nullable}",
                 default=None if nullable else "")


def Records(compact: bool, nullable: bool) -> Construct:
    return _Call("read_records", "write_bytes", f"{compact}, {nullable}", default=None)


def Bytes(compact: bool, nullable: bool) -> Construct:
    return _Call("read_bytes", "write_bytes", f"{compact}, {nullable}",
                 default=None if nullable else b"")


class Array(Construct):
    """A counted array of `subcon`; -1 (classic) or 0 (compact) for null."""

    def __init__(self, subcon: Construct, compact: bool, nullable: bool) -> None:
        super().__init__()
        self.subcon, self.compact, self.nullable = subcon, compact, nullable
        self.default: list[Any] | None = None if nullable else []
        self.flagbuildnone = False

    def _parse(self, stream: BytesIO, context: Any, path: str) -> Any:
        n = read_length(stream, self.compact, _I32)
        if n < 0:
            if not self.nullable:
                raise WireError("null in a non-nullable array")
            return None
        return [self.subcon._parsereport(stream, context, f"{path}[{i}]") for i in range(n)]

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        if obj is None:
            if not self.nullable:
                raise WireError("None for a non-nullable array")
            write_length(stream, -1, self.compact, _I32)
            return obj
        write_length(stream, len(obj), self.compact, _I32)
        for item in obj:
            self.subcon._build(item, stream, context, path)
        return obj

    def _emitparse(self, code: Any) -> str:
        code.append(_HELPERS)
        fname = f"parse_array_{code.allocateId()}"
        code.append(f"""
            def {fname}(io, this):
                n = P.read_length(io, {self.compact}, P._I32)
                if n < 0:
                    if not {self.nullable}:
                        raise P.WireError("null in a non-nullable array")
                    return None
                return [{self.subcon._compileparse(code)} for _ in range(n)]
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code: Any) -> str:
        fname = f"build_array_{code.allocateId()}"
        code.append(f"""
            def {fname}(obj, io, this):
                if obj is None:
                    if not {self.nullable}:
                        raise P.WireError("None for a non-nullable array")
                    P.write_length(io, -1, {self.compact}, P._I32)
                    return obj
                P.write_length(io, len(obj), {self.compact}, P._I32)
                items = obj
                for obj in items:
                    {self.subcon._compilebuild(code)}
                return items
        """)
        return f"{fname}(obj, io, this)"
