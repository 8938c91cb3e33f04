"""Metadata: brokers, the cluster id, and topics with their partitions, leaders and replicas.

Topics a client asks about that do not exist are created when both the request
(`allow_auto_topic_creation`, implied before v4) and `auto.create.topics.enable` allow it.
Creation is synchronous here, so a new topic is returned ready, not LEADER_NOT_AVAILABLE.
Asked for authorized operations (v8+), it answers the topic (and cluster) operations the
principal may do: every one without an authorizer, as Kafka. With one, topics the principal
may not DESCRIBE are left out of an all-topics answer and answered TOPIC_AUTHORIZATION_FAILED
when named, and auto-creation needs CREATE on the cluster or the topic (Kafka's rules).

The response is encoded by hand (protocol.metadata_response, held byte for byte to the
schema by its tests), and each topic's entry is cached, per version, until the metadata
store records a change: a topic of 1,000 partitions cost ~3-4 ms to build and encode through
the schema on every request, and clients ask on every connection and refresh.
"""
from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID
from weakref import WeakKeyDictionary

from construct import Container

from protocol.acl_operations import CLUSTER_OPERATIONS, TOPIC_OPERATIONS, authorized_operations
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.metadata_response import (
    UNKNOWN_AUTHORIZED_OPERATIONS, EncodedBody, encode_metadata_response, encode_partitions,
    encode_topic,
)
from pybroker.cluster.metadata import BrokerInfo, MetadataStore, PartitionState, TopicInfo
from pybroker.cluster.topic_names import invalid_topic_reason
from pybroker.handlers._authz import CLUSTER, TOPIC, Op, allowed, operations_field
from pybroker.handlers._base import Handler, RequestContext


def _error_entry(name: str | None, code: ErrorCode, topic_id: UUID | None = None) -> dict:
    entry: dict[str, object] = {"error_code": int(code), "name": name, "partitions": [],
                                "is_internal": False}
    if topic_id is not None:
        entry["topic_id"] = topic_id
    return entry


class _EncodedTopics:
    """Encoded topic entries of one state of a metadata store, by (name, version)."""

    def __init__(self, changes: int) -> None:
        self.changes = changes
        self.entries: dict[tuple[str, int, int], bytes] = {}


_CACHES: WeakKeyDictionary[MetadataStore, _EncodedTopics] = WeakKeyDictionary()


def encoded_topic(store: MetadataStore, info: TopicInfo, version: int,
                  operations: int = UNKNOWN_AUTHORIZED_OPERATIONS) -> bytes:
    """The topic's response entry, from the cache unless the store changed since."""
    cache = _CACHES.get(store)
    if cache is None or cache.changes != store.changes:
        cache = _CACHES[store] = _EncodedTopics(store.changes)
    key = (info.name, version, operations)
    data = cache.entries.get(key)
    if data is None:
        live = store.image.brokers
        rows = [_row(info.name, p, live) for p in info.partitions]
        data = cache.entries[key] = encode_topic(
            version, 0, info.name, info.topic_id, info.internal,
            encode_partitions(rows, version), operations)
    return data


def _row(topic: str, p: PartitionState, live: Mapping[int, BrokerInfo]) -> tuple:
    """A partition as Metadata reports it: no live leader is LEADER_NOT_AVAILABLE with
    leader -1 (Kafka's MetadataCache), and replicas on brokers that are not registered, or
    in a failed log dir of theirs (KIP-112), are offline."""
    offline = tuple(r for r in p.replicas if r not in live
                    or (topic, p.partition) in live[r].offline_replicas)
    if p.leader < 0 or p.leader not in live:
        return (p.partition, -1, p.leader_epoch, p.replicas, p.isr,
                int(ErrorCode.LEADER_NOT_AVAILABLE), offline)
    if offline:
        return (p.partition, p.leader, p.leader_epoch, p.replicas, p.isr, 0, offline)
    return (p.partition, p.leader, p.leader_epoch, p.replicas, p.isr)


def _encoded_error(version: int, name: str | None, code: ErrorCode,
                   topic_id: UUID | None = None, *,
                   operations: int = UNKNOWN_AUTHORIZED_OPERATIONS) -> bytes:
    return encode_topic(version, int(code), name, topic_id, False,
                        authorized_operations=operations if name else
                        UNKNOWN_AUTHORIZED_OPERATIONS)


_NO_ID = UUID(int=0)  # a topic asked for by name (v10+)

async def handle(ctx: RequestContext, request: Container) -> EncodedBody:
    store = ctx.services.metadata
    image = ctx.image
    version = ctx.version
    # Asked for (v8+): every operation, as Kafka answers without an authorizer.
    topic_ops = authorized_operations(
        version >= 8 and request.include_topic_authorized_operations, TOPIC_OPERATIONS)
    requested = request.topics
    ids = [w.topic_id for w in requested or () if version >= 10 and w.topic_id != _NO_ID]
    if version == 0 and requested == []:
        requested = None  # v0: an empty list means all topics
    elif ids:
        # As Kafka: once any topic is asked for by id, the ids alone say what is asked for (a
        # set; names are ignored). The Java client's forTopicIds leaves each name "" (the
        # field's default), not null: read as names, every id would be the topic "". Kafka
        # answers the unknown ids (UNKNOWN_TOPIC_ID) before the known ones.
        unique = list(dict.fromkeys(ids))
        unknown = [i for i in unique if image.topic_by_id(i) is None]
        requested = [Container(name=None, topic_id=i)
                     for i in unknown + [i for i in unique if i not in unknown]]
    elif requested and len(requested) > 1:
        # As Kafka (a set of names): a topic asked for twice is answered once.
        requested = list({w.name if w.name is not None else w.topic_id: w
                          for w in requested}.values())
    topics: list[bytes] = []
    secured = ctx.services.authorizer is not None
    ask_ops = version >= 8 and request.include_topic_authorized_operations

    def ops(name: str) -> int:
        return (operations_field(ctx, ask_ops, TOPIC, name, TOPIC_OPERATIONS) if secured
                else topic_ops)

    if requested is None:
        topics = [encoded_topic(store, t, version, ops(t.name)) for t in image.topics.values()
                  if not secured or allowed(ctx, Op.DESCRIBE, TOPIC, t.name)]
    else:
        allow_create = request.allow_auto_topic_creation if version >= 4 else True
        for wanted in requested:
            name = wanted.name
            if name is None:
                info = image.topic_by_id(wanted.topic_id)
                # Names are nullable in responses only from v12; before that, "" stands in.
                topics.append(encoded_topic(store, info, version, topic_ops) if info else _encoded_error(
                    version, None if version >= 12 else "", ErrorCode.UNKNOWN_TOPIC_ID,
                    wanted.topic_id))
                continue
            info = image.topics.get(name)
            if secured and (not allowed(ctx, Op.DESCRIBE, TOPIC, name) or (
                    info is None and allow_create and not invalid_topic_reason(name)
                    and ctx.config.auto_create_topics_enable
                    and not allowed(ctx, Op.CREATE, CLUSTER)
                    and not allowed(ctx, Op.CREATE, TOPIC, name))):
                topics.append(_encoded_error(version, name,
                                             ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            elif info is not None:
                topics.append(encoded_topic(store, info, version, ops(name)))
            elif invalid_topic_reason(name):
                topics.append(_encoded_error(version, name, ErrorCode.INVALID_TOPIC_EXCEPTION,
                                             operations=topic_ops))
            elif allow_create and ctx.config.auto_create_topics_enable:
                code = await ctx.topics.auto_create_topic(name)
                info = store.image.topics.get(name)
                topics.append(encoded_topic(store, info, version, ops(name))
                              if info and code == ErrorCode.NONE
                              else _encoded_error(version, name, code, operations=topic_ops))
            else:
                topics.append(_encoded_error(version, name,
                                             ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                             operations=topic_ops))
    return encode_metadata_response(
        # The brokers as reached through the listener this client came in on (Kafka's rule).
        version, [(b.node_id, ep[0], ep[1], b.rack) for b in image.brokers.values()
                  for ep in (b.endpoint(ctx.listener),) if ep is not None],
        image.cluster_id, image.controller_id, topics,
        cluster_authorized_operations=operations_field(
            ctx, 8 <= version <= 10 and request.include_cluster_authorized_operations,
            CLUSTER, "kafka-cluster", CLUSTER_OPERATIONS))


def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return {"brokers": [], "cluster_id": None, "controller_id": -1,
            "topics": [_error_entry(t.name if t.name is not None or ctx.version >= 12 else "",
                                    code, t.topic_id) for t in request.topics or []]}


HANDLER = Handler(ApiKey.METADATA, 0, 12, handle, error_response)
