"""Reading Java `.properties` files, so a Kafka `server.properties` works unchanged.

The rules are those of `java.util.Properties.load`: `#` and `!` start comment lines; a key ends at
the first unescaped `=`, `:` or whitespace; a line ending in an odd number of backslashes carries
on onto the next line (whose leading whitespace is dropped); `\\t \\n \\r \\f \\uXXXX` are escapes
and any other escaped character stands for itself; the last occurrence of a key wins.

One difference: Java keeps trailing whitespace in a value, and Kafka then trims it when parsing
the value by type. We trim unescaped trailing whitespace here already, so a stray space after
`log.dirs=/data ` cannot become part of a path. Files are read as UTF-8 (falling back to
ISO-8859-1, Java's encoding for this format, when the bytes are not UTF-8).
"""
from __future__ import annotations

import os
import re

from pybroker.config.definitions import ConfigError

_NEWLINES = re.compile(r"\r\n|\r|\n")
_BLANKS = " \t\f"
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a properties file; OSError if it cannot be read, ConfigError for a bad escape."""
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text)


def parse_properties(text: str) -> dict[str, str]:
    """Parse properties text into an ordered dict of key → value (both unescaped)."""
    result: dict[str, str] = {}
    lines = _NEWLINES.split(text)
    index = 0
    while index < len(lines):
        line = lines[index].lstrip(_BLANKS)
        index += 1
        if not line or line[0] in "#!":
            continue  # a comment never continues onto the next line, even if it ends in "\"
        while _continues(line):
            line = line[:-1]
            if index >= len(lines):
                break
            line += lines[index].lstrip(_BLANKS)
            index += 1
        raw_key, raw_value = _split_key_value(line)
        key = _unescape(raw_key, raw_key, trim=False)
        result[key] = _unescape(raw_value, key, trim=True)
    return result


def _continues(line: str) -> bool:
    """True when the line ends in an odd number of backslashes (the last one is not escaped)."""
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    position = 0
    end = len(line)
    key_end = value_start = end
    while position < end:
        char = line[position]
        if char == "\\":
            position += 2
            continue
        if char in "=:":
            key_end, value_start = position, position + 1
            break
        if char in _BLANKS:
            key_end = position
            while position < end and line[position] in _BLANKS:
                position += 1
            if position < end and line[position] in "=:":
                position += 1
            value_start = position
            break
        position += 1
    while value_start < end and line[value_start] in _BLANKS:
        value_start += 1
    return line[:key_end], line[value_start:]


def _unescape(text: str, key: str, *, trim: bool) -> str:
    """Resolve escapes; with `trim`, drop trailing whitespace that was not itself escaped."""
    out: list[str] = []
    significant = 0
    position = 0
    while position < len(text):
        char = text[position]
        if char != "\\":
            out.append(char)
            position += 1
            if char not in _BLANKS:
                significant = len(out)
            continue
        if position + 1 >= len(text):
            position += 1  # a lone trailing backslash stands for nothing
            continue
        escaped = text[position + 1]
        if escaped == "u":
            digits = text[position + 2:position + 6]
            if not _HEX4.fullmatch(digits):
                raise ConfigError(key, text, "Malformed \\uxxxx encoding")
            out.append(chr(int(digits, 16)))
            position += 6
        else:
            out.append(_SIMPLE_ESCAPES.get(escaped, escaped))
            position += 2
        significant = len(out)
    joined = "".join(out[:significant] if trim else out)
    try:  # \uD83D\uDE00 arrives as two UTF-16 halves; join them into one character
        return joined.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        return joined
