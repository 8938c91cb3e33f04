"""Regular-expression subscriptions of KIP-848 consumer groups (SubscribedTopicRegex, v1).

Kafka compiles the pattern with RE2/J and matches whole topic names (`^topic` does not match
`topic-1` unless the pattern covers all of it). Python's `re` is close to RE2 for what RE2
accepts, but also accepts what RE2 refuses: lookarounds, backreferences, atomic groups,
possessive quantifiers and conditionals. Those are refused here, as Kafka refuses them
(INVALID_REGULAR_EXPRESSION), so a pattern accepted here is one Kafka accepts too.

Internal topics (a leading `__`) never match, as Kafka skips them.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Iterable

# What RE2 does not support: lookahead/lookbehind, atomic groups, conditionals, named
# backreferences, numbered backreferences, possessive quantifiers.
_NOT_RE2 = re.compile(r"\(\?(?:[=!]|<[=!]|>|\(|P=)|\\[1-9]|[*+?}]\+")


class InvalidRegex(ValueError):
    """Not a valid RE2 pattern: the message says why."""


@functools.lru_cache(maxsize=256)
def compile_re2(pattern: str) -> re.Pattern[str]:
    """The compiled pattern, or InvalidRegex."""
    unsupported = _NOT_RE2.search(pattern)
    if unsupported:
        raise InvalidRegex(f"`{unsupported.group()}` at {unsupported.start()} is not RE2 "
                           "syntax")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise InvalidRegex(str(exc)) from None


def matching(pattern: str, names: Iterable[str]) -> set[str]:
    """The topic names `pattern` matches whole, internal topics left out."""
    compiled = compile_re2(pattern)
    return {n for n in names if not n.startswith("__") and compiled.fullmatch(n)}
