"""The broker's consumer- and share-group keys that span several keys (config/group_bounds.py):
each refusal is Kafka 4.1.1's, checked against its GroupCoordinatorConfig and ShareGroupConfig
by hand (the messages below are what Kafka printed for the same properties)."""
from __future__ import annotations

import pytest

from pybroker.config import BrokerConfig, ConfigError


def _config(**props: str) -> BrokerConfig:
    return BrokerConfig({k.replace("_", "."): v for k, v in props.items()}, quiet=True)


def test_kafka_defaults_hold() -> None:
    config = _config()
    assert config.group_consumer_assignors == ("uniform", "range")
    assert (config.group_consumer_min_session_timeout_ms,
            config.group_consumer_max_session_timeout_ms) == (45000, 60000)
    assert (config.group_consumer_min_heartbeat_interval_ms,
            config.group_consumer_max_heartbeat_interval_ms) == (5000, 15000)
    assert (config.group_share_min_record_lock_duration_ms,
            config.group_share_max_record_lock_duration_ms) == (15000, 60000)


@pytest.mark.parametrize("given,names", [
    ("range,uniform", ("range", "uniform")),
    ("range", ("range",)),
    ("org.apache.kafka.coordinator.group.assignor.RangeAssignor,uniform", ("range", "uniform")),
    ("org.apache.kafka.coordinator.group.assignor.UniformAssignor", ("uniform",)),
])
def test_assignors_by_name_or_kafka_class(given: str, names: tuple[str, ...]) -> None:
    assert _config(group_consumer_assignors=given).group_consumer_assignors == names


@pytest.mark.parametrize("given", ["foo", "com.example.Nope", "uniform,sticky"])
def test_an_unknown_assignor_is_refused_at_start(given: str) -> None:
    bad = given.split(",")[-1]
    with pytest.raises(ConfigError, match=f"^Class {bad} cannot be found$"):
        _config(group_consumer_assignors=given)


def test_no_assignor_is_refused() -> None:
    with pytest.raises(ConfigError, match="must name at least one assignor"):
        _config(group_consumer_assignors="")


P = "group.consumer."
S = "group.share."


@pytest.mark.parametrize("props,message", [
    ({P + "session.timeout.ms": "30000"},
     P + "session.timeout.ms must be greater than or equal to " + P + "min.session.timeout.ms"),
    ({P + "session.timeout.ms": "70000"},
     P + "session.timeout.ms must be less than or equal to " + P + "max.session.timeout.ms"),
    ({P + "min.session.timeout.ms": "70000"},
     P + "max.session.timeout.ms must be greater than or equal to " + P
     + "min.session.timeout.ms"),
    ({P + "heartbeat.interval.ms": "50000"},
     P + "heartbeat.interval.ms must be less than or equal to " + P
     + "max.heartbeat.interval.ms"),
    ({P + "heartbeat.interval.ms": "1000", P + "session.timeout.ms": "30000"},
     P + "heartbeat.interval.ms must be greater than or equal to " + P
     + "min.heartbeat.interval.ms"),
    ({P + "heartbeat.interval.ms": "15000", P + "session.timeout.ms": "15000",
      P + "min.session.timeout.ms": "1000"},
     P + "heartbeat.interval.ms must be less than " + P + "session.timeout.ms"),
    ({S + "heartbeat.interval.ms": "1000", P + "session.timeout.ms": "30000"},
     P + "session.timeout.ms must be greater than or equal to " + P + "min.session.timeout.ms"),
    ({S + "session.timeout.ms": "30000"},
     S + "session.timeout.ms must be greater than or equal to " + S + "min.session.timeout.ms"),
    ({"group.share.max.session.timeout.ms": "40000"},
     S + "max.session.timeout.ms must be greater than or equal to " + S
     + "min.session.timeout.ms"),
    ({"group.share.max.heartbeat.interval.ms": "4000"},
     S + "max.heartbeat.interval.ms must be greater than or equal to " + S
     + "min.heartbeat.interval.ms"),
    ({S + "heartbeat.interval.ms": "45000", S + "max.heartbeat.interval.ms": "50000"},
     S + "heartbeat.interval.ms must be less than " + S + "session.timeout.ms"),
    ({S + "record.lock.duration.ms": "1000"},
     S + "record.lock.duration.ms must be greater than or equal to " + S
     + "min.record.lock.duration.ms"),
    ({S + "record.lock.duration.ms": "100000"},
     S + "max.record.lock.duration.ms must be greater than or equal to " + S
     + "record.lock.duration.ms"),
    ({S + "min.record.lock.duration.ms": "70000"},
     "Invalid value 70000 for configuration " + S + "min.record.lock.duration.ms: Value must "
     "be no more than 30000"),
    ({S + "max.record.lock.duration.ms": "4000000"},
     "Invalid value 4000000 for configuration " + S + "max.record.lock.duration.ms: Value "
     "must be no more than 3600000"),
    ({P + "min.heartbeat.interval.ms": "0"},
     "Invalid value 0 for configuration " + P + "min.heartbeat.interval.ms: Value must be at "
     "least 1"),
])
def test_kafkas_refusals(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        BrokerConfig(props, quiet=True)
    assert str(refused.value) == message


def test_lower_bounds_let_a_test_broker_use_short_timeouts() -> None:
    """Each side of the edge: a timeout at its bound is served, one under it is not."""
    at_edge = {P + "session.timeout.ms": "3000", P + "min.session.timeout.ms": "3000",
               P + "heartbeat.interval.ms": "500", P + "min.heartbeat.interval.ms": "500"}
    assert BrokerConfig(at_edge, quiet=True).group_consumer_session_timeout_ms == 3000
    with pytest.raises(ConfigError):
        BrokerConfig({**at_edge, P + "session.timeout.ms": "2999"}, quiet=True)
