"""Where SCRAM credentials live: beside a single broker's metadata, durable across restarts.

A single broker keeps them in its first log dir (`pybroker-scram-credentials.json`, next to
`pybroker-metadata.json`, replaced atomically), in the text form Kafka writes to ZooKeeper's
/config/users/<user> (`{"SCRAM-SHA-256": "salt=...,stored_key=...,server_key=...,
iterations=4096"}`), so the same reader serves both. Lookups are from memory: the exchange
asks for a credential in the middle of a request. `alter` writes the file (call it from a
worker thread; it fsyncs).
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Iterable, Mapping

from pybroker.sasl.scram_credentials import ScramCredential
from pybroker.storage.files import write_atomically

CREDENTIALS_FILE = "pybroker-scram-credentials.json"


class ScramCredentialStore:
    """User → mechanism → credential, in memory; subclasses decide where it is kept."""

    def __init__(self) -> None:
        self._users: dict[str, dict[str, ScramCredential]] = {}
        self._lock = threading.Lock()

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> Mapping[str, Mapping[str, ScramCredential]]:
        return {u: dict(m) for u, m in self._users.items()}

    def alter(self, upsertions: Iterable[tuple[str, str, ScramCredential]],
              deletions: Iterable[tuple[str, str]]) -> None:
        """Apply one request's changes together (blocking: it persists them)."""
        with self._lock:
            users = {u: dict(m) for u, m in self._users.items()}
            touched: set[str] = set()
            for user, mechanism in deletions:
                users.get(user, {}).pop(mechanism, None)
                touched.add(user)
            for user, mechanism, credential in upsertions:
                users.setdefault(user, {})[mechanism] = credential
                touched.add(user)
            users = {u: m for u, m in users.items() if m}
            self._persist(users, touched)
            self._users = users

    def _persist(self, users: Mapping[str, Mapping[str, ScramCredential]],
                 touched: set[str]) -> None:
        pass  # in memory only (tests of the exchange)


class LocalScramCredentialStore(ScramCredentialStore):
    """A single broker's credentials, in a file of its first log dir."""

    def __init__(self, log_dir: Path) -> None:
        super().__init__()
        self.path = log_dir / CREDENTIALS_FILE
        if self.path.exists():
            data = json.loads(self.path.read_text())
            self._users = {user: {m: ScramCredential.from_kafka(text)
                                  for m, text in mechanisms.items()}
                           for user, mechanisms in data["users"].items()}

    def _persist(self, users: Mapping[str, Mapping[str, ScramCredential]],
                 touched: set[str]) -> None:
        data = {"version": 1, "users": {u: {m: c.to_kafka() for m, c in ms.items()}
                                        for u, ms in users.items()}}
        write_atomically(self.path, json.dumps(data, indent=1))
