"""A small trio Kafka client over `protocol/`: used by the tools and by replication.

    async with open_client("127.0.0.1:9092", client_id="me") as client:
        admin = Admin(client)
        await admin.create_topics([NewTopic("orders", 3, 1)])
        async with Producer(client, acks=-1) as producer:
            await (await producer.send("orders", b"value", key=b"key")).wait()
        async with Consumer(client, group_id="billing", auto_offset_reset="earliest") as c:
            await c.subscribe(["orders"])
            records = await c.poll(1.0)

Layers, bottom up: `connection` (one broker: frames, correlation ids, negotiated versions),
`client` (bootstrap, metadata, routing), `log_io` (one Produce or Fetch with raw batches),
`admin` + `group_admin` + `transaction_admin`, `producer`, `consumer` + `group` (classic membership, range
assignor). Failures raise `KafkaError` (with Kafka's `ErrorCode`), `KafkaConnectionError` or
`KafkaTimeoutError`, each with a message fit to show a person.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pybroker.runtime.lazy_exports import lazy_exports

# Where each public name lives. They are imported on first use (PEP 562), not here: the
# broker imports `pybroker.client.connection` for replication and transaction markers, and
# importing a submodule runs this package first. Loading the admin, consumer and producer
# with it cost a default start ~30 ms before its listeners bound (issue #15 §3).
_EXPORTS = {
    "protocol.errors": ("ErrorCode", "KafkaError"),
    "pybroker.client.admin": (
        "Admin", "AlterConfigOp", "AlterOpType", "ConfigEntry", "ConfigResource",
        "ConfigSource", "ListOffsetsResult", "NewTopic", "OffsetSpec", "ResourceType"),
    "pybroker.client.client": ("KafkaClient", "open_client"),
    "pybroker.client.cluster": ("BrokerNode", "PartitionMetadata", "TopicMetadata",
                                "TopicPartition"),
    "pybroker.client.connection": ("BrokerConnection",),
    "pybroker.client.consumer": ("Consumer", "ConsumerRecord"),
    "pybroker.client.errors": ("KafkaConnectionError", "KafkaTimeoutError"),
    "pybroker.client.group_admin": ("GroupDescription", "GroupListing", "MemberDescription",
                                    "OffsetAndMetadata"),
    "pybroker.client.log_io": ("FetchedPartition", "FetchPosition", "fetch", "produce_batch"),
    "pybroker.client.producer": ("DeliveryFuture", "Producer", "RecordMetadata"),
    "pybroker.client.transaction_admin": ("AbortTransactionSpec", "ProducerState",
                                          "TransactionDescription", "TransactionListing"),
}
__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:  # what type checkers and readers see; not run
    from protocol.errors import ErrorCode, KafkaError
    from pybroker.client.admin import (
        Admin, AlterConfigOp, AlterOpType, ConfigEntry, ConfigResource, ConfigSource,
        ListOffsetsResult, NewTopic, OffsetSpec, ResourceType,
    )
    from pybroker.client.client import KafkaClient, open_client
    from pybroker.client.cluster import (
        BrokerNode, PartitionMetadata, TopicMetadata, TopicPartition,
    )
    from pybroker.client.connection import BrokerConnection
    from pybroker.client.consumer import Consumer, ConsumerRecord
    from pybroker.client.errors import KafkaConnectionError, KafkaTimeoutError
    from pybroker.client.group_admin import (
        GroupDescription, GroupListing, MemberDescription, OffsetAndMetadata,
    )
    from pybroker.client.log_io import FetchedPartition, FetchPosition, fetch, produce_batch
    from pybroker.client.producer import DeliveryFuture, Producer, RecordMetadata
    from pybroker.client.transaction_admin import (
        AbortTransactionSpec, ProducerState, TransactionDescription, TransactionListing,
    )

__all__ = [
    "ErrorCode", "KafkaError", "KafkaConnectionError", "KafkaTimeoutError",
    "KafkaClient", "open_client", "BrokerConnection",
    "BrokerNode", "TopicMetadata", "PartitionMetadata", "TopicPartition",
    "Admin", "NewTopic", "ConfigResource", "ConfigEntry", "ConfigSource", "ResourceType",
    "AlterConfigOp", "AlterOpType", "OffsetSpec", "ListOffsetsResult",
    "GroupListing", "GroupDescription", "MemberDescription", "OffsetAndMetadata",
    "TransactionListing", "TransactionDescription", "ProducerState", "AbortTransactionSpec",
    "Producer", "DeliveryFuture", "RecordMetadata", "Consumer", "ConsumerRecord",
    "fetch", "produce_batch", "FetchPosition", "FetchedPartition",
]
