"""What a handler is: an API key, the versions it serves, and an async `handle`.

Each handler module of `pybroker.handlers` (one without a leading underscore: those are
helpers, like this one) exposes one `HANDLER`. The registry collects them, and
ApiVersions is computed from it, so what is advertised is exactly what is implemented.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from construct import Container

from protocol.errors import ErrorCode
from pybroker.security.acl.authorizer import Authorizer
from pybroker.security.acl.store import AclStore
from pybroker.quota.client_quota import ClientQuotas
from pybroker.quota.request_quota import RequestQuota
from pybroker.cluster.features import FeatureStore
from pybroker.cluster.metadata import MetadataStore, MetadataImage
from pybroker.config import BrokerConfig
from pybroker.coordinator.group_coordinator import GroupCoordinator
from pybroker.coordinator.share_coordinator import ShareCoordinator
from pybroker.coordinator.producer_ids import ProducerIds
from pybroker.cluster.dynamic_broker_config import DynamicBrokerConfig
from pybroker.coordinator.txn_coordinator import TransactionCoordinator
from pybroker.coordinator.txn_verifier import TxnVerifier
from pybroker.replica.fetch_session import FetchSessionCache
from pybroker.quota.memory_pool import MemoryPool
from pybroker.replica.purgatory import Purgatory
from pybroker.replica.manager import ReplicaManager
from pybroker.security.sasl.credential_store import ScramCredentialStore
from pybroker.stats.request_stats import RequestStats
from pybroker.security.session import Session
from pybroker.storage.log_manager import LogManager
from pybroker.controller.topic_admin import TopicAdmin

if TYPE_CHECKING:  # the controller only in a cluster's annotations: not imported at start
    from protocol.headers import RequestHeader
    from pybroker.controller.controller import Controller


@dataclass(frozen=True)
class Services:
    """Everything a handler may use, built once by the composition root (Redpanda's
    request_context accessors, Kafka's KafkaApis collaborators): never the broker itself."""

    config: BrokerConfig
    node_id: int
    metadata: MetadataStore
    logs: LogManager
    replicas: ReplicaManager
    topics: TopicAdmin
    groups: GroupCoordinator
    producer_ids: ProducerIds
    purgatory: Purgatory
    transactions: TransactionCoordinator
    # The controller of a ZooKeeper cluster (every broker has one; `ctx.is_controller` says
    # whether this one is elected); None on a single broker.
    controller: Controller | None = None
    # What request bodies and in-memory responses may hold at once (queued.max.request.bytes).
    memory: MemoryPool = field(default_factory=lambda: MemoryPool(None))
    # What the request path counts for /metrics (plain integers, read at scrape time).
    stats: RequestStats = field(default_factory=RequestStats)
    # The authorizer and where its ACLs are kept (authorizer.class.name); None: no
    # authorization, every request allowed, at the cost of one attribute check
    # (pybroker/handlers/_authz.py).
    authorizer: Authorizer | None = None
    acls: AclStore | None = None
    # SCRAM users and their credentials (pybroker/security/sasl/credential_store.py).
    scram: ScramCredentialStore = field(default_factory=ScramCredentialStore)
    # request.log.enable: one line per request on pybroker.request.logger (request_log.py);
    # off, dispatch pays this one attribute check.
    request_log: bool = False
    # Whether a transactional batch's partition is in its producer's transaction, asking the
    # coordinator in process or on another broker (KIP-890 part 1); None: never verified.
    txn_verifier: TxnVerifier | None = None
    # Produce and fetch byte-rate quotas; None: nothing is ever throttled.
    quotas: ClientQuotas | None = None
    # request_percentage: each request's loop time charged to its client (request_quota.py);
    # None: not measured.
    request_quota: RequestQuota | None = None
    # The dynamic broker configs (KIP-226): what alters them, and the configuration they make
    # with the static one, which handlers read (`RequestContext.config`); None: `config` alone.
    dynamic_config: DynamicBrokerConfig | None = None
    # Incremental fetch sessions (KIP-227, max.incremental.fetch.session.cache.slots).
    fetch_sessions: FetchSessionCache = field(default_factory=lambda: FetchSessionCache(1000))
    # The finalized feature levels (KIP-584; cluster/features.py): what gates the APIs of a
    # `Handler.feature`, and what UpdateFeatures changes. In memory unless the broker gives
    # its log dir.
    features: FeatureStore = field(default_factory=FeatureStore)
    # Share groups (KIP-932); None where a broker is assembled without them (unit tests).
    shares: ShareCoordinator | None = None


@dataclass
class RequestContext:
    """What a handler knows beyond the request's body: who asked, and the services its API
    uses, with the metadata image as it was when the request arrived (`image`), which the
    handler reads from start to end."""

    services: Services
    header: "RequestHeader"
    client_host: str
    client_port: int
    # The handlers this request was dispatched from: ApiVersions answers from it, without
    # importing the registry that imports it.
    registry: Mapping[int, "Handler"] = field(default_factory=dict)
    # Taken by dispatch as the request arrives.
    image: MetadataImage = field(default=None)  # type: ignore[assignment]
    # The listener the request came in on: answers name that listener's endpoints.
    listener: str | None = None
    # Who sent it (pybroker/security/session.py): the principal the authorizer and quotas ask about.
    session: Session = field(default_factory=Session)

    @property
    def principal(self) -> str:
        return self.session.principal
    # Set by a handler whose client went over a quota: dispatch writes it into the response
    # (throttle_time_ms: no handler writes that field) and the connection reads nothing more
    # from the client until then.
    throttle_ms: int = 0
    # The request's loop time has been charged to its client's request quota (by a handler
    # that needs the throttle before it answers, Fetch; otherwise dispatch charges it).
    request_time_recorded: bool = False
    # The request's size on the wire, header and body (its frame without the size prefix):
    # what Kafka's producer_byte_rate counts (RequestChannel's request size).
    request_size: int = 0

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    @property
    def config(self) -> BrokerConfig:
        """The broker's configuration now: the static one with its dynamic configs."""
        dynamic = self.services.dynamic_config
        return self.services.config if dynamic is None else dynamic.current

    @property
    def replicas(self) -> ReplicaManager:
        return self.services.replicas

    @property
    def topics(self) -> TopicAdmin:
        return self.services.topics

    @property
    def groups(self) -> GroupCoordinator:
        return self.services.groups

    @property
    def is_controller(self) -> bool:
        """Whether this broker is the cluster's controller, as the request's image says
        (a single broker always is). Partition reassignments and leader elections are served
        by the controller only; the others answer NOT_CONTROLLER and clients retry there.
        Topic changes (CreateTopics, DeleteTopics, CreatePartitions) are served anywhere."""
        return self.image.controller_id == self.services.node_id


HandleFn = Callable[[RequestContext, Container], Awaitable[Any]]
ErrorFn = Callable[[RequestContext, Container, ErrorCode], Any]


@dataclass(frozen=True)
class Handler:
    """One API: `handle` returns the response body, or None for no response (acks=0)."""

    api_key: int
    min_version: int
    max_version: int
    handle: HandleFn
    # The whole request failed (a broker bug, a version we advertise but refuse): the
    # response that carries `code` everywhere the request asked about something.
    error_response: ErrorFn | None = None
    # Advertised minimum when it differs from what is served (Produce: advertise 0, serve 3+).
    advertised_min: int | None = None
    # The feature (name, level) that must be finalized at least at that level for the API to
    # be advertised and served (ConsumerGroupHeartbeat: group.version 1); closed, a request
    # is answered UNSUPPORTED_VERSION, as Kafka's ApiVersionManager leaves it out.
    feature: tuple[str, int] | None = None

    def serves(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def enabled(self, features: FeatureStore) -> bool:
        return self.feature is None or features.enables(*self.feature)


def partition_error_response(**extra: Any) -> ErrorFn:
    """The `error_response` of an API whose request and response both list `topics` by
    `name` with `partitions` by `partition_index` (ListOffsets, OffsetCommit, DeleteRecords):
    `code` for every partition asked about, plus the `extra` fields."""
    def error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
        return {"topics": [
            {"name": t.name, "partitions": [
                {"partition_index": p.partition_index, "error_code": int(code), **extra}
                for p in t.partitions]} for t in request.topics]}
    return error_response
