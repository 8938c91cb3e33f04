"""Where ACL bindings are kept, durably, and how every broker comes to know them.

One broker: `pybroker-acls.json` in the first log dir, beside the metadata file, replaced
atomically (fsynced, in a worker thread) before the authorizer sees the change — so an
answered CreateAcls/DeleteAcls survives a crash.

ZooKeeper: Kafka's znodes, one per resource pattern (`pybroker.security.acl.acl_json`), updated
conditionally on the version read, then a sequential notification under
`/kafka-acl-changes` (LITERAL) or `/kafka-acl-extended-changes` (PREFIXED) as Kafka writes.
Every broker watches both notification paths and, on any change, reads every ACL znode
again (Kafka reads only the resource named; a full read is simpler and ACLs are few). As
Kafka's ZkNodeChangeNotificationListener, whoever reads the notifications deletes those created
more than 15 minutes ago (`CHANGE_EXPIRATION_MS`): a broker that was away longer re-reads every
ACL at start anyway, so an old notification tells nobody anything, and without the purge the
change paths would grow by one znode per ACL change forever.
"""
from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import trio

from pybroker.security.acl import acl_json
from pybroker.security.acl.authorizer import Authorizer
from pybroker.security.acl.model import AclBinding, PatternType
from pybroker.storage.files import write_atomically

log = logging.getLogger(__name__)
ACL_FILE = "pybroker-acls.json"
CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # Kafka's ZkNodeChangeNotificationListener default


class LocalAclStore:
    def __init__(self, log_dir: Path, authorizer: Authorizer) -> None:
        self.path = Path(log_dir) / ACL_FILE
        self.authorizer = authorizer
        self._lock = trio.Lock()
        authorizer.replace(read_acl_file(self.path))

    async def change(self, add: Iterable[AclBinding] = (),
                     remove: Iterable[AclBinding] = ()) -> None:
        async with self._lock:
            bindings = (set(self.authorizer.bindings) | set(add)) - set(remove)
            data = {acl_json.path_of(p): json.loads(acl_json.encode(bs))
                    for p, bs in sorted(acl_json.by_pattern(bindings).items(),
                                        key=lambda kv: acl_json.path_of(kv[0]))}
            await trio.to_thread.run_sync(write_atomically, self.path,
                                          json.dumps(data, indent=1))
            self.authorizer.replace(bindings)

    async def run(self) -> None:
        """Nothing to follow on one broker."""


def read_acl_file(path: Path) -> list[AclBinding]:
    """The bindings `LocalAclStore` keeps in `path` (none when it does not exist); shared with
    the node's import of the file (pybroker/node/metadata_import.py). A file that is not what
    `change` writes raises ValueError, KeyError or TypeError."""
    if not path.exists():
        return []
    out: list[AclBinding] = []
    for znode, value in json.loads(path.read_text()).items():
        pattern = _pattern_of(znode)
        if pattern is not None:
            out.extend(acl_json.decode(pattern, json.dumps(value).encode()))
    return out


def _pattern_of(path: str) -> acl_json.Pattern | None:
    for root, ptype in ((acl_json.PREFIXED_ROOT, PatternType.PREFIXED),
                        (acl_json.LITERAL_ROOT, PatternType.LITERAL)):
        if path.startswith(root + "/"):
            type_name, _, name = path[len(root) + 1:].partition("/")
            rtype = acl_json.type_of(type_name)
            return None if rtype is None else (rtype, name, ptype)
    return None


class ZkAclStore:
    """`zk`: the broker's kazoo client (or the in-memory one), already started. `now_ms`:
    the wall clock notifications are aged by (ZooKeeper's ctime is wall-clock ms)."""

    def __init__(self, zk: Any, authorizer: Authorizer,
                 now_ms: Callable[[], float] = lambda: time.time() * 1000) -> None:
        self.zk = zk
        self.authorizer = authorizer
        self.now_ms = now_ms
        self._lock = trio.Lock()
        self._changed = trio.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        for path in (acl_json.LITERAL_CHANGES, acl_json.EXTENDED_CHANGES):
            zk.ensure_path(path)
        authorizer.replace(self._read_all(watch=False))

    # -- reading (worker thread) ---------------------------------------------------------------
    def _read_all(self, watch: bool) -> list[AclBinding]:
        from kazoo.exceptions import NoNodeError
        if watch:
            for path in (acl_json.LITERAL_CHANGES, acl_json.EXTENDED_CHANGES):
                self._purge(path, self.zk.get_children(path, watch=self._on_watch))
        out: list[AclBinding] = []
        for root, ptype in ((acl_json.LITERAL_ROOT, PatternType.LITERAL),
                            (acl_json.PREFIXED_ROOT, PatternType.PREFIXED)):
            try:
                type_names = self.zk.get_children(root)
            except NoNodeError:
                continue
            for type_name in type_names:
                rtype = acl_json.type_of(type_name)
                if rtype is None:
                    continue
                try:
                    names = self.zk.get_children(f"{root}/{type_name}")
                except NoNodeError:
                    continue
                for name in names:
                    try:
                        data, _ = self.zk.get(f"{root}/{type_name}/{name}")
                    except NoNodeError:
                        continue
                    try:
                        out.extend(acl_json.decode((rtype, name, ptype), data))
                    except (ValueError, KeyError) as exc:
                        log.warning("ignoring unreadable ACL znode %s/%s/%s: %s", root,
                                    type_name, name, exc)
        return out

    def _purge(self, path: str, notifications: list[str]) -> None:
        """Delete the notifications older than CHANGE_EXPIRATION_MS (every broker tries;
        one that lost the race finds the znode gone)."""
        from kazoo.exceptions import NoNodeError
        expired_before = self.now_ms() - CHANGE_EXPIRATION_MS
        for name in notifications:
            stat = self.zk.exists(f"{path}/{name}")
            if stat is not None and stat.ctime < expired_before:
                try:
                    self.zk.delete(f"{path}/{name}")
                except NoNodeError:
                    pass

    def _on_watch(self, event: Any) -> None:
        token = self._token
        if token is not None:
            try:
                token.run_sync_soon(self._changed.set)
            except trio.RunFinishedError:
                pass

    async def run(self) -> None:
        """Follow the change notifications for as long as the broker runs."""
        self._token = trio.lowlevel.current_trio_token()
        while True:
            self._changed = trio.Event()
            try:
                bindings = await trio.to_thread.run_sync(self._read_all, True)
            except Exception as exc:  # ZooKeeper away: try again shortly
                log.warning("reading ACLs from ZooKeeper failed: %s", exc)
                await trio.sleep(1)
                continue
            self.authorizer.replace(bindings)
            await self._changed.wait()

    # -- writing -------------------------------------------------------------------------------
    async def change(self, add: Iterable[AclBinding] = (),
                     remove: Iterable[AclBinding] = ()) -> None:
        adds, removes = acl_json.by_pattern(add), acl_json.by_pattern(remove)
        async with self._lock:
            for pattern in sorted(set(adds) | set(removes)):
                await trio.to_thread.run_sync(self._update, pattern, adds.get(pattern, ()),
                                              removes.get(pattern, ()))
            self.authorizer.replace(await trio.to_thread.run_sync(self._read_all, False))

    def _update(self, pattern: acl_json.Pattern, add: Iterable[AclBinding],
                remove: Iterable[AclBinding]) -> None:
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
        path = acl_json.path_of(pattern)
        while True:
            try:
                data, stat = self.zk.get(path)
                current = set(acl_json.decode(pattern, data))
            except NoNodeError:
                stat, current = None, set()
            wanted = (current | set(add)) - set(remove)
            if wanted == current:
                return
            try:
                if stat is None:
                    self.zk.create(path, acl_json.encode(wanted), makepath=True)
                elif wanted:
                    self.zk.set(path, acl_json.encode(wanted), version=stat.version)
                else:
                    self.zk.delete(path, version=stat.version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # another broker changed it meanwhile: read again
            break
        if pattern[2] == PatternType.PREFIXED:
            self.zk.create(f"{acl_json.EXTENDED_CHANGES}/{acl_json.CHANGE_PREFIX}",
                           acl_json.change_extended(pattern), sequence=True)
        else:
            self.zk.create(f"{acl_json.LITERAL_CHANGES}/{acl_json.CHANGE_PREFIX}",
                           acl_json.change_literal(pattern), sequence=True)


AclStore = LocalAclStore | ZkAclStore
