"""`python instr_broker.py ARGS...`: `python -m pybroker ARGS...` under callgrind, with a
control line to switch counting on and off around each phase of the CPU gate's workload.

The CPU gate (tests/bench/instructions.py) runs each build's broker with this script as its
entry point, under `valgrind --tool=callgrind --instr-atstart=no`: nothing is counted while
the broker starts, creates its topics or takes the warm-up requests. Before the first phase,
the gate sends `start` on the control socket (a Unix socket whose path is in
PYBROKER_GATE_CONTROL); this script switches instrumentation on and answers `ok`. After each
phase's last response, `dump NAME` writes what ran since the last dump as NAME. The control
thread waits in recv between the two, so what is counted is the broker's own work on the
phase's requests (all of its threads) and trio's wake-ups in those seconds.

It runs with the interpreter and the tree of the build under test (REF's venv for REF), so it
imports nothing from this repository: the broker it starts is the one on PYTHONPATH.

PYBROKER_GATE_SLOWDOWN=N (the gate's own test of itself, never set in a run that gates): every
request frame costs one more bytes slice every N KB before it is decoded, a per-record
slowdown (a record is 1 KB here) in the build this script starts.

PYBROKER_GATE_CLOCK_RATE: the broker's trio clock runs at this share of the wall's
(instructions.CLOCK_RATE says why).
"""
from __future__ import annotations

import ctypes
import os
import runpy
import socket
import sys
import threading

# sys.path[0] is this script's directory (tests/bench of the gate's tree); the broker must
# import from PYTHONPATH (the build under test), never from here.
sys.path.pop(0)


def _control(lib: ctypes.CDLL, path: str) -> None:
    """Serve the gate's `start` / `dump NAME` lines until it hangs up."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    with sock, sock.makefile("rwb", buffering=0) as stream:
        for line in stream:
            command, _, name = line.decode().strip().partition(" ")
            if command == "start":
                lib.gate_start()
            elif command == "dump":
                lib.gate_dump(name.encode())
            else:
                stream.write(f"unknown command {command!r}\n".encode())
                continue
            stream.write(b"ok\n")


def _slow_down(every_kb: int) -> None:
    """Make every request frame cost one bytes slice (~1,400 instructions) every `every_kb`
    KB before it is decoded: a Produce of 1 KB records pays about 1,400 / `every_kb` more
    instructions a record, a Fetch request (under 1 KB) one slice."""
    from pybroker.network import dispatch as module
    decode = module.decode_request

    def slow_decode(frame, *args, **kwargs):  # type: ignore[no-untyped-def]
        for start in range(0, len(frame), every_kb * 1024):
            frame[start:start + 8]
        return decode(frame, *args, **kwargs)

    module.decode_request = slow_decode


def _slow_clock(rate: float) -> None:
    """Run the broker's trio loop on a clock `rate` times as fast as the wall's."""
    import functools

    import trio
    import trio.testing
    trio.run = functools.partial(  # type: ignore[assignment]
        trio.run, clock=trio.testing.MockClock(rate=rate))


def main() -> None:
    lib = ctypes.CDLL(os.environ["PYBROKER_GATE_TOGGLE"])
    lib.gate_dump.argtypes = [ctypes.c_char_p]
    if not lib.gate_running_on_valgrind():
        sys.exit("instr_broker.py: not running under valgrind; it counts nothing without it")
    slowdown = int(os.environ.get("PYBROKER_GATE_SLOWDOWN", "0"))
    if slowdown:
        _slow_down(slowdown)
    rate = float(os.environ.get("PYBROKER_GATE_CLOCK_RATE", "1"))
    if rate != 1:
        _slow_clock(rate)
    threading.Thread(target=_control, args=(lib, os.environ["PYBROKER_GATE_CONTROL"]),
                     name="gate-control", daemon=True).start()
    sys.argv[0] = "pybroker"
    runpy.run_module("pybroker", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
