"""Dynamic broker configs (Kafka's KIP-226): which keys may change without a restart, at
which level, and the checks a change must pass before it is stored.

Theory of operation. A broker's configuration has four layers, highest first (Kafka's
precedence, each named by the `ConfigSource` DescribeConfigs reports):
DYNAMIC_BROKER_CONFIG (this broker's own dynamic configs, resource name "<id>"),
DYNAMIC_DEFAULT_BROKER_CONFIG (every broker's, resource name ""), STATIC_BROKER_CONFIG
(server.properties and --override) and DEFAULT_CONFIG. `effective_props` stacks the first
three as Kafka's DynamicBrokerConfig.overrideProps does: a dynamic key first removes the
synonyms of its group below it (a dynamic log.retention.ms beats a static log.retention.hours,
which would otherwise win its chain), so the higher layer always decides.

A key's update mode is Kafka's (its docs' "Update Mode"): read-only, per-broker (a broker's
own listeners and key material: only with a broker id) or cluster-wide (either level). Kafka's
security configs (key and trust stores) are per listener only, `listener.name.<l>.<key>`.
`check_change` applies Kafka's checks in Kafka's order and with Kafka's messages, which the
handlers answer as INVALID_REQUEST. pybroker refuses in the same words the few keys Kafka
updates live but pybroker cannot (thread pools it has not, listeners it would have to bind),
and, unlike Kafka, names it does not know: Kafka stores those as custom configs for plugins
pybroker does not load, which would be a silent no-op (a topic key such as retention.ms set
on a broker is the usual mistake).

Pure: no trio, no store. The stores keep the layers (`/config/brokers/<default>` and
`/config/brokers/<id>` in ZooKeeper, `pybroker-metadata.json` on one broker), and
`pybroker/cluster/dynamic_broker_config.py` applies them.
"""
from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping

from pybroker.config.broker_keys import BROKER_CONFIG_DEFS, BROKER_SYNONYM_GROUPS, LISTENER_KEYS
from pybroker.config.definitions import ConfigError, ConfigKey, KeyState

# Kafka's ZooKeeper name of the cluster-default entity (ConfigEntityName.Default).
DEFAULT_ENTITY = "<default>"


class UpdateMode(enum.Enum):
    """How a broker key may be changed, as Kafka's configuration docs name it."""

    READ_ONLY = "read-only"
    PER_BROKER = "per-broker"
    CLUSTER_WIDE = "cluster-wide"


# Kafka's security configs (SslConfigs.RECONFIGURABLE_CONFIGS): dynamic per listener only.
SECURITY_CONFIGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.certificates"})

# Kafka 4.1's per-broker keys among those pybroker knows (DynamicListenerConfig's, less the
# cluster-level connection keys).
_KAFKA_PER_BROKER = SECURITY_CONFIGS | {
    "listeners", "listener.security.protocol.map", "ssl.protocol", "ssl.provider",
    "ssl.cipher.suites", "ssl.enabled.protocols", "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm", "ssl.endpoint.identification.algorithm",
    "ssl.secure.random.implementation", "ssl.client.auth", "ssl.engine.factory.class",
    "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "sasl.enabled.mechanisms"}

# Kafka 4.1's cluster-wide keys among those pybroker knows: the log defaults (the broker
# names of ServerTopicConfigSynonyms, first of each chain), the cleaner's, the thread pools',
# the acceptor's and the producer state's.
_LOG_DEFAULTS = frozenset({
    "log.segment.bytes", "log.roll.ms", "log.roll.jitter.ms", "log.index.size.max.bytes",
    "log.flush.interval.messages", "log.flush.interval.ms", "log.retention.bytes",
    "log.retention.ms", "message.max.bytes", "log.index.interval.bytes",
    "log.cleaner.delete.retention.ms", "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms", "log.segment.delete.delay.ms",
    "log.cleaner.min.cleanable.ratio", "log.cleanup.policy", "unclean.leader.election.enable",
    "min.insync.replicas", "compression.type", "log.preallocate",
    "log.message.timestamp.type", "log.message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms"})
CLEANER_CONFIGS = frozenset({
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size",
    "log.cleaner.backoff.ms"})
CONNECTION_CONFIGS = frozenset({"max.connections", "max.connections.per.ip"})
_KAFKA_CLUSTER_WIDE = _LOG_DEFAULTS | CLEANER_CONFIGS | CONNECTION_CONFIGS | {
    "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
    "background.threads", "num.network.threads", "producer.id.expiration.ms",
    "leader.replication.throttled.rate", "follower.replication.throttled.rate"}

# What pybroker applies live: the log defaults every topic without an override follows, the
# cleaner, the connection limits, a TLS listener's keys (new connections get the new
# context) and the replication throttle rates. The rest of Kafka's dynamic keys is refused
# (`check_change`).
LOG_DEFAULTS = _LOG_DEFAULTS - {"log.preallocate"}
TLS_CONFIGS = frozenset(name for name in _KAFKA_PER_BROKER
                        if name.startswith("ssl.") and name in BROKER_CONFIG_DEFS
                        and BROKER_CONFIG_DEFS[name].state is KeyState.HONOURED)
REPLICATION_THROTTLES = frozenset({
    "leader.replication.throttled.rate", "follower.replication.throttled.rate"})
APPLIED = LOG_DEFAULTS | CLEANER_CONFIGS | CONNECTION_CONFIGS | TLS_CONFIGS \
    | REPLICATION_THROTTLES | {"producer.id.expiration.ms"}

# Kafka's broker config that exists only dynamically and that pybroker has nothing to apply
# to: the throttle of moves between log directories (no AlterReplicaLogDirs here).
THROTTLE_CONFIGS = frozenset({"replica.alter.log.dirs.io.max.bytes.per.second"})

_LISTENER_PREFIX = re.compile(r"listener\.name\.([^.]+)\.(.+)")


def split_listener_key(name: str) -> tuple[str | None, str]:
    """(listener in upper case, base key) of `listener.name.<l>.<key>`; (None, name) else."""
    match = _LISTENER_PREFIX.fullmatch(name)
    if match is None:
        return None, name
    return match.group(1).upper(), match.group(2)


def update_mode(name: str) -> UpdateMode:
    """Kafka's update mode of a broker key, or of a listener's override of one."""
    listener, base = split_listener_key(name)
    if listener is not None:
        return UpdateMode.PER_BROKER if base in _KAFKA_PER_BROKER else UpdateMode.READ_ONLY
    if name in _KAFKA_PER_BROKER:
        return UpdateMode.PER_BROKER
    if name in _KAFKA_CLUSTER_WIDE:
        return UpdateMode.CLUSTER_WIDE
    return UpdateMode.READ_ONLY


def is_dynamic(name: str) -> bool:
    """Whether `name` may change without a restart here (DescribeConfigs' read_only is the
    opposite): Kafka lets it and pybroker applies it live. Listener overrides count as
    read-only there, as in Kafka."""
    return (split_listener_key(name)[0] is None and name in APPLIED
            and update_mode(name) is not UpdateMode.READ_ONLY)


def scala_set(names: Iterable[str], *, mutable: bool = False) -> str:
    """A set of names as Kafka's messages print a Scala set: `Set(a, b)`, HashSet beyond
    four, or always for a `mutable` one (Kafka's security configs come from a Java set).
    Sorted, where Kafka prints them in hash order, so the answer is stable."""
    items = sorted(names)
    kind = "HashSet" if mutable or len(items) > 4 else "Set"
    return f"{kind}({', '.join(items)})"


class DynamicConfigError(ValueError):
    """A dynamic config change that cannot be stored: answered INVALID_REQUEST with this
    message, as Kafka's ConfigAdminManager answers a ConfigException."""


def _key(name: str) -> ConfigKey | None:
    listener, base = split_listener_key(name)
    if listener is not None:
        return BROKER_CONFIG_DEFS.get(base) if base in LISTENER_KEYS else None
    return BROKER_CONFIG_DEFS.get(name)


def check_change(props: Mapping[str, str], *, per_broker: bool) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs over the whole new set of one level's
    dynamic configs, in Kafka's order: keys that are not dynamic, security keys without a
    listener prefix, values that do not parse, per-broker keys at the cluster level. pybroker
    adds, in the first message's words, the log-directory move throttle, names it does
    not know, and Kafka's dynamic keys it cannot apply live. DynamicConfigError with Kafka's
    message."""
    throttles = {name for name in props if name in THROTTLE_CONFIGS}
    if throttles:
        raise DynamicConfigError(
            f"Cannot update these configs dynamically: {scala_set(throttles)} (pybroker "
            "does not move replicas between log directories)")
    unknown = {name for name in props if _key(name) is None}
    if unknown:
        raise DynamicConfigError(
            f"Cannot update these configs dynamically: {scala_set(unknown)} (pybroker knows "
            "no such broker config; a topic's configs are set on the topic)")
    static_only = {name for name in props if update_mode(name) is UpdateMode.READ_ONLY}
    if static_only:
        raise DynamicConfigError(
            f"Cannot update these configs dynamically: {scala_set(static_only)}")
    bare_security = {name for name in props if name in SECURITY_CONFIGS}
    if bare_security:
        raise DynamicConfigError(
            "These security configs can be dynamically updated only per-listener using the "
            f"listener prefix: {scala_set(bare_security, mutable=True)}")
    for name, raw in props.items():
        key = _key(name)
        assert key is not None
        try:
            key.parse(raw)
        except ConfigError as exc:
            raise DynamicConfigError(str(exc).replace(f"configuration {key.name}",
                                                      f"configuration {name}")) from None
    if not per_broker:
        per_broker_keys = {name for name in props if update_mode(name) is UpdateMode.PER_BROKER}
        if per_broker_keys:
            raise DynamicConfigError(
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {scala_set(per_broker_keys)}")
    not_live = {name for name in props if split_listener_key(name)[1] not in APPLIED}
    if not_live:
        raise DynamicConfigError(
            f"Cannot update these configs dynamically: {scala_set(not_live)} (pybroker "
            "applies them only from server.properties, at start)")


def synonyms_of(name: str) -> tuple[str, ...]:
    """The names that stand for the same setting as `name` (Kafka's brokerConfigSynonyms
    without listener matching): a higher layer setting one hides the others below it."""
    return BROKER_SYNONYM_GROUPS.get(name, (name,))


def effective_props(static: Mapping[str, str], default: Mapping[str, str],
                    broker: Mapping[str, str]) -> dict[str, str]:
    """The properties a broker runs with: static, then the cluster defaults, then its own,
    each dynamic key removing its synonyms below it (Kafka's overrideProps)."""
    props = dict(static)
    for layer in (default, broker):
        for name, value in layer.items():
            for synonym in synonyms_of(name):
                props.pop(synonym, None)
            props[name] = value
    return props
