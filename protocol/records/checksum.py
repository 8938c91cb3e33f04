"""CRC32C, the checksum of a magic-2 record batch, bound on first use.

Callers reach it as `checksum.crc32c(data)` (an attribute of this module, never a name
imported from it), so that the first call can rebind it to the C function. Why lazily: the
crc32c package reads its own version from the installed distribution's metadata when it is
imported (importlib.metadata, ~15 ms), and a broker's start should not pay that before its
listeners bind when nothing has been produced or needs a check yet (issue #15 §3).
"""
from __future__ import annotations

from typing import Callable


def _first_call(data: bytes | bytearray | memoryview) -> int:
    global crc32c
    from crc32c import crc32c as native
    crc32c = native
    return native(data)


crc32c: Callable[..., int] = _first_call
