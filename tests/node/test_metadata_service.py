"""What the node's metadata service adds to memory_zk's tree (whose semantics, through the
socket, tests/cluster/test_memory_zk.py checks on both): the wire, bad requests answered with
kazoo's errors, sessions that expire when their client stops pinging, a client that opens a new
session after losing one, the tree rebuilt from its log and snapshot, the broker's seam.
In-process (threads); the kill -9 of a service process is test_metadata_durability.py's."""
from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.exceptions import BadArgumentsError, ConnectionLoss, SessionExpiredError, \
    UnimplementedError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType

from pybroker.node import metadata_service
from pybroker.node.metadata_client import NodeZooKeeperClient, ProtocolError, decode, encode, \
    recv_frame, send_frame, socket_path_of
from pybroker.node.metadata_service import MetadataService
from tests.cluster.zk_events import Events


@pytest.fixture
def where(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "meta.sock", tmp_path / "data"


@pytest.fixture
def service(where: tuple[Path, Path]) -> Iterator[MetadataService]:
    svc = MetadataService(*where, session_timeout_ms=6000)
    svc.start()
    yield svc
    svc.close()


@pytest.fixture
def clients(service: MetadataService) -> Iterator[list[NodeZooKeeperClient]]:
    made: list[NodeZooKeeperClient] = []
    yield made
    for client in made:
        client.stop()
        client.close()


def _client(service: MetadataService, made: list[NodeZooKeeperClient],
            timeout: float = 6.0) -> NodeZooKeeperClient:
    client = NodeZooKeeperClient(hosts=service.connect, timeout=timeout)
    client.start(timeout=10)
    made.append(client)
    return client


def test_the_wire_form_keeps_bytes_and_rejects_garbage() -> None:
    value = [None, True, False, -2**63, "é", b"\x00\xff", {"k": [1, b""]}]
    assert decode(encode(value)) == value
    for bad in (b"", b"x", b"s\x00\x00\x00\x05ab", encode("a") + b"N"):
        with pytest.raises(ProtocolError):
            decode(bad)
    with pytest.raises(ValueError):
        socket_path_of("localhost:2181")
    with pytest.raises(ValueError):
        socket_path_of("unix:relative.sock")


def test_a_client_that_stops_pinging_loses_its_session(service: MetadataService,
                                                        clients: list) -> None:
    """A SIGSTOPped worker, as the service sees it: a connection that says nothing. Its
    ephemerals go after its timeout (here 300 ms asked), the others' watches fire, and its
    connection is closed so it learns it on waking."""
    watcher = _client(service, clients)
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.connect(str(service.socket_path))
    send_frame(silent, [1, "hello", {"timeout_ms": 300}])
    _, kind, granted = recv_frame(silent)
    assert kind == "ok" and granted["timeout_ms"] == 300
    send_frame(silent, [2, "create", ["/brokers/ids/7", b"{}", True, False, True]])
    assert recv_frame(silent) == [2, "ok", "/brokers/ids/7"]
    events = Events()
    assert watcher.exists("/brokers/ids/7", watch=events) is not None
    started = time.monotonic()
    assert events.wait(1, timeout=5) == [(EventType.DELETED, "/brokers/ids/7")]
    assert 0.25 < time.monotonic() - started < 3
    silent.settimeout(5)
    assert recv_frame(silent) is None  # closed by the service
    silent.close()
    assert granted["session"] not in service.sessions()
    # A live client keeps its session with pings (every third of it), past its timeout.
    alive = _client(service, clients, timeout=1.0)
    alive.create("/alive", ephemeral=True)
    time.sleep(2.5)
    assert watcher.exists("/alive") is not None and alive.state == "CONNECTED"


def _voluntary_switches(tid: int) -> int:
    """How many times thread `tid` of this process blocked (went to sleep) so far."""
    for line in Path(f"/proc/self/task/{tid}/status").read_text().splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    raise AssertionError(f"no voluntary_ctxt_switches for thread {tid}")


def test_an_idle_service_sleeps_until_there_is_work(service: MetadataService,
                                                    clients: list) -> None:
    """A node that serves nothing pays nothing for its store: the accept and reaper threads
    sleep until a worker connects or a session's deadline comes (here 6 s after its last
    ping), not on a tick. They polled every 0.2 s and every 0.05 s: 25 wakeups a second, a
    third of an idle node's (the supervisor's own loop another 5)."""
    alive = _client(service, clients)
    time.sleep(0.3)  # the reaper has seen the session and sleeps to its deadline
    tids = {t.name: t.native_id for t in service._threads}
    assert set(tids) == {"metadata-accept", "metadata-reap"}
    before = {name: _voluntary_switches(tid) for name, tid in tids.items() if tid}
    time.sleep(1.0)
    woke = {name: _voluntary_switches(tid) - n for name, n in before.items()
            for tid in [tids[name]] if tid}
    assert woke == {"metadata-accept": 0, "metadata-reap": 0}
    assert alive.exists("/") is not None and service.sessions() == [alive.client_id[0]]


def test_expire_gives_a_new_session_as_memory_zk_does(service: MetadataService,
                                                     clients: list) -> None:
    zk, other = _client(service, clients), _client(service, clients)
    states = Events()
    zk.add_listener(states)
    old = zk.client_id
    zk.create("/e", ephemeral=True)
    zk.expire()
    assert zk.client_id is not None and zk.client_id != old
    assert states.wait(2) == ["LOST", "CONNECTED"]
    assert other.exists("/e") is None and zk.exists("/e") is None


def test_a_connection_without_a_hello_is_dropped(where: tuple[Path, Path],
                                                 tmp_path: Path) -> None:
    svc = MetadataService(*where, session_timeout_ms=300)
    svc.start()
    try:
        mute = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        mute.connect(str(svc.socket_path))
        mute.settimeout(10)
        started = time.monotonic()
        assert mute.recv(1) == b""  # closed by the service
        assert time.monotonic() - started < 5
        mute.close()
        with pytest.raises(ValueError, match="more than a Unix socket takes"):
            MetadataService(tmp_path / ("s" * 120), tmp_path / "d2", 300).start()
    finally:
        svc.close()


def test_the_session_timeout_is_capped_by_the_service(service: MetadataService,
                                                      clients: list) -> None:
    assert _client(service, clients, timeout=60).session_timeout_ms == 6000
    assert _client(service, clients, timeout=0.001).session_timeout_ms == \
        metadata_service.MIN_SESSION_TIMEOUT_MS


def test_a_lost_session_is_replaced_and_the_listeners_hear_it(where: tuple[Path, Path]) -> None:
    """The service restarts (every session gone): the client says LOST, fails what was in
    flight, connects again on its own with a new session and says CONNECTED; the persistent
    znodes are still there, the ephemeral one is not."""
    svc = MetadataService(*where, session_timeout_ms=2000)
    svc.start()
    zk = NodeZooKeeperClient(hosts=svc.connect, timeout=2)
    try:
        zk.start()
        states = Events()
        zk.add_listener(states)
        zk.create("/kept", b"v")
        zk.create("/mine", ephemeral=True)
        old = zk.client_id
        svc.close()
        assert states.wait(1) == ["LOST"]
        with pytest.raises((SessionExpiredError, ConnectionLoss)):
            zk.get("/kept")
        svc = MetadataService(*where, session_timeout_ms=2000)
        svc.start()
        assert states.wait(2) == ["LOST", "CONNECTED"]
        assert zk.client_id is not None and zk.client_id != old
        assert zk.get("/kept")[0] == b"v" and zk.exists("/mine") is None
    finally:
        zk.stop()
        zk.close()
        svc.close()


def test_start_times_out_without_a_service(tmp_path: Path) -> None:
    zk = NodeZooKeeperClient(hosts=f"unix:{tmp_path / 'none.sock'}")
    with pytest.raises(KazooTimeoutError):
        zk.start(timeout=0.3)
    zk.close()


def test_one_service_per_socket_and_data_dir(service: MetadataService,
                                             where: tuple[Path, Path], tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="in use"):
        MetadataService(tmp_path / "other.sock", where[1], 6000).start()
    with pytest.raises(RuntimeError, match="already listens"):
        MetadataService(where[0], tmp_path / "other-data", 6000).start()


def test_bad_requests_get_errors_not_a_dead_service(service: MetadataService,
                                                    clients: list) -> None:
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.connect(str(service.socket_path))
    raw.settimeout(5)
    send_frame(raw, [1, "hello", {}])
    assert recv_frame(raw)[2]["timeout_ms"] == 6000  # nothing asked: the service's
    send_frame(raw, [2, "rename", ["/a", "/b"]])
    _, kind, error = recv_frame(raw)
    assert kind == "error" and isinstance(error, UnimplementedError)
    send_frame(raw, [3, "create", ["/a"]])  # too few arguments
    _, kind, error = recv_frame(raw)
    assert kind == "error" and isinstance(error, BadArgumentsError)
    send_frame(raw, [4, "create", ["/e", b"", True, False, False]])
    assert recv_frame(raw) == [4, "ok", "/e"]
    raw.sendall(b"\x00\x00\x00\x01Q")  # not a value: the connection goes
    assert recv_frame(raw) is None
    raw.close()
    assert service.tree is not None and service.tree.ephemeral_owners() == {}
    closing = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    closing.connect(str(service.socket_path))
    send_frame(closing, [1, "hello", {}])
    recv_frame(closing)
    send_frame(closing, [2, "create", ["/e", b"", True, False, False]])
    recv_frame(closing)
    send_frame(closing, [3, "close", []])  # answered once the ephemeral is gone
    assert recv_frame(closing) == [3, "ok", True] and service.tree.ephemeral_owners() == {}
    assert recv_frame(closing) is None
    closing.close()
    zk = _client(service, clients)
    with pytest.raises(BadArgumentsError):
        zk.get("no-slash")
    with pytest.raises(BadArgumentsError):
        zk.set("/still-serving", "not bytes")  # type: ignore[arg-type]
    assert zk.ensure_path("/still-serving")


def _tree(zk: NodeZooKeeperClient, path: str = "/") -> dict[str, tuple[bytes, int, int, int]]:
    out = {}
    for child in zk.get_children(path):
        full = f"{path.rstrip('/')}/{child}"
        data, stat = zk.get(full)
        out[full] = (data, stat.version, stat.czxid, stat.cversion)
        out.update(_tree(zk, full))
    return out


def test_the_tree_comes_back_from_its_snapshot_and_log(where: tuple[Path, Path],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Compaction every 7 entries: the tree after a restart is the one before (data,
    versions, czxids, cversions, so sequence numbers go on), ephemerals aside, and only the
    newest generation's files are left."""
    monkeypatch.setattr(metadata_service, "COMPACT_ENTRIES", 7)
    svc = MetadataService(*where, session_timeout_ms=2000)
    svc.start()
    zk = NodeZooKeeperClient(hosts=svc.connect)
    zk.start()
    for i in range(20):
        zk.create(f"/topics/t{i % 4}/p", str(i).encode(), makepath=True, sequence=True)
        zk.set(f"/topics/t{i % 4}", str(i).encode())
        zk.create(f"/ids/{i}", ephemeral=True, makepath=True)
    zk.delete("/topics/t3", recursive=True)
    max_czxid = max(zk.exists(f"/ids/{i}").czxid for i in range(20))
    zk.stop()  # the ephemerals go (the cversion of /ids counts their deletions too)
    zk.start()
    before = _tree(zk)
    assert "/ids/0" not in before and before["/ids"][3] == 40
    zk.stop()
    zk.close()
    svc.close()
    names = sorted(p.name for p in where[1].iterdir())
    assert len([n for n in names if n.startswith("metadata.log.")]) == 1, names
    assert len([n for n in names if n.startswith("metadata.snapshot.")]) == 1, names
    svc = MetadataService(*where, session_timeout_ms=2000)
    svc.start()
    zk = NodeZooKeeperClient(hosts=svc.connect)
    try:
        zk.start()
        assert _tree(zk) == before
        assert zk.create("/topics/t0/p", sequence=True) == "/topics/t0/p0000000005"
        zk.create("/ids/new", ephemeral=True)
        assert zk.exists("/ids/new").czxid > max_czxid  # a broker epoch never goes back
    finally:
        zk.stop()
        zk.close()
        svc.close()


def test_a_torn_last_entry_is_dropped_and_logged(where: tuple[Path, Path],
                                                 caplog: pytest.LogCaptureFixture) -> None:
    svc = MetadataService(*where, session_timeout_ms=2000)
    svc.start()
    zk = NodeZooKeeperClient(hosts=svc.connect)
    zk.start()
    zk.create("/a", b"1")
    zk.set("/a", b"2")
    zk.stop()
    zk.close()
    svc.close()
    (log_file,) = where[1].glob("metadata.log.*")
    whole = log_file.stat().st_size
    with open(log_file, "ab") as out:  # a kill in the middle of writing the next entry
        out.write(b"\x00\x00\x00\x40\x12\x34")
    caplog.set_level(logging.WARNING, logger="pybroker.node.metadata_service")
    svc = MetadataService(*where, session_timeout_ms=2000)
    svc.start()
    zk = NodeZooKeeperClient(hosts=svc.connect)
    try:
        zk.start()
        assert zk.get("/a")[0] == b"2"
        assert "dropping 6 bytes after entry" in caplog.text
        assert log_file.stat().st_size == whole
        zk.set("/a", b"3")
    finally:
        zk.stop()
        zk.close()
        svc.close()
    svc = MetadataService(*where, session_timeout_ms=2000)
    svc.start()
    assert svc.tree is not None and svc.tree.persistent()["/a"] == (b"3", 2)
    svc.close()


def test_a_log_that_cannot_be_written_stops_the_service(service: MetadataService,
                                                        clients: list) -> None:
    """The tree would be ahead of its log: no answer from it, every connection closed."""
    zk = _client(service, clients)
    zk.create("/a", b"1")
    assert service.tree is not None
    journal = service.tree.journal
    import os
    os.close(journal._fd)
    journal._fd = os.open(os.devnull, os.O_RDONLY)  # writes fail with EBADF
    with pytest.raises(ConnectionLoss):
        zk.set("/a", b"2")
    assert service.stopped.wait(10)
    assert isinstance(service.failure, OSError)


def test_a_broker_with_a_unix_connect_string_uses_the_service(service: MetadataService) -> None:
    """The seam of a node's workers: zookeeper.connect=unix:<socket> is the service, no
    chroot taken from the socket's path; the broker registers there, becomes the
    controller, creates a topic there, and its registration goes when it stops."""
    from pybroker.cluster.zk_session import split_chroot
    from pybroker.testing import Broker

    assert split_chroot(service.connect) == (service.connect, "")
    assert service.tree is not None
    with Broker(zookeeper_connect=service.connect, broker_id=5,
                offsets_topic_replication_factor=1) as broker:
        metadata = broker.server_info.broker.metadata
        deadline = time.monotonic() + 30  # its registration reaches its own image
        while 5 not in metadata.image.brokers:
            assert time.monotonic() < deadline, "broker 5 never saw its own registration"
            time.sleep(0.02)
        broker.create_topic("on-the-node", partitions=2)
        persistent = service.tree.persistent()
        assert "/brokers/topics/on-the-node/partitions/1/state" in persistent
        assert service.tree.ephemeral_owners().keys() >= {"/brokers/ids/5", "/controller"}
        assert broker.running
    assert service.tree.ephemeral_owners() == {}
