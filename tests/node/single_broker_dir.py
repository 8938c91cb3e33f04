"""A single broker's log dir as its own stores write it (topics, a partition's epoch, quotas,
dynamic configs, a group's configs, ACLs, a producer id block, a SCRAM credential), and a
node's configuration over such a dir: what the metadata import reads
(tests/node/test_metadata_import.py) and what a killed import leaves
(test_metadata_import_crash.py)."""
from __future__ import annotations

from pathlib import Path

import trio

from protocol.acl_operations import AclOperation
from pybroker.cluster.client_quotas import QuotaEntity
from pybroker.cluster.metadata import LocalMetadataStore, MetadataImage
from pybroker.config import BrokerConfig, load_broker_config
from pybroker.coordinator.producer_ids import ProducerIdManager
from pybroker.security.acl.authorizer import Authorizer
from pybroker.security.acl.model import AclBinding, AclPermission, PatternType, ResourceType
from pybroker.security.acl.store import LocalAclStore
from pybroker.security.sasl.credential_store import LocalScramCredentialStore
from pybroker.security.sasl.scram_credentials import ScramCredential

NODE = 7
BINDINGS = [
    AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*",
               AclOperation.READ, AclPermission.ALLOW),
    AclBinding(ResourceType.GROUP, "app-", PatternType.PREFIXED, "User:alice", "*",
               AclOperation.READ, AclPermission.ALLOW),
]
CREDENTIAL = ScramCredential(b"salt", b"stored-key", b"server-key", 4096)


def single_broker(log_dir: Path) -> MetadataImage:
    """What a single broker leaves in its log dir, written by its own stores; its image."""
    async def write() -> MetadataImage:
        store = LocalMetadataStore(log_dir, NODE, "127.0.0.1", 9092)
        await store.create_topic("orders", 3, {"cleanup.policy": "compact"})
        await store.create_topic("__consumer_offsets", 2, {}, internal=True)
        await store.alter_partition("orders", 1, leader_epoch=4)
        await store.set_client_quotas({QuotaEntity("alice", None): {"producer_byte_rate": 1024},
                                       QuotaEntity(None, ""): {"request_percentage": 50.0}})
        await store.set_broker_configs("<default>", {"log.retention.ms": "3600000"})
        await store.set_group_configs("app-1", {"consumer.session.timeout.ms": "30000"})
        await LocalAclStore(log_dir, Authorizer()).change(add=BINDINGS)
        await ProducerIdManager(log_dir).next_id()
        return store.image
    image = trio.run(write)
    LocalScramCredentialStore(log_dir).alter([("alice", "SCRAM-SHA-256", CREDENTIAL)], [])
    return image


def node_config(log_dir: Path, **extra: str) -> BrokerConfig:
    return load_broker_config(None, {"log.dirs": str(log_dir), "node.id": str(NODE),
                                     "num.cores": "2", **extra})
