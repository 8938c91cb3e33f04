"""Reading a request body in place, for the decoders written by hand (produce_codec,
fetch_request): each reader takes the frame and a position and gives the value and the
position after it, with `struct.unpack_from` on the frame itself (no BytesIO, no bytes
object a field).

They read the common shape only. Anything else raises `Irregular` (or IndexError,
struct.error, UnicodeDecodeError at the frame's end or on bad bytes: `IRREGULAR` names them
all), and the caller hands the frame to the schema, which decides what is wrong and says so.
"""
from __future__ import annotations

import struct
from typing import Any

__all__ = ["Irregular", "IRREGULAR", "uvarint_at", "length_at", "count_at", "string_at",
           "no_tags_at"]


class Irregular(Exception):
    """Not the common shape: the schema decodes the frame (and names what is wrong)."""


# What a hand decoder may raise on a frame it does not take.
IRREGULAR = (Irregular, IndexError, struct.error, UnicodeDecodeError)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def uvarint_at(buf: Any, pos: int) -> tuple[int, int]:
    """An unsigned varint; IndexError past the end of `buf`."""
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    result, shift = byte & 0x7F, 7
    while True:
        pos += 1
        byte = buf[pos]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos + 1
        shift += 7
        if shift > 63:
            raise Irregular


def length_at(buf: Any, pos: int, flexible: bool, classic: struct.Struct) -> tuple[int, int]:
    """A length or count, -1 for null (compact: a varint of N+1; classic: `classic`)."""
    if flexible:
        n, pos = uvarint_at(buf, pos)
        return n - 1, pos
    return classic.unpack_from(buf, pos)[0], pos + classic.size


def count_at(buf: Any, pos: int, flexible: bool) -> tuple[int, int]:
    """An array's count (int32 classic); a null array, or more entries than bytes left, is
    the schema's to judge."""
    n, pos = length_at(buf, pos, flexible, _I32)
    if n < 0 or n > len(buf) - pos:
        raise Irregular
    return n, pos


def string_at(buf: Any, pos: int, flexible: bool, nullable: bool = False,
              ) -> tuple[str | None, int]:
    """A string (None for a null one where `nullable`)."""
    n, pos = length_at(buf, pos, flexible, _I16)
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise Irregular
    if pos + n > len(buf):
        raise Irregular
    return str(buf[pos:pos + n], "utf-8"), pos + n


def no_tags_at(buf: Any, pos: int) -> int:
    """An empty tagged-field section; a non-empty one is the schema's to read."""
    if buf[pos]:
        raise Irregular
    return pos + 1
