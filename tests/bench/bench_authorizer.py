"""What one authorization decision costs with 1,000 ACLs, and the check a request pays with no
authorizer at all (issue #13).

Not a test (pytest does not collect `bench_*.py`); run it by hand:

    .venv/bin/python tests/bench/bench_authorizer.py

A Produce to one topic asks `authorize(WRITE, TOPIC, name)` once (once per topic it writes);
the figures are the best of five repeats of 20,000 decisions, for 1,000 LITERAL and for 1,000
PREFIXED topic bindings spread over 50 principals, the asked-for one among them.
"""
from __future__ import annotations

import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from protocol.acl_operations import AclOperation as Op  # noqa: E402
from pybroker.security.acl.authorizer import Authorizer  # noqa: E402
from pybroker.security.acl.model import (  # noqa: E402
    AclBinding, AclPermission, PatternType, ResourceType,
)


def authorizer(pattern: PatternType, count: int = 1000) -> Authorizer:
    suffix = "-" if pattern == PatternType.PREFIXED else ""
    bindings = [AclBinding(ResourceType.TOPIC, f"topic-{i}{suffix}", pattern, f"User:u{i % 50}",
                           "*", Op.WRITE if i % 2 else Op.READ, AclPermission.ALLOW)
                for i in range(count - 1)]
    bindings.append(AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice",
                               "*", Op.WRITE, AclPermission.ALLOW))
    return Authorizer(bindings=bindings)


def per_call(fn, number: int) -> float:  # type: ignore[no-untyped-def]
    return min(timeit.repeat(fn, number=number, repeat=5)) / number


def main() -> None:
    for pattern in (PatternType.LITERAL, PatternType.PREFIXED):
        auth = authorizer(pattern)
        assert auth.authorize("User:alice", "127.0.0.1", Op.WRITE, ResourceType.TOPIC, "orders")
        seconds = per_call(lambda: auth.authorize("User:alice", "127.0.0.1", Op.WRITE,
                                                  ResourceType.TOPIC, "orders"), 20_000)
        print(f"1,000 {pattern.name} bindings: {seconds * 1e6:.2f} us per decision")

    class Services:
        authorizer = None
    services = Services()
    seconds = per_call(lambda: services.authorizer is not None, 1_000_000)
    print(f"no authorizer: {seconds * 1e9:.0f} ns per request (`services.authorizer is None`)")


if __name__ == "__main__":
    main()
