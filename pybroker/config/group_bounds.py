"""The broker's rules for consumer and share groups (KIP-848, KIP-932) that span several keys:
the server assignors it runs, and the min./max. bounds a group's timeouts must keep.

Kafka checks them when it builds GroupCoordinatorConfig and ShareGroupConfig, before the
broker serves anything; an unknown assignor or a timeout outside its bounds stops it at
start, in the words this module repeats (`check_group_bounds`). The bounds are also what a
group's own configs (`config/group.py`, the GROUP config resource) are held to.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from pybroker.config.definitions import ConfigError

# Kafka's built-in consumer-group assignors, by the name ServerAssignor and
# ConsumerGroupDescribe use, and the class names `group.consumer.assignors` may give instead.
_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}
ASSIGNOR_NAMES = ("uniform", "range")

# (key, its min. bound, its max. bound) for each timeout, consumer's then share's, in the
# order Kafka checks them: each heartbeat interval before its session timeout.
CONSUMER_BOUNDS = (
    ("group.consumer.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms",
     "group.consumer.max.heartbeat.interval.ms"),
    ("group.consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms",
     "group.consumer.max.session.timeout.ms"),
)
SHARE_BOUNDS = (
    ("group.share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms",
     "group.share.max.heartbeat.interval.ms"),
    ("group.share.session.timeout.ms", "group.share.min.session.timeout.ms",
     "group.share.max.session.timeout.ms"),
)
LOCK_BOUNDS = ("group.share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms",
               "group.share.max.record.lock.duration.ms")


def assignor_names(configured: tuple[str, ...]) -> tuple[str, ...]:
    """`group.consumer.assignors` as the names the coordinator serves, first the default.
    Kafka loads any class name on its classpath; pybroker has its two built-in assignors, so
    another name is refused as Kafka refuses a class it cannot find."""
    if not configured:
        raise ConfigError("group.consumer.assignors", "", "",
                          message="group.consumer.assignors must name at least one assignor "
                                  "(the first is the default)")
    names = []
    for given in configured:
        name = given if given in ASSIGNOR_NAMES else _ASSIGNOR_CLASSES.get(given)
        if name is None:
            raise ConfigError("group.consumer.assignors", given, "",
                              message=f"Class {given} cannot be found")
        if name not in names:
            names.append(name)
    return tuple(names)


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError("group", "", "", message=message)


def _check_block(values: Mapping[str, object], heartbeat: tuple[str, str, str],
                 session: tuple[str, str, str]) -> None:
    for key, low, high in (heartbeat, session):
        value, lo, hi = (cast(int, values[k]) for k in (key, low, high))
        _require(hi >= lo, f"{high} must be greater than or equal to {low}")
        _require(value >= lo, f"{key} must be greater than or equal to {low}")
        _require(value <= hi, f"{key} must be less than or equal to {high}")
    _require(cast(int, values[heartbeat[0]]) < cast(int, values[session[0]]),
             f"{heartbeat[0]} must be less than {session[0]}")


def check_group_bounds(values: Mapping[str, object]) -> None:
    """Kafka's GroupCoordinatorConfig and ShareGroupConfig checks over the parsed broker
    `values`, in Kafka's order and words; ConfigError at the first that fails."""
    assignor_names(cast("tuple[str, ...]", values["group.consumer.assignors"]))
    _check_block(values, *CONSUMER_BOUNDS)
    _check_block(values, *SHARE_BOUNDS)
    key, low, high = LOCK_BOUNDS
    value, lo, hi = (cast(int, values[k]) for k in LOCK_BOUNDS)
    _require(value >= lo, f"{key} must be greater than or equal to {low}")
    _require(hi >= value, f"{high} must be greater than or equal to {key}")
