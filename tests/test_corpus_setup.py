"""The differential corpus's unobserved set-up (compat/differential/corpus.py), on both sides
of its retries: a transactional producer initialised on a real broker, and a case failed with
the last answer when no coordinator answers in 100 tries (it once went on with a str's missing
attribute, or with the -1 ids of an error answer)."""
from __future__ import annotations

import socket
import types
from pathlib import Path

import pytest

from compat.differential import corpus
from compat.differential.case import Case, Ctx
from compat.differential.target import CLOSED, Target
from protocol.api_keys import ApiKey
from tests.helpers import serving_broker


def _ctx(bootstrap: str) -> Ctx:
    case = Case(ApiKey.INIT_PRODUCER_ID, 3, "set-up", lambda ctx: None)
    return Ctx(case, Target("target", bootstrap, timeout=10.0), base_ts=0)


def test_a_transactional_producer_is_initialised_on_a_broker(tmp_path: Path) -> None:
    with serving_broker(tmp_path / "logs", transaction_state_log_replication_factor="1",
                        transaction_state_log_min_isr="1") as info:
        ctx = _ctx(f"{info.host}:{info.port}")
        try:
            producer_id, epoch = corpus.init_transactional(ctx, "corpus-set-up")
        finally:
            ctx.target.close()
    assert producer_id >= 0
    assert epoch == 0


def test_no_coordinator_in_100_tries_fails_the_case(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    # The corpus module's clock only: its 100 waits of 0.1 s are counted, not taken.
    monkeypatch.setattr(corpus, "time", types.SimpleNamespace(sleep=slept.append))
    with socket.socket() as bound:  # bound and never listening: every connect is refused
        bound.bind(("127.0.0.1", 0))
        ctx = _ctx(f"127.0.0.1:{bound.getsockname()[1]}")
        with pytest.raises(RuntimeError, match=f"not ready after 100 tries: {CLOSED}"):
            corpus.init_transactional(ctx, "corpus-set-up")
    assert slept == [0.1] * 100
