"""The composition root: builds one broker's parts, each from the narrow collaborators it
uses (metadata store, logs, topic configs, replica manager, topic admin, purgatory, group
coordinator), and hands handlers only `Services`, never itself.

Built synchronously (opening the logs may recover segments after an unclean shutdown, so the
server builds it in a worker thread); `run_background` owns the periodic work (the log jobs of
`replica/log_jobs.py`, ZooKeeper's, the coordinators') inside the server's nursery; `close`
flushes and marks a clean shutdown.
"""
from __future__ import annotations

import errno

import logging
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from pybroker.security.acl.authorizer import Authorizer, parse_super_users
from pybroker.security.acl.store import AclStore, LocalAclStore, ZkAclStore
from pybroker.quota.client_quota import ClientQuotas
from pybroker.quota.replication_quota import ReplicationQuotas
from pybroker.quota.request_quota import RequestQuota
from pybroker.runtime.clock import Clock
from pybroker.replica.fetch_session import FetchSessionCache
from pybroker.runtime.periodic import run_every
from pybroker.cluster.features import SHARE_VERSION, FeatureStore
from pybroker.cluster.metadata import LocalMetadataStore, MetadataStore
from pybroker.security.sasl.credential_store import LocalScramCredentialStore, \
    ScramCredentialStore, ZkScramCredentialStore
from pybroker.cluster.topic_configs import TopicConfigs
from pybroker.config import BrokerConfig
from pybroker.coordinator.group_coordinator import GroupCoordinator
from pybroker.coordinator.share_coordinator import ShareCoordinator
from pybroker.coordinator.txn_coordinator import TransactionCoordinator
from pybroker.coordinator.broker_channels import BrokerChannels
from pybroker.coordinator.txn_markers import MarkerWriter
from pybroker.coordinator.txn_verifier import TxnVerifier
from pybroker.coordinator.producer_ids import ProducerIdManager, ProducerIds, \
    ZkProducerIdManager
from pybroker.config.broker_keys import ALL_TOPIC_CONFIG_SYNONYMS
from pybroker.config.dynamic import CLEANER_CONFIGS, REPLICATION_THROTTLES, TLS_CONFIGS
from pybroker.cluster.dynamic_broker_config import DynamicBrokerConfig, Reconfigurable
from pybroker.handlers import Services
from pybroker.security.inter_broker import inter_broker_security
from pybroker.runtime.malloc_tuning import trim_malloc
from pybroker.quota.memory_pool import MemoryPool
from pybroker.replica.purgatory import Purgatory
from pybroker.replica.replica_selector import replica_selector
from pybroker.replica.log_jobs import LogJobs
from pybroker.replica.manager import ReplicaManager
from pybroker.storage.cleaner import LogCleaner
from pybroker.storage.log_dir_lock import LogDirLocks
from pybroker.storage.log_manager import LogManager
from pybroker.controller.topic_admin import TopicAdmin

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

    from pybroker.cluster.zk_store import ZkMetadataStore
    from pybroker.controller.controller import Controller

log = logging.getLogger(__name__)
# How often the memory pool's peak is looked at, and from which peak a drained burst is worth
# giving back (blocks above 32 MB are mmapped and go back when freed anyway).
MEMORY_CHECK_INTERVAL_MS = 1000
TRIM_AFTER_PEAK = 32 << 20


def metadata_dir_failed(log_dir: Path, why: str) -> OSError:
    """Why a broker whose first log dir is unusable does not start (Kafka 4.1's words for its
    metadata log dir)."""
    return OSError(errno.EIO, f"Encountered I/O error in metadata log directory {log_dir}. "
                              f"Cannot continue. ({why})")


class Broker:
    def __init__(self, config: BrokerConfig, *, zk_client_class: Any = None,
                 clock: Clock | None = None) -> None:
        """`zk_client_class` replaces kazoo's client (pybroker.testing's in-memory ZooKeeper
        shared by the brokers of one process); only with zookeeper.connect set. `clock`: the
        clock the timers read (pybroker.runtime.clock), shared by a test cluster's brokers so they
        agree on the time a test advanced; the wall clock by default."""
        self.config = config
        self.clock = clock or Clock()
        self.node_id: int = config.node_id
        self.log_dirs = [Path(d) for d in config.log_dirs]
        # A cluster member reaches ZooKeeper first: a broker that cannot leaves its log
        # dirs as they were.
        self.zk_store: ZkMetadataStore | None = None
        if config.zookeeper_connect:
            # The cluster's code (kazoo, the controller, the replica fetchers) is imported
            # only by a cluster member: a single broker starts without it (issue #15 §3).
            from pybroker.cluster import zk_store
            from pybroker.node import metadata_client
            if zk_client_class is None and metadata_client.is_node_connect(
                    config.zookeeper_connect):  # a node's own store (`unix:<socket>`)
                zk_client_class = metadata_client.NodeZooKeeperClient
            self.zk_store = zk_store.ZkMetadataStore(
                config.zookeeper_connect, self.node_id, rack=config.broker_rack,
                session_timeout_ms=config.zookeeper_session_timeout_ms,
                connection_timeout_ms=(config.zookeeper_connection_timeout_ms
                                       or config.zookeeper_session_timeout_ms),
                client_class=zk_client_class)
        try:
            # Before anything reads or writes a log dir; held until `close`. A dir that
            # cannot be used starts offline (KIP-112), except the first: it holds
            # meta.properties and a single broker's metadata, as Kafka's metadata.log.dir
            # (by default the first of log.dirs), without which Kafka 4.1 does not start.
            self.dir_locks = LogDirLocks(self.log_dirs)
            why = self.dir_locks.failed.get(self.log_dirs[0])
            if why is not None:
                self.dir_locks.release()
                raise metadata_dir_failed(self.log_dirs[0], why)
        except BaseException:
            self._leave_zookeeper()
            raise
        try:
            self._build(config)
        except BaseException:
            self.dir_locks.release()
            self._leave_zookeeper()
            raise

    def _leave_zookeeper(self) -> None:
        if self.zk_store is not None:
            self.zk_store.close()

    def _build(self, config: BrokerConfig) -> None:
        listener = config.broker_listeners[0]
        self.controller: Controller | None = None
        self.metadata: MetadataStore
        if self.zk_store is not None:
            self.zk_store.attach(self.log_dirs[0], config.cluster_id)
            self.metadata = self.zk_store
        else:
            self.metadata = LocalMetadataStore(self.log_dirs[0], self.node_id, listener.host,
                                               listener.port, config.broker_rack,
                                               config.cluster_id)
        # The parts start with the dynamic configs already stored (KIP-226), and follow them.
        self.dynamic_config = DynamicBrokerConfig(config, self.node_id, self.metadata)
        self._build_parts(self.dynamic_config.current)
        self._follow_dynamic_configs()

    def _build_parts(self, config: BrokerConfig) -> None:
        # Before the logs: loading them asks each topic's log config.
        self.topic_configs = TopicConfigs(config, self.metadata)
        self.logs = LogManager([str(d) for d in self.log_dirs],
                               config_for=self.topic_configs.log_config,
                               offline_dirs=self.dir_locks.failed)
        why = self.logs.offline_dirs.get(self.log_dirs[0])
        if why is not None:  # as for a dir that could not be locked (`__init__`)
            for plog in self.logs.logs():
                plog.close_handles()
            raise metadata_dir_failed(self.log_dirs[0], why)
        threads = config.log_cleaner_threads
        self.cleaner = LogCleaner(
            self.logs,
            max_map_entries=LogCleaner.max_map_entries_for(
                config.log_cleaner_dedupe_buffer_size, threads),
            io_chunk=LogCleaner.io_chunk_for(config.log_cleaner_io_buffer_size, threads))
        self.log_jobs = LogJobs(self.logs, self.cleaner, self.clock, self.dynamic_config)
        self.producer_ids: ProducerIds = (
            ZkProducerIdManager(self.zk_store.zk, self.node_id) if self.zk_store is not None
            else ProducerIdManager(self.log_dirs[0]))
        self.purgatory = Purgatory()
        self.replicas = ReplicaManager(self.node_id, self.metadata, self.logs,
                                       self.topic_configs, self.purgatory,
                                       replica_selector(config.replica_selector_class))
        self.topics = TopicAdmin(config, self.metadata)
        # KIP-73: the Fetch handler holds throttled followers back with the leader's quota, a
        # cluster member's fetchers themselves with the follower's.
        self.replication_quotas = ReplicationQuotas(self.node_id, config,
                                                    self.topic_configs.topic_config)
        self.replicas.leader_quota = self.replication_quotas.leader
        # Only a cluster member reaches other brokers; a ConfigError here stops the start.
        self.inter_broker = (inter_broker_security(config) if self.zk_store is not None
                             else None)
        if self.zk_store is not None:
            from pybroker.controller.controller import Controller
            from pybroker.replica.fetcher import FetchSettings, ReplicaFetchers
            self.replicas.fetchers = ReplicaFetchers(self.replicas, FetchSettings(
                self.node_id, max_wait_ms=config.replica_fetch_wait_max_ms,
                min_bytes=config.replica_fetch_min_bytes,
                max_bytes=config.replica_fetch_response_max_bytes,
                partition_max_bytes=config.replica_fetch_max_bytes,
                backoff_ms=config.replica_fetch_backoff_ms,
                socket_timeout_ms=config.replica_socket_timeout_ms,
                security=self.inter_broker), self._endpoint_of,
                self.replication_quotas.follower)
            self.controller = Controller(
                self.zk_store,
                unclean_leader_election=config.unclean_leader_election_enable,
                auto_leader_rebalance=config.auto_leader_rebalance_enable,
                imbalance_percent=config.leader_imbalance_per_broker_percentage,
                imbalance_check_interval_s=config.leader_imbalance_check_interval_seconds)
        self.replicas.load_image(self.metadata.image)
        if self.zk_store is not None:  # registered with them from the first (`zk_store.run`)
            self.zk_store.set_offline_replicas(self.logs.offline_partitions())
        for topic in self.metadata.image.topics.values():
            self.topics.warn_inert(topic.name, topic.configs)  # at every start, as broker keys
        self.groups = GroupCoordinator(config, self.metadata, self.logs, self.replicas,
                                       self.topics, clock=self.clock.now_ms)
        self.shares = ShareCoordinator(
            config, self.metadata, self.logs, self.replicas, self.topics, self.purgatory,
            self.groups.topic, clock=self.clock.now_ms,
            channels=BrokerChannels(self.node_id, "share-persister", self._endpoint_of,
                                    self.inter_broker))
        self.markers = markers = MarkerWriter(
            self.node_id, self.metadata, self.replicas, self.groups,
            commit_timeout_ms=config.offsets_commit_timeout_ms, endpoint_of=self._endpoint_of,
            security=self.inter_broker)
        self.transactions = TransactionCoordinator(config, self.metadata, self.logs,
                                                   self.replicas, self.topics, self.groups,
                                                   self.producer_ids, markers,
                                                   clock=self.clock.now_ms)
        self.txn_verifier = TxnVerifier(
            self.node_id, self.metadata, self.replicas, self.transactions,
            BrokerChannels(self.node_id, "txn-verifier", self._endpoint_of, self.inter_broker))
        self.replicas.txn_verifier = self.txn_verifier.verify
        self.authorizer, self.acl_store = self._build_authorizer(config)
        # Who follows the store's changes, in order: stale topic configs first.
        self.metadata.listeners += [self.topic_configs.apply_delta, self.replicas.apply_delta,
                                    self.groups.apply_delta, self.shares.apply_delta,
                                    self.transactions.apply_delta]
        if self.controller is not None:
            self.metadata.listeners.append(self.controller.apply_delta)
        self.groups.load()
        self.shares.load()
        self.transactions.load()
        quotas = ClientQuotas(lambda: self.metadata.image.client_quotas,
                              samples=config.quota_window_num,
                              window_s=config.quota_window_size_seconds,
                              controller_samples=config.controller_quota_window_num,
                              controller_window_s=config.controller_quota_window_size_seconds)
        self.services = Services(config, self.node_id, self.metadata, self.logs, self.replicas,
                                 self.topics, self.groups, self.producer_ids, self.purgatory,
                                 self.transactions, self.controller,
                                 memory=MemoryPool(config.queued_max_request_bytes
                                                   if config.queued_max_request_bytes > 0
                                                   else None),
                                 authorizer=self.authorizer, acls=self.acl_store,
                                 scram=self._scram_store(),
                                 request_log=config.request_log_enable,
                                 quotas=quotas, request_quota=RequestQuota(quotas.request),
                                 txn_verifier=self.txn_verifier,
                                 dynamic_config=self.dynamic_config,
                                 fetch_sessions=FetchSessionCache(
                                     config.max_incremental_fetch_session_cache_slots,
                                     clock=self.clock.now_ms),
                                 features=FeatureStore(
                                     self.log_dirs[0], enabled=frozenset(
                                         {SHARE_VERSION} if config.group_share_enable
                                         else ()), cluster=self.zk_store),
                                 shares=self.shares)

    def _follow_dynamic_configs(self) -> None:
        """The broker's parts that follow dynamic configs (KIP-226); the server adds its own
        (TLS listeners, connection limits). The store's listeners apply them after the topic
        configs' and the replica manager's, which they replace wholesale."""
        dynamic = self.dynamic_config
        log_keys = {name for chain in ALL_TOPIC_CONFIG_SYNONYMS.values() for name, _ in chain}
        log_keys.add("producer.id.expiration.ms")
        dynamic.add(Reconfigurable("log defaults", log_keys.__contains__,
                                   self._reconfigure_logs))
        dynamic.add(Reconfigurable("replication quotas", REPLICATION_THROTTLES.__contains__,
                                   self.replication_quotas.reconfigure))
        dynamic.add(Reconfigurable("log cleaner", CLEANER_CONFIGS.__contains__,
                                   self.log_jobs.reconfigure_cleaner,
                                   self.log_jobs.validate_cleaner))
        if self.inter_broker is not None:
            dynamic.add(Reconfigurable("inter-broker client", TLS_CONFIGS.__contains__,
                                       self._reconfigure_inter_broker,
                                       self._validate_inter_broker))
        self.metadata.listeners.append(dynamic.apply_delta)

    def _reconfigure_logs(self, old: BrokerConfig, new: BrokerConfig) -> None:
        """New broker defaults: every topic without an override of its own follows them,
        its open logs at once (Kafka's DynamicLogConfig)."""
        self.topic_configs.config = new
        self.topic_configs.invalidate_all()
        for plog in self.logs.logs():
            plog.config = self.topic_configs.log_config(plog.topic)
        if self.controller is not None:
            self.controller.unclean = new.unclean_leader_election_enable

    def _validate_inter_broker(self, old: BrokerConfig, new: BrokerConfig) -> None:
        inter_broker_security(new)  # ConfigError: the client side cannot be built

    def _reconfigure_inter_broker(self, old: BrokerConfig, new: BrokerConfig) -> None:
        """The inter-broker listener's rotated key and trust stores are this broker's
        client credentials too (Kafka's rule): the followers' and the marker writer's next
        connections to other brokers use them."""
        self.inter_broker = security = inter_broker_security(new)
        fetchers = self.replicas.fetchers
        if fetchers is not None:
            fetchers.settings = replace(fetchers.settings, security=security)
        self.markers.channels.security = security
        self.txn_verifier.channels.security = security
        if self.shares.channels is not None:
            self.shares.channels.security = security

    @cached_property
    def metrics_registry(self) -> CollectorRegistry:
        """/metrics: read at scrape time from the broker's parts (pybroker/ops/metrics.py).
        Built at the first scrape: prometheus_client costs ~40 ms of imports, which a start
        should not pay before its listeners bind."""
        from pybroker.ops.metrics import BrokerCollector, broker_registry
        return broker_registry(BrokerCollector(
            self.node_id, self.metadata, self.replicas, self.groups, self.services.memory,
            self.services.stats, self.transactions, self.services.fetch_sessions))

    def _build_authorizer(self, config: BrokerConfig
                          ) -> tuple[Authorizer | None, AclStore | None]:
        """authorizer.class.name empty: no authorization at all (the config refused any name
        but Kafka's two ACL authorizers)."""
        if not config.authorizer_class_name:
            return None, None
        authorizer = Authorizer(parse_super_users(config.super_users),
                                config.allow_everyone_if_no_acl_found)
        if self.zk_store is not None:
            return authorizer, ZkAclStore(self.zk_store.zk, authorizer)
        return authorizer, LocalAclStore(self.log_dirs[0], authorizer)

    def _scram_store(self) -> ScramCredentialStore:
        """SCRAM credentials beside this broker's metadata; a ZooKeeper cluster member's in
        /config/users/<user>, followed with the rest of the image."""
        if self.zk_store is not None:
            store = ZkScramCredentialStore(self.zk_store.zk, self.zk_store.image.scram_credentials)
            self.metadata.listeners.append(store.apply_delta)
            return store
        return LocalScramCredentialStore(self.log_dirs[0])

    def registered(self) -> bool:
        """A member of its cluster now: registered with a live ZooKeeper session and present
        in its own metadata image (/readyz). Always True on a single broker."""
        store = self.zk_store
        return store is None or (store.session_valid and self.node_id in store.image.brokers)

    def _endpoint_of(self, node: int) -> tuple[str, int] | None:
        """Where this broker reaches `node` (followers, marker writer): its endpoint on the
        inter-broker listener, as registered; None while it has none."""
        info = self.metadata.image.brokers.get(node)
        return None if info is None else info.endpoint(self.config.inter_broker_listener_name)

    # -- background work -----------------------------------------------------------------------
    async def run_background(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            if self.zk_store is not None:
                # Registered (and following ZooKeeper) before anything else runs.
                await nursery.start(self.zk_store.run)
                assert self.replicas.fetchers is not None and self.controller is not None
                await nursery.start(self.replicas.fetchers.run)
                await nursery.start(self.replicas.run_isr_maintenance,
                                    self.config.replica_lag_time_max_ms)
                await nursery.start(self.controller.run)
                await nursery.start(self.replicas.announce_offline_replicas,
                                    self.zk_store.announce_offline_replicas)
                if isinstance(self.acl_store, ZkAclStore):
                    nursery.start_soon(self.acl_store.run)  # other brokers' ACL changes
            await nursery.start(self.log_jobs.run, self.config)
            nursery.start_soon(self._every, MEMORY_CHECK_INTERVAL_MS, self._give_memory_back)
            await nursery.start(self.groups.run)
            await nursery.start(self.shares.run)
            # __share_group_state, created when a FindCoordinator (share key) asks for it
            await nursery.start(self.shares.store.topic.run)
            await nursery.start(self.transactions.run)
            await nursery.start(self.txn_verifier.channels.run)
            if self.shares.channels is not None:
                await nursery.start(self.shares.channels.run)
            task_status.started()

    async def _every(self, interval_ms: int, job: Any) -> None:
        await run_every(interval_ms, job, f"background job {job.__name__}")

    async def _give_memory_back(self) -> None:
        """After a burst of large requests has drained (the pool held at least
        TRIM_AFTER_PEAK and now holds little), return the heap's free pages: buffers under the
        mmap threshold stay resident otherwise while other clients keep the heap busy."""
        pool = self.services.memory
        if pool.peak >= TRIM_AFTER_PEAK and pool.used <= TRIM_AFTER_PEAK // 8:
            pool.reset_peak()
            await trio.to_thread.run_sync(trim_malloc)

    async def time_advanced(self) -> None:
        """After a test advanced `self.clock`: run now each timer that reads it, as if the
        time had passed: the groups' due timers (sessions, rebalance and sync deadlines), the
        transaction timeout sweep and id expiry, offset retention and log retention. The
        group timer loop is woken too, since its sleep was measured on the clock as it was.
        A transaction aborted here is decided and persisted when this returns; its markers
        are written by their own job."""
        await self.groups.time_advanced()
        await self.shares.time_advanced()
        await self.transactions.sweep()
        await self.groups.cleanup()
        await self.log_jobs.retention()

    async def controlled_shutdown(self) -> None:
        """Before a clean stop of a cluster member (controlled.shutdown.enable): ask the
        controller to move this broker's leaderships away and wait until it has, so clients
        fail over at once instead of after the session timeout. Gives up after Kafka's
        retries and backoff; the broker stops anyway."""
        store = self.zk_store
        if store is None or not self.config.controlled_shutdown_enable:
            return
        node = self.node_id

        def leads_nothing_replicated(image: Any) -> bool:
            return not any(p.leader == node and len(p.replicas) > 1
                           and any(r in image.brokers and r != node for r in p.isr)
                           for t in image.topics.values() for p in t.partitions)
        try:
            await store.announce_shutdown()
        except Exception as exc:
            log.warning("controlled shutdown could not be announced: %s", exc)
            return
        attempts = self.config.controlled_shutdown_max_retries + 1
        wait_s = max(self.config.controlled_shutdown_retry_backoff_ms / 1000, 1.0)
        if await store.wait_for(leads_nothing_replicated, attempts * wait_s):
            log.info("controlled shutdown: broker %d leads no replicated partition", node)
        else:
            log.warning("controlled shutdown did not complete; stopping anyway")

    def close(self) -> None:
        """Leave the cluster, flush, checkpoint and mark the logs cleanly shut down, then let
        the dirs go."""
        try:
            self._leave_zookeeper()
            self.logs.close()
        finally:
            self.dir_locks.release()
