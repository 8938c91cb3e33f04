"""Dynamic broker configs (KIP-226) without a broker: Kafka's precedence of the layers, its
checks of a change and their messages, and how DescribeConfigs reports sources and synonyms."""
from __future__ import annotations

import pytest

from pybroker.config import ConfigSource, describe_broker_config, describe_topic_config, \
    load_broker_config, resolve_topic_config
from pybroker.config.dynamic import (
    DynamicConfigError, UpdateMode, check_change, effective_props, is_dynamic, scala_set,
    update_mode,
)

D, DD, S, DF = (ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG)


def test_a_dynamic_key_hides_its_synonyms_below_it() -> None:
    """A dynamic log.retention.ms beats a static log.retention.hours, which otherwise wins the
    chain (ms before minutes before hours) only when ms is unset: Kafka's overrideProps."""
    static = {"log.retention.hours": "1", "log.roll.hours": "2"}
    props = effective_props(static, {"log.retention.minutes": "3"}, {"log.retention.ms": "5"})
    assert props == {"log.roll.hours": "2", "log.retention.ms": "5"}
    config = load_broker_config(overrides=static).with_dynamic(
        {"log.retention.minutes": "3"}, {})
    assert config.log_retention_ms == 3 * 60_000
    assert resolve_topic_config(config, {}).retention_ms == 3 * 60_000
    assert resolve_topic_config(config, {"retention.ms": "9"}).retention_ms == 9


def test_per_broker_beats_default_beats_static() -> None:
    static = load_broker_config(overrides={"message.max.bytes": "3000"})
    both = static.with_dynamic({"message.max.bytes": "2000"}, {"message.max.bytes": "5000"})
    assert both.message_max_bytes == 5000 and both.source("message.max.bytes") == D.name
    default = static.with_dynamic({"message.max.bytes": "2000"}, {})
    assert default.message_max_bytes == 2000
    assert default.source("message.max.bytes") == DD.name
    assert static.with_dynamic({}, {}).message_max_bytes == 3000
    row = next(r for r in describe_broker_config(both) if r.name == "message.max.bytes")
    assert (row.value, row.source, row.read_only) == ("5000", D, False)
    assert [(s.name, s.value, s.source) for s in row.synonyms] == [
        ("message.max.bytes", "5000", D), ("message.max.bytes", "2000", DD),
        ("message.max.bytes", "3000", S), ("message.max.bytes", "1048588", DF)]
    # the topic's max.message.bytes follows, and says where its value comes from
    topic = next(r for r in describe_topic_config(both, {}) if r.name == "max.message.bytes")
    assert (topic.value, topic.source) == ("5000", D)
    assert topic.synonyms[0].name == "message.max.bytes"


def test_describing_the_default_lists_the_dynamic_defaults_alone() -> None:
    config = load_broker_config().with_dynamic({"log.retention.ms": "60000"},
                                               {"log.cleaner.threads": "2"})
    rows = list(describe_broker_config(config, per_broker=False))
    assert [(r.name, r.value, r.source) for r in rows] == [("log.retention.ms", "60000", DD)]
    # Kafka 4.1 lists the dynamic default alone as its synonym
    assert [(s.name, s.source) for s in rows[0].synonyms] == [("log.retention.ms", DD)]
    assert not rows[0].read_only


def test_update_modes_are_kafkas() -> None:
    assert update_mode("log.retention.ms") is UpdateMode.CLUSTER_WIDE
    assert update_mode("log.retention.hours") is UpdateMode.READ_ONLY
    assert update_mode("listener.name.ssl.ssl.keystore.location") is UpdateMode.PER_BROKER
    assert update_mode("num.partitions") is UpdateMode.READ_ONLY
    assert is_dynamic("log.cleaner.threads") and not is_dynamic("num.io.threads")
    assert not is_dynamic("listener.name.ssl.ssl.keystore.location")  # read_only, as Kafka


@pytest.mark.parametrize(("props", "per_broker", "message"), [
    ({"num.partitions": "3"}, True, "Cannot update these configs dynamically: Set(num.partitions)"),
    ({"log.retention.hours": "3", "log.dirs": "/x"}, False,
     "Cannot update these configs dynamically: Set(log.dirs, log.retention.hours)"),
    ({"retention.ms": "5"}, True, "Cannot update these configs dynamically: Set(retention.ms) "
     "(pybroker knows no such broker config; a topic's configs are set on the topic)"),
    ({"ssl.keystore.location": "/x"}, True, "These security configs can be dynamically updated "
     "only per-listener using the listener prefix: HashSet(ssl.keystore.location)"),
    ({"message.max.bytes": "abc"}, False,
     "Invalid value abc for configuration message.max.bytes: Not a number of type INT"),
    ({"listener.name.ssl.ssl.client.auth": "sometimes"}, True,
     "Invalid value sometimes for configuration listener.name.ssl.ssl.client.auth: String "
     "must be one of: required, requested, none"),
    ({"listener.name.ssl.ssl.keystore.location": "/x"}, False,
     "Cannot update these configs at default cluster level, broker id must be specified: "
     "Set(listener.name.ssl.ssl.keystore.location)"),
    ({"replica.alter.log.dirs.io.max.bytes.per.second": "1000"}, True, "Cannot update these "
     "configs dynamically: Set(replica.alter.log.dirs.io.max.bytes.per.second) (pybroker does "
     "not move replicas between log directories)"),
    ({"leader.replication.throttled.rate": "-1"}, True,
     "Invalid value -1 for configuration leader.replication.throttled.rate: Value must be at "
     "least 0"),
    ({"follower.replication.throttled.rate": "fast"}, False,
     "Invalid value fast for configuration follower.replication.throttled.rate: Not a number "
     "of type LONG"),
    ({"num.io.threads": "4"}, False, "Cannot update these configs dynamically: "
     "Set(num.io.threads) (pybroker applies them only from server.properties, at start)"),
])
def test_refused_changes_get_kafkas_message(props: dict[str, str], per_broker: bool,
                                            message: str) -> None:
    with pytest.raises(DynamicConfigError) as refused:
        check_change(props, per_broker=per_broker)
    assert str(refused.value) == message


def test_accepted_changes() -> None:
    check_change({"log.retention.ms": "1000", "message.max.bytes": "2000",
                  "log.cleaner.threads": "2", "max.connections": "10",
                  "leader.replication.throttled.rate": "0",
                  "follower.replication.throttled.rate": "3000000"}, per_broker=False)
    check_change({"listener.name.ssl.ssl.keystore.location": "/x",
                  "ssl.client.auth": "required"}, per_broker=True)
    check_change({}, per_broker=False)


def test_scala_sets_print_as_kafka_prints_them() -> None:
    assert scala_set(["b", "a"]) == "Set(a, b)"
    assert scala_set("abcde") == "HashSet(a, b, c, d, e)"
