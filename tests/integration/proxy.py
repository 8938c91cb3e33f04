"""A TCP proxy in front of a broker, to break clients' connections at chosen moments.

The broker advertises the proxy's address (`advertised.listeners`), so every connection a
client opens — bootstrap and after metadata — goes through it. `drop_responses` swallows what
the broker sends while still forwarding requests (so a produce is appended but never
acknowledged); `sever()` closes every open connection, as a broker-side reset would.
"""
from __future__ import annotations

import socket
import threading


class Proxy:
    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.target: tuple[str, int] | None = None
        self.drop_responses = False
        self.connections_accepted = 0
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.target is None:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, upstream))
                self.connections_accepted += 1
            threading.Thread(target=self._pump, args=(client, upstream, False),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True),
                             daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, is_response: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if is_response and self.drop_responses:
                    continue
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def sever(self) -> int:
        """Close every open connection; the number closed."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for s in pair:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
        return len(pairs)

    def close(self) -> None:
        self._closed = True
        self.listener.close()
        self.sever()
