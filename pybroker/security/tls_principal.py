"""From a client certificate to a principal, as Kafka names TLS clients.

Kafka's principal for a TLS client is `User:` + the certificate subject's distinguished name in
RFC 2253 form (what Java's `X500Principal.getName()` prints: the last RDN first, e.g.
`CN=alice,OU=eng,O=acme`), passed through `ssl.principal.mapping.rules`. ACLs are written
against that string, so it must come out exactly as Kafka's does; Python's ssl module gives the
subject as parsed attribute names instead, turned back into Java's form here.

The rules are Kafka's `SslPrincipalMapper` syntax: a comma-separated list of
`RULE:pattern/replacement/[L|U]` and `DEFAULT`; the first rule whose pattern matches the whole
DN gives the name, with Java's `$1` back references; no rule matching fails the connection.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

# Java's X500Principal RFC 2253 keywords; other attributes are written as OID=#<DER hex>.
_KEYWORDS = {
    "commonName": "CN", "countryName": "C", "localityName": "L",
    "stateOrProvinceName": "ST", "organizationName": "O", "organizationalUnitName": "OU",
    "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID",
}
# Attributes Python names that Java prints by OID, with the DER string tag Java re-encodes.
_OIDS = {"emailAddress": ("1.2.840.113549.1.9.1", 0x16)}  # IA5String
_SPECIAL = set(',+"\\<>;')


def _escape(value: str) -> str:
    out = "".join("\\" + ch if ch in _SPECIAL else ch for ch in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def _der_hex(tag: int, value: str) -> str:
    body = value.encode()
    length = (bytes([len(body)]) if len(body) < 0x80
              else bytes([0x81, len(body)]) if len(body) < 0x100
              else bytes([0x82]) + len(body).to_bytes(2, "big"))
    return "#" + (bytes([tag]) + length + body).hex()


def _attribute(name: str, value: str) -> str:
    if name in _KEYWORDS:
        return f"{_KEYWORDS[name]}={_escape(value)}"
    if name in _OIDS:
        oid, tag = _OIDS[name]
        return f"{oid}={_der_hex(tag, value)}"
    return f"{name}={_escape(value)}"


def rfc2253(subject: tuple) -> str:
    """The DN of a subject as `ssl.SSLSocket.getpeercert()` gives it (RDNs in certificate
    order, each a tuple of (name, value) pairs), in Java's RFC 2253 form."""
    return ",".join("+".join(_attribute(name, value) for name, value in rdn)
                    for rdn in reversed(subject))


class NoMatchingRule(ValueError):
    """No ssl.principal.mapping.rules rule applies to a certificate's DN."""


# Kafka's rule grammar: DEFAULT, or RULE:pattern/replacement/ with an optional L or U; in the
# pattern and replacement, a backslash escapes the next character (so `\/` is a slash).
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_RULE_PARSER = re.compile(_RULE)


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        name = self.pattern.sub(_java_replacement(self.replacement, self.pattern.groups), dn)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


def _java_replacement(template: str, groups: int) -> Callable[[re.Match[str]], str]:
    """Java's `Matcher.replaceAll` template: `$n` is group n (a number larger than the groups
    is read as a shorter one followed by digits, and `$n` beyond every group stays literal, as
    Kafka escapes it), a backslash makes the next character literal."""
    pieces: list[str | int] = []
    i = 0
    while i < len(template):
        ch = template[i]
        if ch == "\\" and i + 1 < len(template):
            pieces.append(template[i + 1])
            i += 2
        elif ch == "$" and i + 1 < len(template) and template[i + 1].isdigit():
            j = i + 1
            number = int(template[j])
            j += 1
            while j < len(template) and template[j].isdigit() and \
                    number * 10 + int(template[j]) <= groups:
                number = number * 10 + int(template[j])
                j += 1
            if number > groups or template[i + 1] == "0" and groups == 0:
                pieces.append(template[i:j])
            else:
                pieces.append(number)
            i = j
        else:
            pieces.append(ch)
            i += 1
    return lambda match: "".join(
        (match.group(p) or "") if isinstance(p, int) else p for p in pieces)


class PrincipalMapper:
    """ssl.principal.mapping.rules, parsed once per listener."""

    def __init__(self, rules: str) -> None:
        self.rules: tuple[_Rule, ...] = tuple(_parse(text) for text in _split(rules)
                                              if text)

    def name(self, dn: str) -> str:
        """The principal name (without `User:`) for `dn`; NoMatchingRule when none applies."""
        for rule in self.rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise NoMatchingRule(f"No rules apply to {dn}")


def _split(rules: str) -> list[str]:
    return [match.group(1) for match in _RULE_SPLITTER.finditer(rules.strip())
            if match.group(0)]


def _parse(text: str) -> _Rule:
    match = _RULE_PARSER.match(text)
    if match is None or match.end() != len(text):
        raise ValueError(f"Invalid rule: {text}")
    if match.group(1):
        return _Rule(None)
    if match.group(2) is None:
        raise ValueError(f"Invalid rule: {text}")
    try:
        pattern = re.compile(match.group(2))
    except re.error as exc:
        raise ValueError(f"Invalid rule: {text} ({exc})") from None
    return _Rule(pattern, match.group(3), match.group(4))
