"""A single broker's metadata, imported into the node's store on the node's first start over
its log dir (issue #29): going from num.cores=1 to N keeps the topics, offsets and records.

Why
---
A single broker (num.cores=1, no zookeeper.connect) keeps its metadata in files of its first
log dir; a node's brokers read the node's store instead (metadata_service.py), a tree in
Kafka's ZooKeeper layout. Worker 0 of the node is the broker of before (its id, its log dir,
its partitions' data in place: worker.py), so moving the files' content into that tree once is
all the change of core count needs: records and committed offsets (__consumer_offsets is a
partition of that dir) are then served by worker 0 as before.

What goes where (first log dir -> znodes, Kafka's paths and JSON, zk_data.py)
---------------------------------------------------------------------------
- meta.properties: its cluster.id -> /cluster/id. Its node.id must be the node's node.id, and
  a configured cluster.id must be its: the broker of before would have refused either. A dir
  with meta.properties and none of the files below (a broker stopped before it wrote any
  metadata) is imported too: its cluster id alone, which worker 0 would refuse to see
  replaced by a new one.
- pybroker-metadata.json: each topic -> /brokers/topics/T (topic id, each partition's
  replicas: the old broker alone, which is worker 0), /brokers/topics/T/partitions/P/state
  (leader, leader epoch and ISR as the broker left them, so the epochs in its logs'
  checkpoints go on from there), /config/topics/T; client quotas -> /config/clients/...,
  /config/users/...; dynamic broker configs -> /config/brokers/<entity>; group configs ->
  /config/groups/<group>.
- pybroker-acls.json -> /kafka-acl/..., /kafka-acl-extended/prefixed/...
- pybroker-scram-credentials.json -> the SCRAM keys of /config/users/<user>, beside the
  user's quotas, as Kafka keeps them.
- producer-ids -> /latest_producer_id_block, so the node never hands out an id the broker
  handed out (its transactional and idempotent producers' state lives on in the logs).
Left as they are: meta.properties and pybroker-features.json (worker 0 reads both, as a
cluster member), the checkpoints and the partition dirs. A file that does not read back (not
JSON, cut short, not the layout its store writes) or that names another broker as a replica
stops the start with one line naming it, before anything is written.

Once, atomically
----------------
1. The tree is written to `__node-metadata.importing` (metadata_service.write_tree: one
   fsynced snapshot) with `imported.json`, which names each file imported and its SHA-256.
2. That dir is renamed to `__node-metadata` and the log dir fsynced: the commit. A crash
   before it leaves the files untouched and a temp dir that the next start removes before
   importing again.
3. Each imported file is renamed to `<name>.imported`: kept, not deleted. A crash inside 3
   leaves some in place; the next start finds `imported.json`, checks that each is the file
   imported (its hash) and renames it. One that differs is refused, naming it.
The log dir's `.lock` is held throughout, as a broker holds it, so no broker runs on it then.

Rollback
--------
A single broker (num.cores=1) over a log dir holding `__node-metadata` refuses to start
(`check_single_broker`): it would read none of the node's metadata, and the partitions of the
node's other workers are in their dirs. By hand (docs/OPERATIONS.md): rename the `*.imported`
files back, remove `__node-metadata` and pybroker-node.properties; the broker then has its
metadata as of the import, and whatever changed on the node since is lost.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pybroker.cluster import zk_data as zd
from pybroker.cluster.client_quotas import config_strings, sanitize
from pybroker.cluster.metadata import META_PROPERTIES, METADATA_FILE, StoredMetadata, \
    read_meta_properties, read_metadata_file, resolve_cluster_id
from pybroker.config import BrokerConfig, ConfigError
from pybroker.coordinator.producer_ids import BLOCK_SIZE, FILE_NAME as PRODUCER_IDS_FILE, \
    read_block_end
from pybroker.node.import_check import METADATA_DIR
from pybroker.security.acl import acl_json
from pybroker.security.acl.model import AclBinding
from pybroker.security.acl.store import ACL_FILE, read_acl_file
from pybroker.security.sasl.credential_store import CREDENTIALS_FILE, read_credentials_file
from pybroker.security.sasl.scram_credentials import ScramCredential
from pybroker.storage.files import fsync_directory, write_atomically
from pybroker.storage.log_dir_lock import LogDirLocks

__all__ = ["METADATA_DIR", "IMPORT_RECORD", "KEPT_SUFFIX", "SOURCES", "ImportRefused",
           "import_single_broker", "single_broker_znodes", "check_single_broker"]

log = logging.getLogger("pybroker.node")

# Where the import builds the node's store (import_check.METADATA_DIR) before the rename that
# commits it.
IMPORTING_DIR = METADATA_DIR + ".importing"
IMPORT_RECORD = "imported.json"
KEPT_SUFFIX = ".imported"
# A single broker's files of metadata, in its first log dir.
SOURCES = (METADATA_FILE, ACL_FILE, CREDENTIALS_FILE, PRODUCER_IDS_FILE)

T = TypeVar("T")


class ImportRefused(ConfigError):
    """The single broker's files cannot be imported as they are; nothing was changed."""


def _refused(message: str) -> ImportRefused:
    return ImportRefused("log.dirs", "", "", message=message)


def _why(exc: BaseException) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"it is not JSON ({exc}; cut short or overwritten?)"
    if isinstance(exc, UnicodeDecodeError):
        return "it is not text (UTF-8)"
    if isinstance(exc, KeyError):
        return f"it has no {exc} where its store writes one"
    return f"it is not what its store writes ({type(exc).__name__}: {exc})"


def _read(path: Path, reader: Callable[[Path], T]) -> T:
    """`reader(path)`, or one line naming the file and what is wrong with it."""
    try:
        return reader(path)
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        raise _refused(
            f"{path} cannot be imported into the node's metadata store: {_why(exc)}. Nothing "
            "was changed: restore the file (or move it away if the broker of before had no "
            "such metadata), or serve this log dir with num.cores=1") from None


def _int(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{what} is {value!r}, not a number")
    return value


def _topic_znodes(stored: StoredMetadata, node_id: int) -> dict[str, bytes]:
    znodes: dict[str, bytes] = {}
    for name, info in stored.topics.items():
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(f"a topic is named {name!r}")
        assignment = {}
        for index, part in enumerate(info.partitions):
            where = f"partition {name}-{index}"
            if _int(part.partition, where) != index:
                raise ValueError(f"{where} is listed as partition {part.partition}")
            replicas = [_int(r, f"a replica of {where}") for r in part.replicas]
            isr = [_int(r, f"an in-sync replica of {where}") for r in part.isr]
            if replicas != [node_id] or not set(isr) <= {node_id}:
                raise ValueError(f"{where} has replicas {replicas} and ISR {isr}, where a "
                                 f"single broker's file names broker {node_id} (node.id) "
                                 "alone")
            assignment[index] = tuple(replicas)
            znodes[zd.state_path(name, index)] = zd.encode_state(zd.LeaderAndIsr(
                _int(part.leader, f"the leader of {where}"),
                _int(part.leader_epoch, f"the leader epoch of {where}"), tuple(isr), 0))
        znodes[zd.topic_path(name)] = zd.encode_topic(zd.TopicAssignment(
            assignment, info.topic_id, {}, {}))
        znodes[zd.config_path(name)] = zd.encode_config(
            {str(k): str(v) for k, v in info.configs.items()})
    return znodes


def single_broker_znodes(log_dir: Path, node_id: int, cluster_id: str | None
                         ) -> dict[str, bytes]:
    """The persistent znodes (path -> data) that stand for the single broker's files in
    `log_dir` (see the module docstring); ImportRefused, naming the file, for one that cannot
    be imported. Reads only."""
    props = _read(log_dir / META_PROPERTIES, lambda _: read_meta_properties(log_dir))
    stored_node = props.get("node.id", props.get("broker.id"))
    if stored_node is not None and stored_node != str(node_id):
        raise _refused(f"{log_dir / META_PROPERTIES} belongs to node {stored_node}, but "
                       f"node.id is {node_id}: the node keeps the id of the broker of before "
                       "(its worker 0). Nothing was changed")
    stored_cluster = props.get("cluster.id")
    znodes: dict[str, bytes] = {}
    if stored_cluster:
        znodes[zd.CLUSTER_ID] = zd.encode_cluster_id(
            resolve_cluster_id(stored_cluster, cluster_id))

    metadata_path = log_dir / METADATA_FILE
    stored = _read(metadata_path, read_metadata_file)
    znodes.update(_read(metadata_path, lambda _: _topic_znodes(stored, node_id)))
    # /config/<entity>: a user's quotas and SCRAM credentials share its znode.
    entities: dict[str, dict[str, str]] = {}

    def metadata_configs(_: Path) -> None:
        for entity, values in stored.client_quotas.items():
            entities.setdefault(entity.zk_path(), {}).update(config_strings(values))
        for broker, configs in stored.broker_configs.items():
            znodes[f"{zd.CONFIG_BROKERS}/{broker}"] = zd.encode_config(configs)
        for group, configs in stored.group_configs.items():
            znodes[f"{zd.CONFIG_GROUPS}/{sanitize(group)}"] = zd.encode_config(configs)
    _read(metadata_path, metadata_configs)

    credentials: dict[str, dict[str, ScramCredential]] = _read(
        log_dir / CREDENTIALS_FILE, read_credentials_file)
    for user, mechanisms in credentials.items():
        entities.setdefault(f"users/{sanitize(user)}", {}).update(
            {mechanism: credential.to_kafka() for mechanism, credential in mechanisms.items()})
    for path, config in entities.items():
        znodes[f"/config/{path}"] = zd.encode_config(config)

    bindings: list[AclBinding] = _read(log_dir / ACL_FILE, read_acl_file)
    for pattern, group in acl_json.by_pattern(bindings).items():
        znodes[acl_json.path_of(pattern)] = acl_json.encode(group)

    block_end = _read(log_dir / PRODUCER_IDS_FILE, read_block_end)
    if block_end:  # the next id the broker would have handed out: where the node goes on
        znodes[zd.PRODUCER_ID_BLOCK] = zd.encode_producer_id_block(
            node_id, max(0, block_end - BLOCK_SIZE), block_end - 1)
    return znodes


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _keep(log_dir: Path, names: list[str]) -> None:
    """Step 3: each imported file renamed to <name>.imported (an older one replaced)."""
    for name in names:
        os.replace(log_dir / name, log_dir / (name + KEPT_SUFFIX))
    fsync_directory(log_dir)


def _finish(log_dir: Path, data_dir: Path) -> None:
    """A node's store exists: keep the files an interrupted import left in place (step 3),
    once each is shown to be the file imported."""
    left = [name for name in SOURCES if (log_dir / name).exists()]
    if not left:
        return
    record_path = data_dir / IMPORT_RECORD
    if not record_path.exists():
        raise _refused(
            f"{log_dir / left[0]} holds a single broker's metadata, but {data_dir} holds the "
            "node's, which did not import it: a single broker ran on this log dir beside the "
            "node's store. Nothing was changed: keep one of them (docs/OPERATIONS.md, "
            "\"Changing num.cores\")")
    record = json.loads(record_path.read_text())
    for name in left:
        if record["files"].get(name) != _digest(log_dir / name):
            raise _refused(
                f"{log_dir / name} is not the file this node imported on {record['at']} "
                f"(kept as {name}{KEPT_SUFFIX}): it was written since. Nothing was changed: "
                f"the node's metadata is in {data_dir}; move {name} away to start the node "
                "(docs/OPERATIONS.md, \"Changing num.cores\")")
    _keep(log_dir, left)
    log.info("finished the import of %s's single-broker metadata: kept %s", log_dir,
             ", ".join(name + KEPT_SUFFIX for name in left))


def import_single_broker(config: BrokerConfig) -> bool:
    """Before a standalone node's metadata service starts: import the single broker's files of
    its first log dir into the node's store, if they are there and the store is not (the
    module docstring says how, and what a crash midway does). True when it imported now."""
    log_dir = Path(config.log_dirs[0])
    data_dir = log_dir / METADATA_DIR
    if data_dir.exists():
        _finish(log_dir, data_dir)
        return False
    present = [name for name in SOURCES if (log_dir / name).exists()]
    if not present and not (log_dir / META_PROPERTIES).exists():
        return False  # a new dir: the node's store starts empty and names the cluster
    # With meta.properties alone (a broker that stopped before it wrote any metadata), its
    # cluster id is still all there is to import, and must be: worker 0 keeps the file and
    # refuses a store that names another cluster (resolve_cluster_id).
    locks = LogDirLocks([log_dir])  # LogDirInUse (one line) while a broker runs on it
    try:
        if log_dir in locks.failed:
            raise OSError(locks.failed[log_dir])
        znodes = single_broker_znodes(log_dir, config.node_id, config.cluster_id)
        from pybroker.node.metadata_service import write_tree  # kazoo: only a node needs it
        temp = log_dir / IMPORTING_DIR
        if temp.exists():  # an import a crash cut short, before its commit
            shutil.rmtree(temp)
        write_tree(temp, znodes)
        write_atomically(temp / IMPORT_RECORD, json.dumps({
            "broker": config.node_id, "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "files": {name: _digest(log_dir / name) for name in present}}, indent=1))
        os.rename(temp, data_dir)
        fsync_directory(log_dir)
        _keep(log_dir, present)
    finally:
        locks.release()
    topics = sum(1 for path in znodes if path.count("/") == 3
                 and path.startswith(zd.TOPICS + "/"))
    log.info("imported the single broker's metadata of %s into the node's store (%d topics, "
             "%d znodes); kept %s", log_dir, topics, len(znodes),
             ", ".join(name + KEPT_SUFFIX for name in present) or "no file (it had none)")
    return True


def check_single_broker(config: BrokerConfig, cores: int | None) -> None:
    """Refuse a single broker (num.cores=1) over a log dir that holds a node's store: it would
    serve none of the node's metadata (see "Rollback" above). `cores`: the core count the
    node recorded (supervisor.recorded_cores), if any."""
    log_dir = Path(config.log_dirs[0])
    data_dir = log_dir / METADATA_DIR
    if config.zookeeper_connect or not data_dir.exists():
        return
    ran = f"num.cores={cores}" if cores is not None else "num.cores > 1"
    kept = (f"; its single-broker files of before were kept as *{KEPT_SUFFIX} when the node "
            "imported them" if (data_dir / IMPORT_RECORD).exists() else "")
    raise ConfigError("num.cores", 1, "", message=(
        f"{data_dir} holds the metadata of the node that ran on this log dir ({ran}), which "
        f"a single broker does not read{kept}: set {ran}, or go back to one broker by hand "
        "as docs/OPERATIONS.md (\"Changing num.cores\") says"))
