"""Kafka producer and consumer properties, as the tools accept them, mapped onto our client.

Tools take client settings the way Kafka's do (`--producer-property acks=all`,
`--consumer.config file`, `--producer-props k=v ...`), with Kafka's property names. The ones
our client implements are translated here; the rest (serializers, metrics, socket buffers,
retries...) still let a command line copied from Kafka's documentation run, and
`common.connect` names each of them on stderr as ignored (as Kafka's clients log the
configurations they did not use). A bad value is a usage error that names the property. Settings that change what the client
guarantees are never ignored: `enable.idempotence` follows Kafka's rules (on by default when
acks=all, an error when asked for with other acks), and `partition.assignment.strategy` takes
Kafka's class names (or the protocol names librdkafka uses) of the assignors our consumer runs,
range and cooperative-sticky; another is refused rather than replaced by one of those.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from pybroker.client.consumer import parse_isolation_level
from pybroker.client.producer import parse_acks, parse_compression
from pybroker.tools.common import UsageError

__all__ = ["producer_options", "consumer_options", "idempotence"]

# Kafka's assignor class names (and the protocol names they announce) this client runs.
ASSIGNORS = {"org.apache.kafka.clients.consumer.RangeAssignor": "range", "range": "range",
             "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
             "cooperative-sticky": "cooperative-sticky"}


def _int(name: str) -> Callable[[str], int]:
    def convert(value: str) -> int:
        try:
            return int(value.strip())
        except ValueError:
            raise UsageError(f"Invalid value {value} for configuration {name}: "
                             "Not a number of type INT") from None
    return convert


def _bool(name: str) -> Callable[[str], bool]:
    def convert(value: str) -> bool:
        text = value.strip().lower()
        if text not in ("true", "false"):
            raise UsageError(f"Invalid value {value} for configuration {name}: "
                             "Expected value to be either true or false")
        return text == "true"
    return convert


def _checked(name: str, parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def convert(value: str) -> Any:
        try:
            return parse(value)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return convert


_PRODUCER: dict[str, tuple[str, Callable[[str], Any]]] = {
    "acks": ("acks", _checked("acks", parse_acks)),
    "compression.type": ("compression", _checked("compression.type", parse_compression)),
    "linger.ms": ("linger_ms", _int("linger.ms")),
    "batch.size": ("batch_size", _int("batch.size")),
    "max.in.flight.requests.per.connection":
        ("max_in_flight", _int("max.in.flight.requests.per.connection")),
    "request.timeout.ms": ("request_timeout_ms", _int("request.timeout.ms")),
    "delivery.timeout.ms": ("delivery_timeout_ms", _int("delivery.timeout.ms")),
    "max.request.size": ("max_request_size", _int("max.request.size")),
    "buffer.memory": ("buffer_memory", _int("buffer.memory")),
}

_CONSUMER: dict[str, tuple[str, Callable[[str], Any]]] = {
    "group.id": ("group_id", str),
    "group.instance.id": ("group_instance_id", str),
    "auto.offset.reset": ("auto_offset_reset", str),
    "enable.auto.commit": ("enable_auto_commit", _bool("enable.auto.commit")),
    "auto.commit.interval.ms": ("auto_commit_interval_ms", _int("auto.commit.interval.ms")),
    "isolation.level": ("isolation_level",
                        _checked("isolation.level", parse_isolation_level)),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", _int("fetch.max.wait.ms")),
    "fetch.min.bytes": ("fetch_min_bytes", _int("fetch.min.bytes")),
    "fetch.max.bytes": ("fetch_max_bytes", _int("fetch.max.bytes")),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes",
                                  _int("max.partition.fetch.bytes")),
    "session.timeout.ms": ("session_timeout_ms", _int("session.timeout.ms")),
    "heartbeat.interval.ms": ("heartbeat_interval_ms", _int("heartbeat.interval.ms")),
    "max.poll.interval.ms": ("max_poll_interval_ms", _int("max.poll.interval.ms")),
}


def _translate(props: Mapping[str, str],
               table: dict[str, tuple[str, Callable[[str], Any]]]) -> dict[str, Any]:
    return {option: convert(props[key]) for key, (option, convert) in table.items()
            if key in props}


def producer_options(props: Mapping[str, str]) -> dict[str, Any]:
    """Producer(...) keyword arguments from producer properties."""
    return _translate(props, _PRODUCER)


def idempotence(props: Mapping[str, str], acks: int) -> bool:
    """Whether the producer is idempotent, by Kafka's rules (ProducerConfig): on by default
    unless acks is not all; asked for explicitly with acks other than all, a usage error."""
    explicit = props.get("enable.idempotence")
    if explicit is None:
        return acks == -1
    wanted = _bool("enable.idempotence")(explicit)
    if wanted and acks != -1:
        raise UsageError("Must set acks to all in order to use the idempotent producer. "
                         "Otherwise we cannot guarantee idempotence.")
    return wanted


def _assignors(value: str) -> tuple[str, ...]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in ASSIGNORS]
    if unknown or not names:
        raise UsageError(f"Invalid value {value} for configuration partition.assignment."
                         "strategy: pybroker's consumer runs the range assignor "
                         "(org.apache.kafka.clients.consumer.RangeAssignor) and the "
                         "cooperative-sticky one (org.apache.kafka.clients.consumer."
                         "CooperativeStickyAssignor) only; "
                         f"not supported: {', '.join(unknown) or '(none given)'}")
    return tuple(ASSIGNORS[n] for n in names)


def consumer_options(props: Mapping[str, str]) -> dict[str, Any]:
    """Consumer(...) keyword arguments from consumer properties."""
    options = _translate(props, _CONSUMER)
    if "partition.assignment.strategy" in props:
        options["partition_assignment_strategy"] = \
            _assignors(props["partition.assignment.strategy"])
    reset = options.get("auto_offset_reset")
    if reset is not None and reset not in ("earliest", "latest", "none"):
        raise UsageError(f"Invalid value {reset} for configuration auto.offset.reset: "
                         "String must be one of: latest, earliest, none")
    return options
