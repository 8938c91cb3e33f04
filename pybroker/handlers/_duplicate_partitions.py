"""A topic-partition named twice in one Produce or Fetch: answered once, as Kafka does.

Kafka collects a request's partitions into a map keyed by topic-partition before it acts, so
a partition named twice is read or written once, with the last entry's data, and appears
once in the answer, in its first entry's place (Java's LinkedHashMap.put). Clients never
send duplicates; matching Kafka keeps a buggy one from seeing two answers for one partition.
"""
from __future__ import annotations

from collections.abc import Sequence

from construct import Container


def merge_duplicates(topics: Sequence[Container], name: str, partitions: str,
                     index: str) -> Sequence[Container]:
    """`topics` with each (topic, partition) once: the request unchanged (the common case,
    checked without copying) or merged."""
    seen: set[str] = set()
    for topic in topics:
        parts = topic[partitions]
        if topic[name] in seen or (len(parts) > 1
                                   and len({p[index] for p in parts}) < len(parts)):
            break
        seen.add(topic[name])
    else:
        return topics
    merged: dict[str, dict[int, Container]] = {}
    for topic in topics:
        by_index = merged.setdefault(topic[name], {})
        for p in topic[partitions]:
            by_index[p[index]] = p
    return [Container({name: topic, partitions: list(by_index.values())})
            for topic, by_index in merged.items()]
