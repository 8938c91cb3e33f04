"""The step profile's bookkeeping (tests/bench/profile_steps.py): a waiting thread is not work."""
from __future__ import annotations

from pathlib import Path

from tests.bench.profile_steps import idle, shares, step_of

EPOLL = "EpollIOManager.get_events (trio/_core/_io_epoll.py:243)"
WORKER = "WorkerThread._work (trio/_core/_thread_cache.py:211)"
RUN = "unrolled_run (trio/_core/_run.py:2931)"
APPEND = "LogSegment.append (pybroker/storage/segment.py:413)"
HANDLE = "handle (pybroker/handlers/produce.py:90)"


def test_waits_are_idle_and_work_around_them_is_not() -> None:
    assert idle([RUN, EPOLL])
    assert idle(["Thread.run (threading.py:982)", WORKER])
    # trio's loop itself and a job a worker thread runs are work, even below those frames.
    assert not idle([RUN])
    assert not idle([WORKER, "fsync (pybroker/storage/segment.py:500)"])
    assert not idle([HANDLE, APPEND])


def test_shares_leave_idle_samples_out(tmp_path: Path) -> None:
    raw = tmp_path / "produce.txt"
    raw.write_text(f"{RUN};{EPOLL} 70\n{RUN};{HANDLE};{APPEND} 30\n{RUN};{HANDLE} 10\n"
                   f"Thread.run (threading.py:982);{WORKER} 40\n")
    share, busy = shares(raw)
    assert busy == 40
    assert share["append"] == 0.75 and share["handler"] == 0.25
    assert step_of([RUN, HANDLE, APPEND]) == "append"


def test_the_encoders_helpers_are_respond_not_decode() -> None:
    encode = "Message.encode_parts (protocol/schema.py:484)"
    assert step_of([HANDLE, encode, "GatherIO.__init__ (protocol/primitives.py:213)"]) \
        == "respond"
    assert step_of([encode, "write_length (protocol/primitives.py:102)"]) == "respond"
    assert step_of(["decode_request (protocol/codec.py:88)",
                    "read_exact (protocol/primitives.py:46)"]) == "decode"
