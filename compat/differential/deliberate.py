"""Differences pybroker keeps on purpose, each with its reason.

A rule is (case id glob, difference path glob, reason). A case whose every difference
matches a rule is `deliberate`; any other difference makes it `differs`, which the
regression test lets stand only as recorded. `FIXED` names the cases that differed until
pybroker was fixed (the fix's commit says what changed), for the report's counts.
"""
from __future__ import annotations

from fnmatch import fnmatchcase

RULES: list[tuple[str, str, str]] = [
    ("Produce v[012] *", "*",
     "Kafka 4 still advertises Produce v0-2 (librdkafka reads ApiVersions' minimum) but "
     "closes the connection on them (KIP-896); pybroker answers UNSUPPORTED_VERSION per "
     "partition: a refusal either way"),
    ("ApiVersions *", "*api_keys*",
     "the version ranges: each broker advertises what it implements (Kafka 4.1 has newer "
     "versions of several APIs); the APIs both serve are compared case by case"),
    ("* served", "served",
     "a version pybroker serves for older clients and Kafka 4.1 removed (KIP-896)"),
]

FIXED: dict[str, str] = {
}


def reason_for(case_id: str, path: str) -> str | None:
    for case_glob, path_glob, reason in RULES:
        if fnmatchcase(case_id, case_glob) and fnmatchcase(path, path_glob):
            return reason
    return None
