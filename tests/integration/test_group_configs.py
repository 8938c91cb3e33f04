"""Group configs (the GROUP config resource, type 32; KIP-848/932) on a real broker: Kafka's
keys and answers, durability, and their effect on consumer and share groups."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, ShareConsumer

from protocol.api_keys import ApiKey
from protocol.config_resources import ConfigSource, ResourceType
from protocol.errors import ErrorCode
from pybroker.tools.configs import main as configs
from tests.helpers import serving_broker
from tests.integration.group_harness import wait_until
from tests.integration.raw import coordinator_address, create_topic, enable_share_groups, send_request

pytestmark = pytest.mark.timeout(120)
GROUP = int(ResourceType.GROUP_CONFIG)
SET, DELETE, APPEND = 0, 1, 2


def alter(bootstrap: str, group: str, *ops: tuple[str, int, str | None],
          validate_only: bool = False) -> tuple[int, str | None]:
    body = {"resources": [{"resource_type": GROUP, "resource_name": group, "configs": [
        {"name": k, "config_operation": op, "value": v} for k, op, v in ops]}],
        "validate_only": validate_only}
    answer = send_request(bootstrap, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body).responses[0]
    return answer.error_code, answer.error_message


def describe(bootstrap: str, group: str) -> dict[str, Any]:
    body = {"resources": [{"resource_type": GROUP, "resource_name": group,
                           "configuration_keys": None}],
            "include_synonyms": True, "include_documentation": False}
    result = send_request(bootstrap, ApiKey.DESCRIBE_CONFIGS, 4, body).results[0]
    assert result.error_code == 0, result.error_message
    return {c.name: (c.value, c.config_source, [(s.name, s.value, s.source) for s in c.synonyms])
            for c in result.configs}


def test_describe_alter_and_delete(tmp_path: Path) -> None:
    with serving_broker(tmp_path / "logs", group_consumer_session_timeout_ms="50000") as info:
        b = info.bootstrap
        before = describe(b, "g")  # no such group yet: its configs are described all the same
        assert list(before) == [
            "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms",
            "share.session.timeout.ms", "share.heartbeat.interval.ms",
            "share.record.lock.duration.ms", "share.auto.offset.reset", "share.isolation.level"]
        assert before["consumer.session.timeout.ms"] == (
            "50000", ConfigSource.STATIC_BROKER_CONFIG, [
            ("group.consumer.session.timeout.ms", "50000", ConfigSource.STATIC_BROKER_CONFIG)])
        assert before["share.auto.offset.reset"] == ("latest", ConfigSource.DEFAULT_CONFIG, [
            ("share.auto.offset.reset", "latest", ConfigSource.DEFAULT_CONFIG)])
        assert alter(b, "g", ("share.auto.offset.reset", SET, "earliest"),
                     ("consumer.heartbeat.interval.ms", SET, "6000")) == (0, None)
        after = describe(b, "g")
        assert after["share.auto.offset.reset"][:2] == ("earliest",
                                                        ConfigSource.DYNAMIC_GROUP_CONFIG)
        assert after["consumer.heartbeat.interval.ms"] == (
            "6000", ConfigSource.DYNAMIC_GROUP_CONFIG, [
                ("consumer.heartbeat.interval.ms", "6000", ConfigSource.DYNAMIC_GROUP_CONFIG),
                ("group.consumer.heartbeat.interval.ms", "5000", ConfigSource.DEFAULT_CONFIG)])
        assert describe(b, "other")["share.auto.offset.reset"][0] == "latest"
        assert alter(b, "g", ("share.auto.offset.reset", DELETE, None)) == (0, None)
        assert describe(b, "g")["share.auto.offset.reset"][0] == "latest"
        assert alter(b, "g", ("consumer.heartbeat.interval.ms", SET, "7000"),
                     validate_only=True) == (0, None)
        assert describe(b, "g")["consumer.heartbeat.interval.ms"][0] == "6000"


@pytest.mark.parametrize("ops,code,message", [
    ([("foo.bar", SET, "1")], ErrorCode.INVALID_CONFIG, "Unknown group config name: foo.bar"),
    ([("consumer.session.timeout.ms", SET, "10000")], ErrorCode.INVALID_CONFIG,
     "consumer.session.timeout.ms must be greater than or equal to "
     "group.consumer.min.session.timeout.ms"),
    ([("consumer.session.timeout.ms", SET, "70000")], ErrorCode.INVALID_CONFIG,
     "consumer.session.timeout.ms must be less than or equal to "
     "group.consumer.max.session.timeout.ms"),
    ([("consumer.heartbeat.interval.ms", SET, "16000")], ErrorCode.INVALID_CONFIG,
     "consumer.heartbeat.interval.ms must be less than or equal to "
     "group.consumer.max.heartbeat.interval.ms"),
    ([("share.record.lock.duration.ms", SET, "1000")], ErrorCode.INVALID_CONFIG,
     "share.record.lock.duration.ms must be greater than or equal to "
     "group.share.min.record.lock.duration.ms"),
    ([("share.session.timeout.ms", SET, "abc")], ErrorCode.INVALID_CONFIG,
     "Invalid value abc for configuration share.session.timeout.ms: Not a number of type INT"),
    ([("share.auto.offset.reset", SET, "bogus")], ErrorCode.INVALID_CONFIG,
     "Invalid value bogus for configuration share.auto.offset.reset: Invalid value `bogus` for "
     "configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or "
     "of the format 'by_duration:<PnDTnHnMn.nS>'."),
    ([("share.auto.offset.reset", SET, "by_duration:-PT1H")], ErrorCode.INVALID_CONFIG, None),
    ([("share.isolation.level", SET, "bogus")], ErrorCode.INVALID_CONFIG,
     "Invalid value bogus for configuration share.isolation.level: String must be one of: "
     "read_committed, read_uncommitted"),
    ([("consumer.session.timeout.ms", APPEND, "1")], ErrorCode.INVALID_CONFIG,
     "Invalid value 1 for configuration consumer.session.timeout.ms: Config value "
     "append/subtract is not allowed for consumer.session.timeout.ms"),
])
def test_bad_keys_and_values_get_kafkas_codes(tmp_path: Path, ops: list, code: ErrorCode,
                                              message: str | None) -> None:
    with serving_broker(tmp_path / "logs") as info:
        got_code, got_message = alter(info.bootstrap, "g", *ops)
        assert got_code == code
        if message is not None:
            assert got_message == message
        assert describe(info.bootstrap, "g")["consumer.session.timeout.ms"][1] == \
            ConfigSource.DEFAULT_CONFIG  # nothing stored


def test_an_empty_group_name_is_an_invalid_request(tmp_path: Path) -> None:
    with serving_broker(tmp_path / "logs") as info:
        assert alter(info.bootstrap, "", ("share.auto.offset.reset", SET, "earliest")) == (
            ErrorCode.INVALID_REQUEST, "Group name must not be empty")


def test_group_configs_survive_a_restart(tmp_path: Path) -> None:
    with serving_broker(tmp_path / "logs") as info:
        assert alter(info.bootstrap, "g", ("share.auto.offset.reset", SET, "earliest")) == \
            (0, None)
    with serving_broker(tmp_path / "logs") as info:
        assert describe(info.bootstrap, "g")["share.auto.offset.reset"][:2] == (
            "earliest", ConfigSource.DYNAMIC_GROUP_CONFIG)


def test_kafka_configs_tool_sets_a_group_config(tmp_path: Path, tool: Any) -> None:
    with serving_broker(tmp_path / "logs") as info:
        r = tool(configs, "--bootstrap-server", info.bootstrap, "--entity-type", "groups",
                 "--entity-name", "sg", "--alter", "--add-config",
                 "share.auto.offset.reset=earliest")
        assert r.rc == 0, r.err
        assert describe(info.bootstrap, "sg")["share.auto.offset.reset"][0] == "earliest"
        r = tool(configs, "--bootstrap-server", info.bootstrap, "--entity-type", "groups",
                 "--entity-name", "sg", "--describe")
        assert r.rc == 0, r.err
        assert "share.auto.offset.reset=earliest" in r.out


def _heartbeat(bootstrap: str, group: str, member: str, epoch: int = 0) -> Any:
    body = {"group_id": group, "member_id": member, "member_epoch": epoch,
            "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000,
            "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": []}
    return send_request(coordinator_address(bootstrap, group), ApiKey.CONSUMER_GROUP_HEARTBEAT,
                        1, body)


def _members(bootstrap: str, group: str) -> int:
    described = send_request(coordinator_address(bootstrap, group),
                             ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {
                                 "group_ids": [group], "include_authorized_operations": False})
    return len(described.groups[0].members)


def test_a_groups_session_timeout_fences_a_silent_member_sooner(tmp_path: Path) -> None:
    """Two groups' members go silent at once; the one whose group config sets a 2 s session
    timeout is fenced well before the other's broker-wide 30 s, and is told its group's
    heartbeat interval."""
    with serving_broker(tmp_path / "logs", group_consumer_session_timeout_ms="30000",
                          group_consumer_min_session_timeout_ms="2000",
                          group_consumer_min_heartbeat_interval_ms="500") as info:
        b = info.bootstrap
        create_topic(b, "t", 2)
        assert alter(b, "fast", ("consumer.session.timeout.ms", SET, "2000"),
                     ("consumer.heartbeat.interval.ms", SET, "500")) == (0, None)
        joined = _heartbeat(b, "fast", "m-fast")
        assert (joined.error_code, joined.heartbeat_interval_ms) == (0, 500)
        assert _heartbeat(b, "slow", "m-slow").heartbeat_interval_ms == 5000
        silent_from = time.monotonic()
        wait_until(lambda: _members(b, "fast") == 0, timeout=20, what="the fast member fenced")
        assert time.monotonic() - silent_from >= 1.5  # not before its session timeout
        assert _members(b, "slow") == 1
        assert _heartbeat(b, "fast", "m-fast", epoch=1).error_code == \
            ErrorCode.UNKNOWN_MEMBER_ID


def test_a_share_consumer_reads_from_the_earliest_record_once_the_group_says_so(
        tmp_path: Path) -> None:
    with serving_broker(tmp_path / "logs") as info:
        b = info.bootstrap
        enable_share_groups(b)
        create_topic(b, "q")
        producer = Producer({"bootstrap.servers": b})
        for i in range(5):
            producer.produce("q", f"r{i}".encode())
        assert producer.flush(10) == 0
        assert alter(b, "sg", ("share.auto.offset.reset", SET, "earliest")) == (0, None)
        consumer = ShareConsumer({"bootstrap.servers": b, "group.id": "sg"})
        consumer.subscribe(["q"])
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + 30
            while len(got) < 5 and time.monotonic() < deadline:
                for m in consumer.poll(0.5):
                    if m.error() is None:
                        got.append(m.value())
        finally:
            consumer.close()
        assert sorted(got) == [f"r{i}".encode() for i in range(5)]


def test_a_share_groups_own_lock_duration_heartbeat_and_by_duration_reset(
        tmp_path: Path) -> None:
    """by_duration:PT1H starts the share-partition at the first record at most an hour old
    (not at the log start, as earliest would, nor at the end, as latest); the group's lock
    duration and heartbeat interval are what its members are told."""
    from tests.integration.share_member import Member, acquired

    with serving_broker(tmp_path / "logs") as info:
        b = info.bootstrap
        enable_share_groups(b)
        create_topic(b, "q")
        producer = Producer({"bootstrap.servers": b, "linger.ms": 0})
        two_hours_ago = int(time.time() * 1000) - 2 * 3600 * 1000
        for i in range(2):
            producer.produce("q", b"old", timestamp=two_hours_ago + i)
            assert producer.flush(10) == 0
        producer.produce("q", b"new")
        assert producer.flush(10) == 0
        assert alter(b, "sg", ("share.auto.offset.reset", SET, "by_duration:PT1H"),
                     ("share.record.lock.duration.ms", SET, "20000"),
                     ("share.heartbeat.interval.ms", SET, "6000")) == (0, None)
        member = Member(b)
        assert member.join().heartbeat_interval_ms == 6000
        fetched = member.fetch(max_wait_ms=5000)
        assert fetched.acquisition_lock_timeout_ms == 20000
        assert acquired(fetched) == [(2, 2, 1)]


def test_list_config_resources_names_groups_with_configs(tmp_path: Path) -> None:
    """ListConfigResources v1 (Kafka 4.1): for each type asked (every one when none is),
    in Kafka's order; v0 lists client-metrics resources, of which pybroker has none; a type
    it does not list is UNSUPPORTED_VERSION."""
    with serving_broker(tmp_path / "logs") as info:
        b = info.bootstrap
        create_topic(b, "t")
        assert alter(b, "sg", ("share.auto.offset.reset", SET, "earliest")) == (0, None)

        def listed(version: int, types: list[int]) -> tuple[int, list[tuple[str, int]]]:
            r = send_request(b, ApiKey.LIST_CONFIG_RESOURCES, version, {"resource_types": types})
            return r.error_code, [(c.resource_name, c.get("resource_type", 16))
                                  for c in r.config_resources]

        assert listed(1, [GROUP]) == (0, [("sg", GROUP)])
        code, everything = listed(1, [])
        assert code == 0 and everything[0] == ("sg", GROUP) and ("t", 2) in everything
        assert ("0", int(ResourceType.BROKER)) in everything
        assert listed(0, []) == (0, [])
        assert listed(1, [int(ResourceType.GROUP)]) == (ErrorCode.UNSUPPORTED_VERSION, [])
