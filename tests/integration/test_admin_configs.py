"""Topic and broker configuration through confluent-kafka's AdminClient and kafka-python's
KafkaAdminClient: DescribeConfigs (topic and broker, with sources and synonyms), AlterConfigs
and IncrementalAlterConfigs (reflected in DescribeConfigs and in behaviour).
"""
from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import (
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
)

from protocol.errors import ErrorCode
from pybroker.config.dynamic import APPLIED
from tests.integration.admin_helpers import TIMEOUT, ck_code, high_watermark, log_dir, topic_name
from tests.integration.raw import create_topic


# -- DescribeConfigs ---------------------------------------------------------------------------

VALID_SOURCES = {ConfigSource.DYNAMIC_TOPIC_CONFIG.value, ConfigSource.STATIC_BROKER_CONFIG.value,
                 ConfigSource.DEFAULT_CONFIG.value, ConfigSource.DYNAMIC_BROKER_CONFIG.value,
                 ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value}


TOPIC_KEYS = {"cleanup.policy", "compression.type", "retention.ms", "retention.bytes",
              "segment.bytes", "segment.ms", "max.message.bytes", "min.insync.replicas",
              "message.timestamp.type", "delete.retention.ms", "min.cleanable.dirty.ratio",
              "unclean.leader.election.enable", "segment.index.bytes", "flush.messages"}


def _ck_describe(ck: AdminClient, rtype, name: str) -> dict:  # type: ignore[no-untyped-def]
    fs = ck.describe_configs([ConfigResource(rtype, name)])
    return next(iter(fs.values())).result(TIMEOUT)


def test_describe_configs_topic(broker, ck: AdminClient, kp) -> None:
    from confluent_kafka.admin import ResourceType
    name = topic_name("dc")
    create_topic(broker.bootstrap, name, 1, {"retention.ms": "3600000", "segment.bytes": "2000000"})
    entries = _ck_describe(ck, ResourceType.TOPIC, name)
    assert TOPIC_KEYS <= set(entries), TOPIC_KEYS - set(entries)
    for key, entry in entries.items():
        assert entry.name == key
        assert entry.source in VALID_SOURCES, (key, entry.source)
        assert entry.is_sensitive or entry.value is not None, key
    retention = entries["retention.ms"]
    assert retention.value == "3600000"
    assert retention.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not retention.is_default
    synonyms = list(retention.synonyms.values())
    assert synonyms[0].name == "retention.ms" and synonyms[0].value == "3600000"
    assert synonyms[0].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    policy = entries["cleanup.policy"]
    assert policy.value == "delete" and policy.is_default
    assert policy.source in (ConfigSource.DEFAULT_CONFIG.value,
                             ConfigSource.STATIC_BROKER_CONFIG.value)
    segment = entries["segment.bytes"]
    assert segment.value == "2000000"
    assert [(s.name, s.value, s.source) for s in segment.synonyms.values()] == [
        ("segment.bytes", "2000000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        ("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG.value)]

    # kafka-python: all entries, with synonyms and the same sources
    result = kp.describe_configs([_kp_resource("TOPIC", name)], include_synonyms=True,
                                 config_filter="all")
    kp_entries = result["topic"][name]
    assert set(kp_entries) == set(entries)
    assert kp_entries["retention.ms"]["value"] == "3600000"
    assert kp_entries["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert kp_entries["retention.ms"]["synonyms"][0]["name"] == "retention.ms"
    modified = kp.describe_configs([_kp_resource("TOPIC", name)])["topic"][name]
    assert set(modified) == {"retention.ms", "segment.bytes"}

    missing = topic_name("dc-missing")
    fs = ck.describe_configs([ConfigResource(ResourceType.TOPIC, missing)])
    assert ck_code(next(iter(fs.values()))) == KafkaError.UNKNOWN_TOPIC_OR_PART


def _kp_resource(rtype: str, name: str, configs=None):  # type: ignore[no-untyped-def]
    from kafka.admin import ConfigResource as KpResource
    return KpResource(rtype, name, configs)


def test_describe_configs_broker(broker, ck: AdminClient, kp) -> None:
    from confluent_kafka.admin import ResourceType
    entries = _ck_describe(ck, ResourceType.BROKER, "0")
    for key in ("num.partitions", "log.retention.hours", "log.segment.bytes", "log.dirs",
                "auto.create.topics.enable", "message.max.bytes", "broker.id"):
        assert key in entries, key
    for key, entry in entries.items():
        assert entry.source in VALID_SOURCES, (key, entry.source)
        # read-only unless it can change dynamically here (KIP-226)
        assert entry.is_read_only == (key not in APPLIED), key
        if entry.source == ConfigSource.STATIC_BROKER_CONFIG.value:
            assert entry.value is not None, key  # unset keys (advertised.listeners) are null
    assert entries["log.dirs"].value == str(log_dir(broker))
    assert entries["log.dirs"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert entries["num.partitions"].value == "1"
    result = kp.describe_configs([_kp_resource("BROKER", "0")], include_synonyms=True,
                                 config_filter="all")
    assert set(result["broker"]["0"]) == set(entries)


# -- AlterConfigs / IncrementalAlterConfigs ----------------------------------------------------

def _overrides(ck: AdminClient, name: str) -> dict[str, str]:
    from confluent_kafka.admin import ResourceType
    entries = _ck_describe(ck, ResourceType.TOPIC, name)
    return {k: e.value for k, e in entries.items()
            if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def _overrides_seen(ck: AdminClient, name: str, expected: dict[str, str]) -> dict[str, str]:
    """The topic's overrides once `expected`, or after 10 s: kafka-python sends an alter to
    a broker of its choosing, and the broker confluent-kafka describes from learns of it a
    moment later (a node's other broker, as a cluster's; Kafka promises it eventually)."""
    deadline = time.monotonic() + 10
    while (seen := _overrides(ck, name)) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return seen


def _incremental(ck: AdminClient, name: str, *ops: tuple[str, str | None, object]) -> int:
    from confluent_kafka.admin import ResourceType
    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=op) for key, value, op in ops])
    return ck_code(next(iter(ck.incremental_alter_configs([resource]).values())))


def test_incremental_alter_configs(broker, ck: AdminClient) -> None:
    name = topic_name("iac")
    create_topic(broker.bootstrap, name, 1, {"segment.bytes": "2000000"})
    SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE
    APPEND, SUBTRACT = AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT
    assert _incremental(ck, name, ("retention.ms", "5000", SET)) == 0
    assert _overrides(ck, name) == {"segment.bytes": "2000000", "retention.ms": "5000"}
    assert _incremental(ck, name, ("segment.bytes", None, DELETE)) == 0
    assert _overrides(ck, name) == {"retention.ms": "5000"}
    assert _incremental(ck, name, ("cleanup.policy", "compact", APPEND)) == 0
    assert _overrides(ck, name)["cleanup.policy"] == "delete,compact"
    assert _incremental(ck, name, ("cleanup.policy", "delete", SUBTRACT)) == 0
    assert _overrides(ck, name)["cleanup.policy"] == "compact"
    # errors leave everything unchanged
    assert _incremental(ck, name, ("retention.ms", "10", APPEND)) != 0
    assert _incremental(ck, name, ("retention.ms", "never", SET)) == KafkaError.INVALID_CONFIG
    assert _incremental(ck, name, ("no.such.config", "1", SET)) == KafkaError.INVALID_CONFIG
    assert _overrides(ck, name) == {"retention.ms": "5000", "cleanup.policy": "compact"}
    # compacted now: a keyless record is refused
    errors: list = []
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 5000})
    producer.produce(name, value=b"no key", on_delivery=lambda e, m: errors.append(e))
    producer.flush(10)  # separate batches: a keyless record fails its whole batch
    producer.produce(name, key=b"k", value=b"keyed", on_delivery=lambda e, m: errors.append(e))
    producer.flush(10)
    assert errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD
    assert errors[1] is None


def test_max_message_bytes_lowered_then_raised(broker, ck: AdminClient) -> None:
    from confluent_kafka import Producer
    name = topic_name("mmb")
    create_topic(broker.bootstrap, name, 1)
    assert _incremental(ck, name, ("max.message.bytes", "1000", AlterConfigOpType.SET)) == 0
    results: list = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 5000,
                         "linger.ms": 0})
    producer.produce(name, value=b"x" * 3000, on_delivery=lambda e, m: results.append(e))
    producer.flush(10)
    assert results[0] is not None and results[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert high_watermark(broker, name) == 0
    assert _incremental(ck, name, ("max.message.bytes", None, AlterConfigOpType.DELETE)) == 0
    producer.produce(name, value=b"x" * 3000, on_delivery=lambda e, m: results.append(e))
    producer.flush(10)
    assert results[1] is None
    assert high_watermark(broker, name) == 1


# The legacy AlterConfigs is what this test exercises; confluent-kafka deprecates its call.
@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_alter_configs_legacy_replaces_overrides(broker, ck: AdminClient, kp) -> None:
    from confluent_kafka.admin import ResourceType
    name = topic_name("ac")
    create_topic(broker.bootstrap, name, 1, {"segment.bytes": "2000000"})
    resource = ConfigResource(ResourceType.TOPIC, name, set_config={"retention.ms": "7000"})
    assert ck_code(next(iter(ck.alter_configs([resource]).values()))) == 0
    assert _overrides(ck, name) == {"retention.ms": "7000"}  # segment.bytes was dropped
    bad = ConfigResource(ResourceType.TOPIC, name, set_config={"retention.ms": "x"})
    assert ck_code(next(iter(ck.alter_configs([bad]).values()))) == KafkaError.INVALID_CONFIG
    vo = ConfigResource(ResourceType.TOPIC, name, set_config={"retention.ms": "9000"})
    assert ck_code(next(iter(ck.alter_configs([vo], validate_only=True).values()))) == 0
    assert _overrides(ck, name) == {"retention.ms": "7000"}
    # num.partitions is not a dynamic broker config (Kafka's read-only)
    broker_res = ConfigResource(ResourceType.BROKER, "0", set_config={"num.partitions": "3"})
    assert ck_code(next(iter(ck.alter_configs([broker_res]).values()))) != 0

    # kafka-python: legacy and incremental
    result = kp.alter_configs([_kp_resource("TOPIC", name, {"retention.ms": "8000"})],
                              incremental=False)
    assert result["topic"][name] == "OK"
    assert _overrides_seen(ck, name, {"retention.ms": "8000"}) == {"retention.ms": "8000"}
    result = kp.alter_configs([_kp_resource("TOPIC", name, {"cleanup.policy": ("APPEND",
                                                                               "compact")})],
                              incremental=True)
    assert result["topic"][name] == "OK"
    both = {"retention.ms": "8000", "cleanup.policy": "delete,compact"}
    assert _overrides_seen(ck, name, both) == both


def test_broker_throttles_are_set_checked_and_deleted(broker, ck: AdminClient) -> None:
    """Kafka's kafka-reassign-partitions --execute --throttle sets leader/follower
    .replication.throttled.rate on brokers and --verify deletes them (and the log-directory
    throttle, never set here): deleting what is not set succeeds, a negative rate is
    refused with INVALID_REQUEST, as Kafka's broker refuses it."""
    from confluent_kafka.admin import ResourceType
    DELETE, SET = AlterConfigOpType.DELETE, AlterConfigOpType.SET

    def on_broker(*ops: tuple[str, str | None, object]) -> int:
        resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
            ConfigEntry(key, value, incremental_operation=op) for key, value, op in ops])
        return ck_code(next(iter(ck.incremental_alter_configs([resource]).values())))

    assert on_broker(("leader.replication.throttled.rate", None, DELETE),
                     ("follower.replication.throttled.rate", None, DELETE),
                     ("replica.alter.log.dirs.io.max.bytes.per.second", None, DELETE)) == 0
    assert on_broker(("leader.replication.throttled.rate", "-1", SET)) == \
        ErrorCode.INVALID_REQUEST
    assert on_broker(("leader.replication.throttled.rate", "1000", SET),
                     ("follower.replication.throttled.rate", "2000", SET)) == 0
    assert on_broker(("leader.replication.throttled.rate", None, DELETE),
                     ("follower.replication.throttled.rate", None, DELETE)) == 0
