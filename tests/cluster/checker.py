"""A Jepsen-style check of a replicated log: what producers were told against what consumers read.

After a run with faults, every acknowledged record must have been read back (acked ⊆ read:
no lost write), at the offset the producer was told (no renumbering), once (no duplicate),
and each partition must read in offset order with its values in the order they were sent
(no reordering). The checks follow Jepsen's Kafka/Redpanda analyses (lost-write,
inconsistent-offsets, duplicate, nonmonotonic-poll); records that were sent but never
acknowledged may or may not appear, as Kafka promises.
"""
from __future__ import annotations

import struct
from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class History:
    # value -> (partition, offset) for every acknowledged send
    acked: dict[bytes, tuple[int, int]] = field(default_factory=dict)
    # partition -> [(offset, value)] in the order consumed
    read: dict[int, list[tuple[int, bytes]]] = field(default_factory=lambda: defaultdict(list))
    # value -> send order, per partition (values name their sequence)
    sent_order: dict[bytes, int] = field(default_factory=dict)


def check(history: History) -> list[str]:
    """The anomalies found; an empty list is a pass."""
    problems: list[str] = []
    seen: dict[bytes, tuple[int, int]] = {}
    for partition, records in history.read.items():
        last_offset = -1
        last_seq = -1
        for offset, value in records:
            if offset <= last_offset:
                problems.append(f"nonmonotonic read in partition {partition}: {offset} after "
                                f"{last_offset}")
            last_offset = offset
            if value in seen:
                problems.append(f"duplicate: {value!r} at {seen[value]} and "
                                f"{(partition, offset)}")
            seen[value] = (partition, offset)
            seq = history.sent_order.get(value, -1)
            if value in history.acked and seq < last_seq:
                problems.append(f"reordered: {value!r} at {partition}/{offset} was sent "
                                "before a record read earlier")
            if value in history.acked:
                last_seq = max(last_seq, seq)
    for value, where in history.acked.items():
        got = seen.get(value)
        if got is None:
            problems.append(f"lost: {value!r} acknowledged at {where}, never read")
        elif got != where:
            problems.append(f"inconsistent offset: {value!r} acknowledged at {where}, read at "
                            f"{got}")
    return problems


def below_high_watermark(log: bytes, high_watermark: int) -> bytes:
    """The bytes of the record batches of `log` (a replica's segments, concatenated) whose
    last offset is below `high_watermark`: what every in-sync replica must hold alike.
    A batch header starts with its base offset (int64) and its length (int32, from the
    field after it); its last offset delta is at byte 23 of the batch."""
    end = 0
    while end + 12 <= len(log):
        (base,) = struct.unpack_from(">q", log, end)
        (length,) = struct.unpack_from(">i", log, end + 8)
        if end + 12 + length > len(log) or length < 49:
            break
        (last_delta,) = struct.unpack_from(">i", log, end + 23)
        if base + last_delta >= high_watermark:
            break
        end += 12 + length
    return log[:end]


def replicas_differ(logs: dict[int, bytes], high_watermark: int) -> list[str]:
    """Where the replicas' logs (broker -> bytes) differ below the high watermark, or one
    ends short of it; an empty list is a pass."""
    prefixes = {node: below_high_watermark(log, high_watermark) for node, log in logs.items()}
    problems = []
    longest = max(prefixes.values(), key=len, default=b"")
    for node, prefix in sorted(prefixes.items()):
        if prefix != longest:
            problems.append(f"broker {node}'s replica differs below the high watermark "
                            f"{high_watermark}: {len(prefix)} bytes against {len(longest)}")
    return problems
