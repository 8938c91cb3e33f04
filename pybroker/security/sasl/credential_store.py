"""Where SCRAM credentials live: beside a single broker's metadata, durable across restarts.

A single broker keeps them in its first log dir (`pybroker-scram-credentials.json`, next to
`pybroker-metadata.json`, replaced atomically), in the text form Kafka writes to ZooKeeper's
/config/users/<user> (`{"SCRAM-SHA-256": "salt=...,stored_key=...,server_key=...,
iterations=4096"}`), so the same reader serves both. Lookups are from memory: the exchange
asks for a credential in the middle of a request. `alter` writes the file (call it from a
worker thread; it fsyncs).

A ZooKeeper cluster keeps them where Kafka does, in /config/users/<user> beside the user's
quotas (`ZkScramCredentialStore`), so every broker authenticates every user: a write edits
the znode's SCRAM keys alone and notifies, and every broker learns of it through the watches
its metadata store already keeps on /config/users for quotas (the image's
`scram_credentials`), not through a watch of its own.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Iterable, Mapping

from pybroker.cluster.client_quotas import sanitize
from pybroker.cluster.zk_entity_config import change_entity_config
from pybroker.security.sasl.scram_credentials import MECHANISM_IDS, ScramCredential
from pybroker.storage.files import write_atomically

CREDENTIALS_FILE = "pybroker-scram-credentials.json"


def read_credentials_file(path: Path) -> dict[str, dict[str, ScramCredential]]:
    """User -> mechanism -> credential as `LocalScramCredentialStore` keeps them in `path`
    (none when it does not exist); shared with the node's import of the file
    (pybroker/node/metadata_import.py). A file that is not what `_persist` writes raises
    ValueError, KeyError or TypeError."""
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    return {user: {m: ScramCredential.from_kafka(text) for m, text in mechanisms.items()}
            for user, mechanisms in data["users"].items()}


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
        self._users = read_credentials_file(self.path)

    def _persist(self, users: Mapping[str, Mapping[str, ScramCredential]],
                 touched: set[str]) -> None:
        data = {"version": 1, "users": {u: {m: c.to_kafka() for m, c in ms.items()}
                                        for u, ms in users.items()}}
        write_atomically(self.path, json.dumps(data, indent=1))


class ZkScramCredentialStore(ScramCredentialStore):
    """A ZooKeeper cluster's credentials. `zk`: the broker's kazoo client (or the in-memory
    one); `initial`: the image's `scram_credentials` at start. `apply_delta` (a metadata
    listener) replaces them whenever the store publishes an image."""

    def __init__(self, zk: Any, initial: Mapping[str, Mapping[str, str]]) -> None:
        super().__init__()
        self.zk = zk
        self._replace(initial)

    def _replace(self, texts: Mapping[str, Mapping[str, str]]) -> None:
        users = {}
        for user, mechanisms in texts.items():
            parsed = {}
            for mechanism, text in mechanisms.items():
                if mechanism in MECHANISM_IDS:
                    try:
                        parsed[mechanism] = ScramCredential.from_kafka(text)
                    except (ValueError, KeyError):
                        continue  # a hand-written znode with a bad value: not a user
            if parsed:
                users[user] = parsed
        with self._lock:
            self._users = users

    async def apply_delta(self, image: Any, delta: Any) -> None:
        self._replace(image.scram_credentials)

    def alter(self, upsertions: Iterable[tuple[str, str, ScramCredential]],
              deletions: Iterable[tuple[str, str]]) -> None:
        """Edit each user's znode (its SCRAM keys alone, on what ZooKeeper holds now, not on
        this broker's view) and take what was written as this broker's view of the user at
        once, so a Describe right after sees it before the watch has fired."""
        changes: dict[str, tuple[dict[str, str], set[str]]] = {}
        for user, mechanism in deletions:
            changes.setdefault(user, ({}, set()))[1].add(mechanism)
        for user, mechanism, credential in upsertions:
            changes.setdefault(user, ({}, set()))[0][mechanism] = credential.to_kafka()
        for user, (upsert, delete) in changes.items():
            written = change_entity_config(self.zk, f"users/{sanitize(user)}", lambda current: {
                **{k: v for k, v in current.items() if k not in delete and k not in upsert},
                **upsert})
            credentials = {m: ScramCredential.from_kafka(t) for m, t in written.items()
                           if m in MECHANISM_IDS}
            with self._lock:
                users = dict(self._users)
                if credentials:
                    users[user] = credentials
                else:
                    users.pop(user, None)
                self._users = users
