"""The fault kit's network (pybroker/testing/network.py): a cut stops traffic between two
members both ways while the test process still reaches both, a heal restores it, and
nothing of a network is left once it is closed or its interpreter exits without closing it."""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest

from pybroker.testing.network import Network, leftovers, pause, resume, why_not

pytestmark = pytest.mark.skipif(why_not() is not None, reason=str(why_not()))

_SERVE = ("import socket\n"
          "s = socket.create_server(('0.0.0.0', 7000))\n"
          "while True:\n"
          "    c, _ = s.accept(); c.sendall(b'hi'); c.close()\n")


def _greeting(net: Network, src: str | None, dst: str) -> str:
    """What `src`'s namespace (None: this process) reads from `dst`'s server, or the error."""
    probe = (f"import socket\ntry:\n"
             f"    print(socket.create_connection(('{net.address(dst)}', 7000), timeout=2)"
             f".recv(2).decode())\nexcept OSError as e:\n    print(type(e).__name__)\n")
    argv = [sys.executable, "-c", probe]
    out = subprocess.run(argv if src is None else net.command(src, argv), capture_output=True,
                         text=True, timeout=30)
    return out.stdout.strip() or out.stderr.strip()


def _state(pid: int) -> str:
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]


def _until(done: Callable[[], bool], what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture
def net() -> Iterator[Network]:
    with Network(["a", "b", "c"]) as network:
        servers = [subprocess.Popen(network.command(m, [sys.executable, "-c", _SERVE]))
                   for m in network.members]
        try:
            deadline = time.monotonic() + 20
            while any(_greeting(network, None, m) != "hi" for m in network.members):
                assert time.monotonic() < deadline, "the members' servers did not start"
                time.sleep(0.1)
            yield network
        finally:
            for server in servers:
                server.kill()
                server.wait(10)


def test_a_partition_cuts_members_both_ways_and_heals(net: Network) -> None:
    assert _greeting(net, "b", "a") == "hi"
    net.partition({"a"}, {"b"})
    assert _greeting(net, "b", "a") != "hi"
    assert _greeting(net, "a", "b") != "hi"
    assert _greeting(net, "c", "a") == "hi"  # c was in neither group
    assert _greeting(net, None, "a") == "hi"  # clients still reach both sides
    net.heal()
    assert _greeting(net, "b", "a") == "hi" and _greeting(net, "a", "b") == "hi"
    assert net.cuts == set()


def test_isolate_cuts_one_member_from_every_other(net: Network) -> None:
    net.isolate("c")
    assert net.cuts == {frozenset({"c", "a"}), frozenset({"c", "b"})}
    assert {_greeting(net, m, "c") for m in ("a", "b")} != {"hi"}
    assert _greeting(net, "c", "a") != "hi"
    assert _greeting(net, "a", "b") == "hi"
    assert _greeting(net, None, "c") == "hi"
    with pytest.raises(ValueError):
        net.partition({"a"}, {"a", "b"})


def test_a_member_runs_under_its_own_pid_so_signals_reach_it(net: Network) -> None:
    proc = subprocess.Popen(net.command("a", [sys.executable, "-c", "import time; time.sleep(60)"]))
    try:
        _until(lambda: "python" in open(f"/proc/{proc.pid}/comm").read(),  # ip execs it
               "ip netns exec to exec the program")
        pause(proc.pid)
        _until(lambda: _state(proc.pid) == "T", "the member to stop")
        resume(proc.pid)
        _until(lambda: _state(proc.pid) != "T", "the member to run again")
    finally:
        proc.kill()
        proc.wait(10)


def test_nothing_is_left_after_close_or_an_exit_without_it() -> None:
    with Network(["x", "y"]) as network:
        network.isolate("x")
        assert len(leftovers(network.tag)) == 5  # two namespaces, two veths, the bridge
    assert leftovers(network.tag) == []
    # An interpreter that never closes its network: atexit does.
    made = subprocess.run([sys.executable, "-c",
                           "from pybroker.testing.network import Network, leftovers\n"
                           "n = Network(['x']).create()\n"
                           "print(n.tag, len(leftovers(n.tag)))\n"],
                          capture_output=True, text=True, timeout=60)
    tag, count = made.stdout.split()
    assert int(count) == 3, made.stderr
    assert leftovers(tag) == []
