"""The stock clients as the integration tests drive them: compat's adapters (compat/clients),
the code the compatibility matrix runs, so each client's produce and consume is written once.

Every producer takes a list of `Rec` and writes them in order (`config` passes the client's
own settings, e.g. acks); every consumer reads whole partitions from the beginning without a
consumer group (assign + seek) and returns `Got` rows. kcat cannot set a record's timestamp,
and applies its `-H` headers to a whole invocation, so its producer runs once per run of
consecutive records with the same partition, headers and null-value mode.
"""
from __future__ import annotations

import time

from compat.base import Adapter, Got, Rec
from compat.clients import all_adapters
from compat.clients.kcat import KCAT

__all__ = ["ADAPTERS", "AIOKAFKA", "CLIENTS", "CODECS", "CONFLUENT", "KAFKA_PYTHON", "KCAT",
           "Got", "Rec", "check_same", "unsupported_codec"]

ADAPTERS: dict[str, Adapter] = all_adapters()
CLIENTS = ("kafka-python", "confluent-kafka", "aiokafka", "kcat")
KAFKA_PYTHON, CONFLUENT, AIOKAFKA = (ADAPTERS[name] for name in CLIENTS[:3])
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def unsupported_codec(client: str, codec: str) -> str | None:
    """Why `client` cannot produce with `codec` in this environment, or None."""
    return None if codec == "none" else ADAPTERS[client].cannot(f"codec:{codec}")


def check_same(sent: list[Rec], got: list[Got], *, exact_timestamps: bool = True) -> None:
    """Every record exactly once, per-partition order kept, offsets contiguous from 0."""
    now = int(time.time() * 1000)
    named = [r.partition for r in sent if r.partition is not None]
    assert len(named) == len(sent), "a record sent names no partition: nothing to compare it in"
    for p in sorted({*named, *(g.partition for g in got)}):
        want = [r for r in sent if r.partition == p]
        have = sorted((g for g in got if g.partition == p), key=lambda g: g.offset)
        assert [g.offset for g in have] == list(range(len(want))), (p, have)
        assert [(g.key, g.value, g.headers) for g in have] == \
            [(r.key, r.value, r.headers) for r in want], p
        for r, g in zip(want, have):
            if r.timestamp is not None and exact_timestamps:
                assert g.timestamp == r.timestamp, (r, g)
            else:
                assert abs(g.timestamp - now) < 300_000, (r, g)
