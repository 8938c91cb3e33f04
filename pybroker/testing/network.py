"""`Network`: a private network for a subprocess cluster, so a test can partition it.

Each member (a broker id, "zookeeper") runs in a network namespace of its own, joined to a
bridge in this process's namespace by a veth pair, with an address of its own on a /24
drawn at random from 10.0.0.0/8. The bridge holds the subnet's first address, so clients in
the test process reach every member directly, whatever partition is in force: as in
Jepsen's Kafka tests, the faults are between the servers, not between them and the clients.

A partition is a pair of `blackhole` routes, one in each namespace, to the other's address:
packets the kernel would send across the cut are dropped, a new connection across it fails
at once, and an open one stalls (its retransmissions go nowhere) until the cut heals or a
timeout of its owner closes it. Only `ip` (iproute2) is needed, no iptables or nftables,
and healing removes exactly the routes a cut added. `pause` and `resume` are SIGSTOP and
SIGCONT, the other half of Jepsen's nemesis.

Names carry a random tag of this run (`pbn<tag>...`), so runs side by side never meet, and
`leftovers()` finds what a run left behind. `close()` removes the bridge, the veth pairs and
the namespaces; it is registered with atexit on `create()`, so an interpreter that ends
without closing still cleans up (a SIGKILL of the test process cannot be caught: the names
say which run left them). Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2;
`why_not()` says what is missing.
"""
from __future__ import annotations

import atexit
import ipaddress
import os
import random
import re
import shutil
import signal
import subprocess
from collections.abc import Hashable, Iterable, Sequence

__all__ = ["Network", "ZOOKEEPER", "leftovers", "pause", "resume", "why_not"]

PREFIX = "pbn"  # every namespace and link a Network makes starts with this
ZOOKEEPER = "zookeeper"  # the member name `partition_from_zookeeper` cuts from


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


def why_not() -> str | None:
    """Why a Network cannot be made on this machine (None: it can)."""
    if shutil.which("ip") is None:
        return "network partitions need iproute2's `ip` on PATH"
    if os.geteuid() != 0:
        return "network partitions need root (network namespaces and veth pairs)"
    return None


def leftovers(tag: str = "") -> list[str]:
    """Namespaces and links of a Network (of the run `tag`, or any run) that still exist."""
    start = PREFIX + tag
    names = [line.split()[0] for line in _ip("netns", "list").stdout.splitlines()
             if line.startswith(start)]
    for line in _ip("-o", "link", "show").stdout.splitlines():
        link = line.split(":")[1].strip().split("@")[0]
        if link.startswith(start):
            names.append(link)
    return names


def pause(pid: int) -> None:
    """SIGSTOP: the process holds its sockets and sessions but answers nothing."""
    os.kill(pid, signal.SIGSTOP)


def resume(pid: int) -> None:
    os.kill(pid, signal.SIGCONT)


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 of 10/8 that no route of this namespace covers or falls in."""
    routes = []
    for line in _ip("-4", "route", "show", "table", "all").stdout.splitlines():
        match = re.search(r"(\d+\.\d+\.\d+\.\d+(?:/\d+)?)", line.split(" dev ")[0])
        if match and not line.startswith(("broadcast", "local")):
            routes.append(ipaddress.ip_network(match.group(1), strict=False))
    rng = random.SystemRandom()
    for _ in range(200):
        subnet = ipaddress.IPv4Network(f"10.{rng.randrange(256)}.{rng.randrange(256)}.0/24")
        if not any(subnet.overlaps(r) for r in routes if r.prefixlen > 0):
            return subnet
    raise RuntimeError("no free /24 in 10.0.0.0/8 for a test network")


class Network:
    """`with Network(["zookeeper", 1, 2, 3]) as net:` then `net.command(1, argv)` runs argv
    in member 1's namespace, at `net.address(1)`."""

    def __init__(self, members: Iterable[Hashable]) -> None:
        self.members = list(dict.fromkeys(members))
        if len(self.members) > 250:
            raise ValueError("a test network holds at most 250 members")
        self.tag = f"{random.SystemRandom().randrange(16 ** 6):06x}"
        self.bridge = f"{PREFIX}{self.tag}br"
        self._index = {m: i for i, m in enumerate(self.members)}
        self._subnet: ipaddress.IPv4Network | None = None
        self._cuts: set[tuple[Hashable, Hashable]] = set()  # (from, to): a route in `from`
        self._made: list[tuple[str, str]] = []  # ("netns"|"link", name), in creation order
        self._closed = False

    # -- names -------------------------------------------------------------------------------
    def namespace(self, member: Hashable) -> str:
        return f"{PREFIX}{self.tag}-{self._index[member]}"

    def _veth(self, member: Hashable) -> str:
        return f"{PREFIX}{self.tag}v{self._index[member]}"  # at most 15 characters

    def address(self, member: Hashable) -> str:
        """The member's address, the one it listens on and others (and clients) reach."""
        if self._subnet is None:
            raise RuntimeError("the network has not been created")
        return str(self._subnet[10 + self._index[member]])

    @property
    def host_address(self) -> str:
        """This process's address on the network (the bridge's)."""
        if self._subnet is None:
            raise RuntimeError("the network has not been created")
        return str(self._subnet[1])

    def command(self, member: Hashable, argv: Sequence[str]) -> list[str]:
        """argv run in the member's namespace; `ip netns exec` execs it, so the pid is the
        program's own and signals reach it."""
        return ["ip", "netns", "exec", self.namespace(member), *argv]

    # -- lifecycle ---------------------------------------------------------------------------
    def create(self) -> "Network":
        problem = why_not()
        if problem is not None:
            raise RuntimeError(problem)
        atexit.register(self.close)
        try:
            self._subnet = _free_subnet()
            self._make("link", self.bridge, "link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.host_address}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for member in self.members:
                ns, veth, peer = self.namespace(member), self._veth(member), "eth0"
                self._make("netns", ns, "netns", "add", ns)
                self._make("link", veth, "link", "add", veth, "type", "veth",
                           "peer", "name", peer, "netns", ns)
                _ip("link", "set", veth, "master", self.bridge)
                _ip("link", "set", veth, "up")
                _ip("-n", ns, "addr", "add", f"{self.address(member)}/24", "dev", peer)
                _ip("-n", ns, "link", "set", peer, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise
        return self

    def _make(self, kind: str, name: str, *args: str) -> None:
        _ip(*args)
        self._made.append((kind, name))

    def close(self) -> None:
        """Remove every namespace and link this network made (a process still inside a
        namespace keeps it alive, nameless, until it exits: stop members first)."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        for kind, name in reversed(self._made):
            if kind == "link":
                _ip("link", "del", name, check=False)
            else:
                _ip("netns", "del", name, check=False)
        self._made.clear()
        self._cuts.clear()

    def __enter__(self) -> "Network":
        return self.create()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- faults ------------------------------------------------------------------------------
    def _cut(self, a: Hashable, b: Hashable) -> None:
        for src, dst in ((a, b), (b, a)):
            if (src, dst) not in self._cuts:
                _ip("-n", self.namespace(src), "route", "add", "blackhole",
                    f"{self.address(dst)}/32")
                self._cuts.add((src, dst))

    def partition(self, *groups: Iterable[Hashable]) -> None:
        """Cut every member of each group from every member of the other groups; members
        in no group are untouched. Cuts add up until `heal()`."""
        sets = [set(g) for g in groups]
        for i, group in enumerate(sets):
            for other in sets[i + 1:]:
                if group & other:
                    raise ValueError(f"{group & other} is on both sides of a partition")
                for a in group:
                    for b in other:
                        self._cut(a, b)

    def isolate(self, member: Hashable) -> None:
        """Cut `member` from every other member (clients still reach it)."""
        self.partition({member}, set(self.members) - {member})

    def partition_from_zookeeper(self, member: Hashable) -> None:
        """Cut `member` from ZooKeeper (the member named ZOOKEEPER) only: it still reaches
        the other brokers and they it."""
        self.partition({member}, {ZOOKEEPER})

    def cut(self, a: Hashable, b: Hashable) -> None:
        """Cut the link between two members only."""
        self.partition({a}, {b})

    def heal(self) -> None:
        """Remove every cut."""
        for src, dst in sorted(self._cuts, key=repr):
            _ip("-n", self.namespace(src), "route", "del", "blackhole",
                f"{self.address(dst)}/32", check=False)
        self._cuts.clear()

    @property
    def cuts(self) -> set[frozenset[Hashable]]:
        """The links cut now, each as the pair of its members."""
        return {frozenset(pair) for pair in self._cuts}
