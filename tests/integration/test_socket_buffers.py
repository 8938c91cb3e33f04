"""socket.send.buffer.bytes and socket.receive.buffer.bytes reach the broker's sockets, as in
Kafka (SO_SNDBUF on each accepted socket, SO_RCVBUF on the listening one, which accepted
sockets inherit); -1 leaves both to the operating system's autotuning. And
socket.listen.backlog.size is the listening socket's backlog."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from protocol.api_keys import ApiKey
from tests.helpers import serving_broker
from tests.integration.raw import RawConnection


def _broker_end(client: socket.socket) -> tuple[int, int]:
    """(SO_SNDBUF, SO_RCVBUF) of the broker's end of `client`'s connection. The broker runs in
    this process, so its socket is one of our descriptors: the one whose address pair is the
    client's, reversed."""
    want = (client.getpeername(), client.getsockname())
    for name in os.listdir("/proc/self/fd"):
        try:
            sock = socket.fromfd(int(name), socket.AF_INET, socket.SOCK_STREAM)  # a dup
        except OSError:
            continue
        with sock:
            try:
                if (sock.getsockname(), sock.getpeername()) != want:
                    continue
            except OSError:
                continue
            return (sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
                    sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))
    raise AssertionError(f"no broker socket for {want}")


def _buffers(log_dir: Path, **overrides: str) -> tuple[int, int]:
    with serving_broker(log_dir, **overrides) as info, RawConnection(info.bootstrap) as conn:
        assert conn.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0  # accepted by now
        return _broker_end(conn.sock)


@pytest.mark.in_process("reads the broker's end of the connection among its own descriptors")
@pytest.mark.parametrize("send,receive", [(65536, 32768), (102400, 102400)])
def test_configured_buffer_sizes(tmp_path: Path, send: int, receive: int) -> None:
    sndbuf, rcvbuf = _buffers(tmp_path / "logs", socket_send_buffer_bytes=str(send),
                              socket_receive_buffer_bytes=str(receive))
    # Linux reports twice what was set (it counts its own bookkeeping); others report it.
    assert sndbuf in (send, 2 * send) and rcvbuf in (receive, 2 * receive)


@pytest.mark.in_process("reads the broker's end of the connection among its own descriptors")
def test_minus_one_keeps_the_system_default(tmp_path: Path) -> None:
    default = socket.socket()
    with default:
        os_send = default.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    sndbuf, _ = _buffers(tmp_path / "logs", socket_send_buffer_bytes="-1",
                         socket_receive_buffer_bytes="-1")
    assert sndbuf != 2 * 102400 and sndbuf >= os_send


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs iproute2's ss to read a backlog")
def test_listen_backlog(tmp_path: Path) -> None:
    """socket.listen.backlog.size is the listening socket's accept queue length (what ss shows
    as Send-Q of a listening socket)."""
    with serving_broker(tmp_path / "logs", socket_listen_backlog_size="7") as info:
        out = subprocess.run(["ss", "-ltnH", f"sport = :{info.port}"], capture_output=True,
                             text=True, check=True).stdout.split()
        assert out[0] == "LISTEN" and out[2] == "7", out
