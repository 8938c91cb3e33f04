"""A TCP proxy in front of one broker that can cut chosen links: a network partition between
two brokers on one machine, without iptables.

The broker advertises the proxy's address, so every connection to it — clients and the other
brokers' fetchers — goes through here. The proxy reads the first request of each connection
(ApiVersions, which every Kafka client sends first) for its client id; a follower's fetcher
names itself `broker-N-fetcher-L`. `cut(client_id_prefix)` blackholes matching connections,
open ones included: bytes stop flowing both ways, as when a link drops packets; `heal()`
closes the blackholed connections so their owners reconnect, and forwards again.
"""
from __future__ import annotations

import socket
import struct
import threading


def _client_id(first_frame: bytes) -> str:
    """The client id of a request frame (size, api key, version, correlation id, id)."""
    if len(first_frame) < 14:
        return ""
    (length,) = struct.unpack_from(">h", first_frame, 12)
    return first_frame[14:14 + max(0, length)].decode(errors="replace")


class _Link:
    def __init__(self, client: socket.socket, upstream: socket.socket, client_id: str) -> None:
        self.client = client
        self.upstream = upstream
        self.client_id = client_id
        self.blackholed = False

    def close(self) -> None:
        for s in (self.client, self.upstream):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


class LinkProxy:
    def __init__(self, target_port: int, port: int = 0) -> None:
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.create_server(("127.0.0.1", port))
        self.port = self.listener.getsockname()[1]
        self._cut: set[str] = set()
        self._links: list[_Link] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _blocked(self, client_id: str) -> bool:
        return any(client_id.startswith(prefix) for prefix in self._cut)

    def cut(self, client_id_prefix: str) -> None:
        with self._lock:
            self._cut.add(client_id_prefix)
            for link in self._links:
                if self._blocked(link.client_id):
                    link.blackholed = True

    def heal(self) -> None:
        with self._lock:
            self._cut.clear()
            dead = [link for link in self._links if link.blackholed]
            self._links = [link for link in self._links if not link.blackholed]
        for link in dead:
            link.close()

    def close(self) -> None:
        self.listener.close()
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            link.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._open, args=(client,), daemon=True).start()

    def _open(self, client: socket.socket) -> None:
        try:
            first = b""
            while len(first) < 4 or len(first) < 4 + struct.unpack_from(">i", first)[0]:
                chunk = client.recv(65536)
                if not chunk:
                    client.close()
                    return
                first += chunk
            upstream = socket.create_connection(self.target, timeout=5)
            upstream.settimeout(None)
        except OSError:
            client.close()
            return
        link = _Link(client, upstream, _client_id(first))
        with self._lock:
            link.blackholed = self._blocked(link.client_id)
            self._links.append(link)
        if not link.blackholed:
            try:
                upstream.sendall(first)
            except OSError:
                link.close()
                return
        threading.Thread(target=self._pump, args=(link, client, upstream), daemon=True).start()
        threading.Thread(target=self._pump, args=(link, upstream, client), daemon=True).start()

    def _pump(self, link: _Link, src: socket.socket, dst: socket.socket) -> None:
        """Forward src -> dst; while the link is blackholed, what arrives is dropped."""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if link.blackholed:
                    continue
                dst.sendall(data)
        except OSError:
            pass
        finally:
            link.close()
