"""kill -9 of the node's metadata service loses no acknowledged change: the service is a real
process (`python -m pybroker.node.metadata_service`), killed while clients write, started
again on the same data dir, three rounds."""
from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kazoo.exceptions import KazooException

from pybroker.node.metadata_client import NodeZooKeeperClient

WRITERS = 4


@contextmanager
def _service(sock: Path, data: Path) -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen([sys.executable, "-m", "pybroker.node.metadata_service", str(sock),
                             str(data), "--session-timeout-ms", "2000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()  # printed once it listens
        assert line.startswith("metadata service ready"), line + proc.stderr.read()
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def _write_until_failure(connect: str, writer: int, start: int, acked: list[int],
                         ready: threading.Event) -> None:
    """Create /acked/w<writer>-<i> and set /counters/w<writer> to i (conditional on its
    version, i - 1), recording i once both were answered, until the service dies; `ready`
    after 20 of them."""
    zk = NodeZooKeeperClient(hosts=connect, timeout=2)
    zk.start(timeout=10)
    try:
        i = start
        while True:
            try:
                zk.create(f"/acked/w{writer}-{i}", str(i).encode(), makepath=True)
                zk.set(f"/counters/w{writer}", str(i).encode(), version=i - 1)
            except KazooException:  # ConnectionLoss: the kill
                return
            acked.append(i)
            if i - start >= 20:
                ready.set()
            i += 1
    finally:
        ready.set()
        zk.stop()
        zk.close()


def test_kill_9_of_the_service_loses_no_acknowledged_change(tmp_path: Path) -> None:
    sock, data = tmp_path / "meta.sock", tmp_path / "data"
    connect = f"unix:{sock}"
    acked: dict[int, list[int]] = {w: [] for w in range(WRITERS)}
    for round_ in range(3):
        with _service(sock, data) as proc:
            zk = NodeZooKeeperClient(hosts=connect)
            zk.start(timeout=10)
            try:
                for w in range(WRITERS):  # everything acknowledged before, still there
                    for i in acked[w][1:]:  # [0]: the counter's creation
                        assert zk.get(f"/acked/w{w}-{i}")[0] == str(i).encode(), (round_, w, i)
                    if acked[w]:
                        data_, stat = zk.get(f"/counters/w{w}")
                        # the last acknowledged set, or one more that was applied unanswered
                        assert stat.version in (acked[w][-1], acked[w][-1] + 1), (w, stat)
                        acked[w].append(stat.version)  # where this round goes on
                    else:
                        zk.create(f"/counters/w{w}", b"0", makepath=True)
                        acked[w].append(0)
            finally:
                zk.stop()
                zk.close()
            starts = {w: acked[w][-1] + 1 for w in range(WRITERS)}
            for w in range(WRITERS):
                _drop_unacked(connect, w, starts[w])
            readies, threads = [], []
            for w in range(WRITERS):
                ready = threading.Event()
                thread = threading.Thread(target=_write_until_failure,
                                          args=(connect, w, starts[w], acked[w], ready))
                thread.start()
                readies.append(ready)
                threads.append(thread)
            for ready in readies:
                assert ready.wait(30)
            proc.kill()  # kill -9, writers mid-request
            for thread in threads:
                thread.join(30)
                assert not thread.is_alive()
    total = sum(len(a) for a in acked.values())
    assert total > 3 * WRITERS * 20


def _drop_unacked(connect: str, writer: int, start: int) -> None:
    """A create answered by nobody (the kill came before its answer) may have been applied:
    remove it, so the writer's next create of that name does not fail."""
    zk = NodeZooKeeperClient(hosts=connect)
    zk.start(timeout=10)
    try:
        if zk.exists(f"/acked/w{writer}-{start}") is not None:
            zk.delete(f"/acked/w{writer}-{start}")
    finally:
        zk.stop()
        zk.close()
