"""A parser for the one JAAS line Kafka's `sasl.jaas.config` holds.

Kafka configures its login modules with a JAAS entry rather than properties of its own
(`org.apache.kafka.common.security.plain.PlainLoginModule required username="admin"
password="x" user_alice="alice-secret";`), and operators paste these lines from Kafka's docs,
so the broker reads them as Kafka does: a module class, a control flag, then `name=value`
options (values quoted or bare), ended by `;`. Only what a broker needs is taken; errors name
the position, never a value (values are passwords).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))')


class JaasError(ValueError):
    """A JAAS line that cannot be read; the message never quotes an option's value."""


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def short_module(self) -> str:
        return self.login_module.rsplit(".", 1)[-1]


def parse_jaas(text: str) -> JaasEntry:
    """The single login module of `text` (Kafka refuses more than one in sasl.jaas.config)."""
    tokens = _tokens(text)
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise JaasError("a JAAS entry is 'LoginModule flag name=\"value\" ... ;'")
    module, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in _FLAGS:
        raise JaasError(f"the control flag must be one of {', '.join(_FLAGS)}")
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i][0] != ";":
        if (i + 2 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1][0] != "="
                or tokens[i + 2][0] not in ("word", "quoted")):
            raise JaasError(f"option {len(options) + 1} of {module} is not name=value")
        options[tokens[i][1]] = tokens[i + 2][1]
        i += 3
    if i >= len(tokens):
        raise JaasError("a JAAS entry ends with ';'")
    if i + 1 != len(tokens):
        raise JaasError("sasl.jaas.config holds exactly one login module")
    return JaasEntry(module, flag, options)


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos, end = 0, len(text.rstrip())
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise JaasError(f"unexpected character at position {pos}")
        quoted, word, eq, semi = m.groups()
        if quoted is not None:
            out.append(("quoted", re.sub(r"\\(.)", r"\1", quoted)))
        elif word is not None:
            out.append(("word", word))
        elif eq is not None:
            out.append(("=", "="))
        elif semi is not None:
            out.append((";", ";"))
        pos = m.end()
    return out
