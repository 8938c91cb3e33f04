"""One writer for Kafka's entity config znodes (/config/users/<user>, /config/clients/<id>):
several features share one znode, so every write is a read-modify-write of the keys it owns.

A user's znode holds both its quotas (`producer_byte_rate`, ...) and its SCRAM credentials
(`SCRAM-SHA-256`, ...), as Kafka's ConfigCommand and ZkAdminManager write them. A quota
change that rewrote the whole znode would drop the user's credentials (and lock the user
out), and the reverse would drop the quotas; so each writer gives an `edit` of the current
config, and the write is conditional on the version read (a concurrent writer on another
broker makes it read again). Then a sequential /config/changes/config_change_ notification
names the entity, as AdminZkClient.changeConfigs writes it, for Kafka tools and brokers that
follow notifications; pybroker brokers follow the entity znodes themselves (zk_store's
watches). Blocking kazoo calls: run it in a worker thread.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pybroker.cluster import zk_data as zd


def change_entity_config(zk: Any, entity_path: str,
                         edit: Callable[[Mapping[str, str]], Mapping[str, str]]) -> dict[str, str]:
    """Replace /config/<entity_path>'s config by `edit(current)` and notify; returns what was
    written. `entity_path` is Kafka's (`users/alice`, sanitized names)."""
    from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

    path = f"/config/{entity_path}"
    while True:
        try:
            raw, stat = zk.get(path)
            current = zd.decode_config(raw)
        except NoNodeError:
            stat, current = None, {}
        wanted = dict(edit(current))
        try:
            if stat is None:
                zk.create(path, zd.encode_config(wanted), makepath=True)
            else:
                zk.set(path, zd.encode_config(wanted), version=stat.version)
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue  # another broker wrote it meanwhile: edit what it wrote
        break
    zk.create(f"{zd.CONFIG_CHANGES}/config_change_", zd.encode_config_change(entity_path),
              sequence=True, makepath=True)
    return wanted
