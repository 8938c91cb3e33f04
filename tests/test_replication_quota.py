"""The replication quota's decisions (quota/replication_quota.py), with the clock passed in:
which replicas a topic's list throttles on this broker, and when the rate is over its bound."""
from __future__ import annotations

import pytest

from pybroker.config import load_broker_config, resolve_topic_config
from pybroker.config.definitions import ConfigError
from pybroker.quota.client_quota import Rate
from pybroker.quota.replication_quota import UNLIMITED, ReplicationQuota, ReplicationQuotas


def _quota(lists: dict[str, tuple[str, ...]], bound: int = UNLIMITED, node_id: int = 1
           ) -> ReplicationQuota:
    return ReplicationQuota(node_id, bound, lambda topic: lists.get(topic, ()),
                            samples=11, window_s=1)


def test_a_list_throttles_only_the_pairs_naming_this_broker() -> None:
    quota = _quota({"t": ("0:1", "0:2", "1:2", "2:1"), "all": ("*",)})
    assert [quota.is_throttled("t", p) for p in range(4)] == [True, False, True, False]
    assert quota.is_throttled("all", 7)
    assert not quota.is_throttled("other", 0)


def test_a_changed_list_applies_at_once() -> None:
    lists: dict[str, tuple[str, ...]] = {"t": ("0:1",)}
    quota = _quota(lists)
    assert quota.is_throttled("t", 0)
    lists["t"] = ("1:1",)
    assert not quota.is_throttled("t", 0) and quota.is_throttled("t", 1)
    lists["t"] = ()
    assert not quota.is_throttled("t", 1)


def test_without_a_bound_nothing_is_ever_exceeded() -> None:
    quota = _quota({})
    quota.record(10**12, 0)
    assert not quota.is_exceeded(1)


def test_the_rate_goes_over_its_bound_and_comes_back_with_time() -> None:
    """3 MB/s: 3 MB in the first second is at the bound (SimpleRate divides by at least one
    window), one byte more is over; nothing recorded for long enough brings it back."""
    bound = 3_000_000
    quota = _quota({}, bound)
    quota.record(bound, 0)
    assert not quota.is_exceeded(500)
    quota.record(1, 500)
    assert quota.is_exceeded(900)
    assert quota.bytes_per_second(900) == pytest.approx(bound + 1)
    # Two seconds on, the same bytes are spread over twice the time.
    assert not quota.is_exceeded(2100)


def test_a_bound_of_zero_is_exceeded_by_any_byte() -> None:
    quota = _quota({}, 0)
    assert not quota.is_exceeded(0)
    quota.record(1, 0)
    assert quota.is_exceeded(1)


def test_simple_rate_divides_by_one_window_where_rate_divides_by_num_minus_one() -> None:
    simple, rate = Rate(11, 1000, simple=True), Rate(11, 1000)
    for r in (simple, rate):
        r.record(1000, 0)
    assert simple.per_second(100) == pytest.approx(1000)
    assert rate.per_second(100) == pytest.approx(1000 / 10.1)  # 100 ms + 10 windows
    assert simple.per_second(4000) == pytest.approx(250)


@pytest.mark.parametrize("value", ["*", "0:1,1:2", "0:1, 1:2", "", "0:1,"])
def test_throttled_replica_lists_kafka_accepts(value: str) -> None:
    config = resolve_topic_config(load_broker_config(None, {}), {
        "leader.replication.throttled.replicas": value,
        "follower.replication.throttled.replicas": value})
    assert "".join(config.leader_replication_throttled_replicas) == value.replace(" ", "") \
        .replace(",", "")


@pytest.mark.parametrize("key", ["leader.replication.throttled.replicas",
                                 "follower.replication.throttled.replicas"])
@pytest.mark.parametrize("value,shown", [("0:x", "[0:x]"), ("*,0:1", "[*, 0:1]"),
                                         ("1", "[1]")])
def test_throttled_replica_lists_kafka_refuses_get_its_message(key: str, value: str,
                                                               shown: str) -> None:
    with pytest.raises(ConfigError) as refused:
        resolve_topic_config(load_broker_config(None, {}), {key: value})
    assert str(refused.value) == (
        f"Invalid value {shown} for configuration {key}: {key} must be the literal '*' or a "
        "list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],...")


def test_rates_follow_the_dynamic_config_and_windows_the_static_one() -> None:
    """replication.quota.window.num x replication.quota.window.size.seconds is how long a
    recorded byte counts; the throttled rates change with the dynamic configs."""
    static = load_broker_config(None, {"replication.quota.window.num": "2",
                                       "replication.quota.window.size.seconds": "3"})
    topic = resolve_topic_config(static, {"leader.replication.throttled.replicas": "0:1",
                                          "follower.replication.throttled.replicas": "*"})
    quotas = ReplicationQuotas(1, static, lambda t: topic)
    leader, follower = quotas.leader, quotas.follower
    assert leader.is_throttled("t", 0) and not leader.is_throttled("t", 1)
    assert follower.is_throttled("t", 1)
    for quota in (leader, follower):
        quota.record(1000, 0)
        assert not quota.is_exceeded(1)  # no bound yet
    quotas.reconfigure(static, static.with_dynamic(
        {"leader.replication.throttled.rate": "100"},
        {"follower.replication.throttled.rate": "100"}))
    # 1000 bytes over the 3 s window: 333/s; forgotten once 2 windows of 3 s have passed.
    assert leader.is_exceeded(2000) and follower.is_exceeded(2000)
    assert leader.bytes_per_second(2000) == pytest.approx(1000 / 3)
    assert not leader.is_exceeded(6000) and leader.bytes_per_second(6000) == 0
    quotas.reconfigure(static, static)  # deleted: no bound
    assert leader.bound == follower.bound == UNLIMITED
