"""The ZooKeeper service side of issue #11: the test fixture's server, the scripts in bin/
(start, stop, shell) and their messages when ZooKeeper is missing or misused."""
from __future__ import annotations

import logging
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest
from kazoo.client import KazooClient

from pybroker.testing.zookeeper import (
    ZooKeeperNotInstalled, ZooKeeperProcess, four_letter_word, free_port, run_zookeeper, serving,
)

BIN = Path(__file__).resolve().parents[2] / "bin"


@pytest.fixture
def zookeeper(own_zookeeper: ZooKeeperProcess) -> ZooKeeperProcess:
    """These tests stop, kill and restart the server and read its port and files: a server of
    each test's own, not a chroot of the session's (tests/cluster/conftest.py)."""
    return own_zookeeper


@pytest.fixture
def kazoo(zookeeper: ZooKeeperProcess) -> Iterator[KazooClient]:
    client = _client(zookeeper)
    yield client
    client.stop()
    client.close()


def _client(zookeeper: ZooKeeperProcess) -> KazooClient:
    client = KazooClient(hosts=zookeeper.connect, timeout=5.0)
    client.start(timeout=15)
    return client


def test_a_client_creates_and_reads_a_znode(kazoo: KazooClient) -> None:
    kazoo.create("/brokers/ids/1", b'{"port":9092}', makepath=True)
    data, stat = kazoo.get("/brokers/ids/1")
    assert (data, stat.version) == (b'{"port":9092}', 0)
    assert kazoo.get_children("/brokers/ids") == ["1"]


def test_an_ephemeral_node_goes_with_its_session(zookeeper: ZooKeeperProcess,
                                                 kazoo: KazooClient) -> None:
    owner = _client(zookeeper)
    owner.create("/controller", b"1", ephemeral=True)
    assert kazoo.exists("/controller") is not None
    owner.stop()  # closes the session: ZooKeeper deletes its ephemeral nodes at once
    owner.close()
    assert kazoo.exists("/controller") is None


def test_the_session_timeout_range_follows_the_short_tick(zookeeper: ZooKeeperProcess) -> None:
    """With tickTime=500 the server grants sessions of 1 s to 10 s (2 to 20 ticks), so tests
    can expire a broker's session quickly; a timeout outside is clamped, not refused."""
    assert "Mode: standalone" in four_letter_word("127.0.0.1", zookeeper.port, "srvr")
    for asked_s, granted_ms in ((0.2, 1000), (6.0, 6000), (60.0, 10000)):
        assert _negotiated_timeout_ms(zookeeper, asked_s) == granted_ms


def _negotiated_timeout_ms(zookeeper: ZooKeeperProcess, asked_s: float) -> int:
    """The session timeout the server granted, as kazoo logs it (it keeps it nowhere else)."""
    records: list[logging.LogRecord] = []
    logger = logging.getLogger(f"test.kazoo.{asked_s}")
    logger.setLevel(1)
    logger.propagate = False
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    client = KazooClient(hosts=zookeeper.connect, timeout=asked_s, logger=logger)
    client.start(timeout=15)
    client.stop()
    client.close()
    logger.removeHandler(handler)
    found = [re.search(r"negotiated session timeout: (\d+)", r.getMessage()) for r in records]
    return next(int(m.group(1)) for m in found if m)


def test_restart_keeps_persistent_data(zookeeper: ZooKeeperProcess) -> None:
    client = _client(zookeeper)
    client.create("/config/topics/t", b"kept", makepath=True)
    client.stop()
    client.close()
    zookeeper.restart()
    client = _client(zookeeper)
    try:
        assert client.get("/config/topics/t")[0] == b"kept"
    finally:
        client.stop()
        client.close()


def test_kill_then_start_again_keeps_acknowledged_writes(zookeeper: ZooKeeperProcess) -> None:
    client = _client(zookeeper)
    client.create("/acked", b"x")
    client.stop()
    client.close()
    assert zookeeper.kill() == -9
    assert not zookeeper.is_ok()
    zookeeper.start()
    client = _client(zookeeper)
    try:
        assert client.get("/acked")[0] == b"x"
    finally:
        client.stop()
        client.close()


# --- the scripts -----------------------------------------------------------------------------


def test_start_script_and_shell(zookeeper: ZooKeeperProcess, tmp_path: Path) -> None:
    """`bin/zookeeper-server-start.sh file` serves; `bin/zookeeper-shell.sh host:port get /x`
    prints the data. (The fixture's server is started by the script too; this one runs from
    a file written as a person would, Kafka's config/zookeeper.properties with another port
    and data dir.)"""
    zookeeper.stop()  # this test starts its own server through the script
    port = free_port()
    shipped = (BIN.parent / "config" / "zookeeper.properties").read_text()
    config = tmp_path / "zk.properties"
    config.write_text(shipped.replace("dataDir=/tmp/zookeeper", f"dataDir={tmp_path / 'data'}")
                      .replace("clientPort=2181", f"clientPort={port}")
                      + "4lw.commands.whitelist=ruok\n")
    with (tmp_path / "out").open("wb") as out:
        server = subprocess.Popen([str(BIN / "zookeeper-server-start.sh"), str(config)],
                                  stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_serving(port, server)
        shell = str(BIN / "zookeeper-shell.sh")
        created = subprocess.run([shell, f"127.0.0.1:{port}", "create", "/x", "hello"],
                                 capture_output=True, text=True, timeout=60)
        assert created.returncode == 0, created.stderr
        got = subprocess.run([shell, f"127.0.0.1:{port}", "get", "/x"],
                             capture_output=True, text=True, timeout=60)
        assert got.returncode == 0, got.stderr
        # zkCli's event thread prints the connection's watcher event ("WATCHER::", then
        # "WatchedEvent state:SyncConnected ...") while the main thread runs the command, so
        # those lines land before or after the data (CI saw after): the data is the last
        # line of the rest.
        lines = [line for line in got.stdout.splitlines()
                 if line.strip() and line != "WATCHER::" and not line.startswith("WatchedEvent ")]
        assert lines[-1] == "hello", got.stdout
    finally:
        server.kill()
        server.wait(10)


def _wait_serving(port: int, server: subprocess.Popen[bytes] | None = None,
               timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert server is None or server.poll() is None, "zookeeper-server-start.sh exited"
        if serving(port):
            return
        time.sleep(0.05)
    raise AssertionError(f"nothing serving on port {port}")


@pytest.mark.parametrize("script", ["zookeeper-server-start.sh", "zookeeper-shell.sh"])
def test_without_arguments_the_scripts_print_usage(script: str) -> None:
    done = subprocess.run([str(BIN / script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("USAGE: ") and done.stderr.count("\n") == 1


@pytest.mark.parametrize("args", [("zookeeper-server-start.sh", "zk.properties"),
                                  ("zookeeper-server-start.sh", "-daemon", "zk.properties"),
                                  ("zookeeper-shell.sh", "127.0.0.1:2181", "ls", "/")])
def test_missing_zookeeper_is_one_line(args: tuple[str, ...], tmp_path: Path) -> None:
    env = dict(os.environ, ZOOKEEPER_HOME=str(tmp_path / "nonexistent"),
               LOG_DIR=str(tmp_path / "logs"))
    done = subprocess.run([str(BIN / args[0]), *args[1:]], capture_output=True, text=True,
                          timeout=30, env=env)
    assert done.returncode == 127
    assert done.stderr == (f"zookeeper is not installed (no {tmp_path}/nonexistent/bin/"
                           "zkEnv.sh): apt-get install zookeeper\n")
    assert not (tmp_path / "logs").exists()  # nothing was started


def test_the_fixture_reports_a_missing_zookeeper(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """What the `zookeeper` fixture turns into a skip naming bin/test."""
    monkeypatch.setenv("ZOOKEEPER_HOME", "/nonexistent")
    with pytest.raises(ZooKeeperNotInstalled, match=r"^zookeeper is not installed .*: "
                                                    r"apt-get install zookeeper$"):
        with run_zookeeper(tmp_path):
            pass


def test_daemon_and_stop_script(zookeeper: ZooKeeperProcess, tmp_path: Path) -> None:
    """-daemon returns at once with the server running in the background, its output in
    $LOG_DIR/zookeeper.out; zookeeper-server-stop.sh stops that server and no other."""
    zookeeper.stop()
    config = tmp_path / "zk.properties"
    config.write_text(zookeeper.config_file.read_text())  # same port, its own data dir below
    config.write_text(config.read_text().replace(str(zookeeper.data_dir), str(tmp_path / "d")))
    env = dict(os.environ, LOG_DIR=str(tmp_path / "logs"))
    started = subprocess.run([str(BIN / "zookeeper-server-start.sh"), "-daemon", str(config)],
                             capture_output=True, text=True, timeout=30, env=env)
    assert started.returncode == 0, started.stderr
    pid = int((tmp_path / "logs" / "zookeeper.pid").read_text())
    try:
        _wait_serving(zookeeper.port)
        stopped = subprocess.run([str(BIN / "zookeeper-server-stop.sh")], capture_output=True,
                                 text=True, timeout=30, env=env)
        assert stopped.returncode == 0, stopped.stderr
        _wait_gone(pid)
        assert "Reading configuration from" in (tmp_path / "logs" / "zookeeper.out").read_text()
        again = subprocess.run([str(BIN / "zookeeper-server-stop.sh")], capture_output=True,
                               text=True, timeout=30, env=env)
        assert again.returncode == 1 and again.stderr.startswith("No zookeeper server to stop")
    finally:
        _kill_if_running(pid)


def _wait_gone(pid: int, timeout: float = 20) -> None:
    """The daemon is not our child: it is gone when its /proc entry is, or is a zombie."""
    stat = Path(f"/proc/{pid}/stat")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return
        except FileNotFoundError:
            return
        time.sleep(0.05)
    raise AssertionError(f"pid {pid} still running")


def _kill_if_running(pid: int) -> None:
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass
