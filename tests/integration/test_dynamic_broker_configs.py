"""Dynamic broker configs (KIP-226, issue #35 §7) on one broker: `kafka-configs --alter
--entity-type brokers` (--entity-default, --entity-name 0) and confluent-kafka's admin client,
each covered key taking effect on a running broker, DescribeConfigs' sources and synonyms,
Kafka's refusals, and the configs surviving a restart. Each test has a broker of its own:
dynamic configs are the broker's whole state."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest
import trio
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType,
)

from compat.wire import request
from protocol.codec import decode_response
from protocol.api_keys import ApiKey
from protocol.errors import KafkaError as ProtocolKafkaError
from pybroker.client.admin import Admin, AlterConfigOp, AlterOpType
from pybroker.client.admin import ConfigResource as OurResource
from pybroker.client.admin import ResourceType as OurType
from pybroker.config import BROKER_CONFIG_DEFS, KeyState
from pybroker.config.dynamic import APPLIED
from tests.helpers import Broker
from pybroker.tools.common import connect
from pybroker.tools.configs import main as configs
from pybroker.storage.cleaner_manager import CLEANER_CHECKPOINT
from tests.integration.admin_helpers import TIMEOUT, ck_code
from tests.integration.group_harness import wait_until
from tests.integration.raw import RawConnection

SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE
D, DD = ConfigSource.DYNAMIC_BROKER_CONFIG.value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
S, DF = ConfigSource.STATIC_BROKER_CONFIG.value, ConfigSource.DEFAULT_CONFIG.value


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker() as b:
        yield b


def admin(broker: Broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def alter(broker: Broker, name: str, *ops: tuple[str, str | None, Any],
          validate_only: bool = False) -> tuple[int, str | None]:
    """IncrementalAlterConfigs of BROKER `name`: (code, message). From confluent-kafka for a
    broker id; librdkafka refuses the empty name of the cluster default, which pybroker's
    own client sends (as Kafka's admin client does)."""
    if name == "":
        return _ours_alter(broker, ops, validate_only)
    if name != "0":  # another broker's id: sent here all the same, as a client could
        body = {"resources": [{"resource_type": 4, "resource_name": name, "configs": [
            {"name": k, "config_operation": op.value, "value": v} for k, v, op in ops]}],
            "validate_only": validate_only}
        answer = request(broker.bootstrap, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)
        return answer.responses[0].error_code, answer.responses[0].error_message
    resource = ConfigResource(ResourceType.BROKER, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=op) for key, value, op in ops])
    client = admin(broker)  # held until the answer: a collected client fails its futures
    future = next(iter(client.incremental_alter_configs(
        [resource], validate_only=validate_only).values()))
    try:
        future.result(TIMEOUT)
    except Exception as exc:  # confluent-kafka raises KafkaException(KafkaError)
        return exc.args[0].code(), exc.args[0].str()
    return 0, None


def _ours_alter(broker: Broker, ops: tuple[tuple[str, str | None, Any], ...],
                validate_only: bool) -> tuple[int, str | None]:
    async def run() -> tuple[int, str | None]:
        async with connect(broker.bootstrap, default_client_id="test") as client:
            resource = OurResource(OurType.BROKER, "")
            outcome = (await Admin(client).incremental_alter_configs(
                {resource: [AlterConfigOp(key, value, AlterOpType(op.value))
                            for key, value, op in ops]},
                validate_only=validate_only))[resource]
        if isinstance(outcome, ProtocolKafkaError):
            return int(outcome.code), outcome.message
        return 0, None
    return trio.run(run)


@dataclass(frozen=True)
class Entry:
    value: str | None
    source: int
    read_only: bool
    synonyms: list[tuple[str, str | None, int]]


def describe(broker: Broker, rtype: Any = ResourceType.BROKER, name: str = "0"
             ) -> dict[str, Entry]:
    """DescribeConfigs v4 with synonyms, read off the wire: confluent-kafka keys synonyms by
    name, which folds a key's layers (message.max.bytes dynamic, default, ...) into one."""
    body = {"resources": [{"resource_type": int(rtype.value), "resource_name": name,
                           "configuration_keys": None}],
            "include_synonyms": True, "include_documentation": False}
    result = request(broker.bootstrap, ApiKey.DESCRIBE_CONFIGS, 4, body).results[0]
    assert result.error_code == 0, result.error_message
    return {c.name: Entry(c.value, c.config_source, c.read_only,
                          [(s.name, s.value, s.source) for s in c.synonyms])
            for c in result.configs}


def produce(broker: Broker, topic: str, size: int) -> KafkaError | None:
    results: list = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 5000,
                        "linger.ms": 0})
    producer.produce(topic, value=b"x" * size, on_delivery=lambda e, m: results.append(e))
    producer.flush(10)
    return results[0]


def test_message_max_bytes_default_and_per_broker_take_effect(tool) -> None:  # type: ignore[no-untyped-def]
    """A cluster default lowers message.max.bytes for every topic without an override; the
    broker's own value beats the default; deleting both brings the static value back."""
    # One broker: broker 0's own value must reach the topic's leader, and the tool prints
    # broker 0's configs alone (a node's worker 1000 leads some partitions, its own value
    # unset).
    with Broker(num_cores="1") as broker:
        broker.create_topic("plain")
        broker.create_topic("own", config={"max.message.bytes": "100000"})
        assert produce(broker, "plain", 3000) is None
        r = tool(configs, "--bootstrap-server", broker.bootstrap, "--alter", "--entity-type",
                 "brokers", "--entity-default", "--add-config", "message.max.bytes=2000")
        assert (r.rc, r.out) == (0, "Completed updating default config for brokers in the "
                                    "cluster.\n")
        refused = produce(broker, "plain", 3000)
        assert refused is not None and refused.code() == KafkaError.MSG_SIZE_TOO_LARGE
        assert produce(broker, "own", 3000) is None  # the topic's override wins

        assert alter(broker, "0", ("message.max.bytes", "5000", SET)) == (0, None)
        assert produce(broker, "plain", 3000) is None  # per-broker beats the default
        entry = describe(broker)["message.max.bytes"]
        assert (entry.value, entry.source, entry.read_only) == ("5000", D, False)
        assert entry.synonyms == [("message.max.bytes", "5000", D),
                                   ("message.max.bytes", "2000", DD),
                                   ("message.max.bytes", "1048588", DF)]
        topic = describe(broker, ResourceType.TOPIC, "plain")["max.message.bytes"]
        assert (topic.value, topic.source) == ("5000", D)

        r = tool(configs, "--bootstrap-server", broker.bootstrap, "--describe", "--entity-type",
                 "brokers")
        assert r.lines == [
            "Dynamic configs for broker 0 are:",
            "  message.max.bytes=5000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
            "message.max.bytes=5000, DYNAMIC_DEFAULT_BROKER_CONFIG:message.max.bytes=2000, "
            "DEFAULT_CONFIG:message.max.bytes=1048588}",
            "Default configs for brokers in the cluster are:",
            "  message.max.bytes=2000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
            "message.max.bytes=2000}"]

        assert alter(broker, "0", ("message.max.bytes", None, DELETE)) == (0, None)
        refused = produce(broker, "plain", 3000)
        assert refused is not None and refused.code() == KafkaError.MSG_SIZE_TOO_LARGE
        r = tool(configs, "--bootstrap-server", broker.bootstrap, "--alter", "--entity-type",
                 "brokers", "--entity-default", "--delete-config", "message.max.bytes")
        assert r.rc == 0
        assert produce(broker, "plain", 3000) is None
        entry = describe(broker)["message.max.bytes"]
        assert (entry.value, entry.source) == ("1048588", DF)


@pytest.mark.in_process("applies retention now (the apply_retention verb)")
def test_retention_and_segment_defaults_reach_topics_without_overrides(broker: Broker) -> None:
    """log.segment.bytes and log.retention.ms as cluster defaults: an existing topic's log
    rolls at the new size and its old segments go at the next retention pass; a topic with
    its own retention.ms keeps its data."""
    broker.create_topic("follows")
    broker.create_topic("keeps", config={"retention.ms": "-1"})
    assert alter(broker, "", ("log.segment.bytes", "1100", SET)) == (0, None)
    for _ in range(4):
        assert produce(broker, "follows", 1000) is None
        assert produce(broker, "keeps", 1000) is None

    def segments(topic: str) -> list[Path]:
        assert broker.log_dir is not None
        return sorted((broker.log_dir / f"{topic}-0").glob("*.log"))
    assert len(segments("follows")) == 4  # one batch of ~1,070 bytes per segment
    assert broker.apply_retention() == 0  # a week by default
    assert alter(broker, "", ("log.retention.ms", "1", SET)) == (0, None)
    assert broker.apply_retention() == 3  # all but the active segment, of "follows" only
    assert len(segments("follows")) == 1 and len(segments("keeps")) == 4
    entry = describe(broker, ResourceType.TOPIC, "follows")["retention.ms"]
    assert (entry.value, entry.source) == ("1", DD)


@pytest.mark.in_process("reads the log cleaner's threads and backoff")
def test_cleaner_threads_and_backoff_are_dynamic(tool) -> None:
    """A cleaner that would next run in an hour runs as soon as log.cleaner.backoff.ms is
    lowered; log.cleaner.threads splits the dedupe buffer as Kafka does, within Kafka's
    bounds (at most double, at least half, of the current count)."""
    with Broker(log_cleaner_backoff_ms=3_600_000) as broker:
        broker.create_topic("compacted", config={
            "cleanup.policy": "compact", "segment.bytes": "1100",
            "min.cleanable.dirty.ratio": "0.01"})
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        for i in range(6):
            producer.produce("compacted", key=b"same", value=b"v%d" % i + b"x" * 1000)
            producer.flush(10)
        assert broker.log_dir is not None
        checkpoint = broker.log_dir / CLEANER_CHECKPOINT
        assert not checkpoint.exists()  # the cleaner's first pass is an hour away
        r = tool(configs, "--bootstrap-server", broker.bootstrap, "--alter", "--entity-type",
                 "brokers", "--entity-default", "--add-config", "log.cleaner.backoff.ms=100")
        assert r.rc == 0
        # The reconfigured cleaner runs at once, on its own: its pass writes the checkpoint.
        wait_until(checkpoint.exists, what="a cleaning pass after the backoff was lowered")
        assert "compacted 0" in checkpoint.read_text()
        # Any reconfiguration of the cleaner starts a pass at once (Kafka restarts its
        # threads), so the thread count is changed only after the backoff was checked.
        cleaner = broker.server_info.broker.cleaner
        entries = cleaner.max_map_entries
        assert alter(broker, "0", ("log.cleaner.threads", "2", SET)) == (0, None)
        assert cleaner.max_map_entries == entries // 2
        code, message = alter(broker, "0", ("log.cleaner.threads", "5", SET))
        assert (code, message) == (KafkaError.INVALID_REQUEST, (
            "Invalid value org.apache.kafka.common.config.ConfigException: Log cleaner "
            "threads cannot be increased to more than double the current value 2 for "
            "configuration Invalid dynamic configuration"))


REFUSALS = [
    ("0", ("num.partitions", "3"), "Cannot update these configs dynamically: Set(num.partitions)"),
    ("", ("log.retention.hours", "3"),
     "Cannot update these configs dynamically: Set(log.retention.hours)"),
    ("0", ("ssl.keystore.location", "/x"), "These security configs can be dynamically updated "
     "only per-listener using the listener prefix: HashSet(ssl.keystore.location)"),
    ("", ("message.max.bytes", "abc"),
     "Invalid value abc for configuration message.max.bytes: Not a number of type INT"),
    ("", ("listener.name.ssl.ssl.keystore.location", "/x"), "Cannot update these configs at "
     "default cluster level, broker id must be specified: "
     "Set(listener.name.ssl.ssl.keystore.location)"),
    ("1", ("log.retention.ms", "5"), "Unexpected broker id, expected 0, but received 1"),
    ("0", ("listener.name.plaintext.ssl.keystore.location", "/x"),
     "Invalid value org.apache.kafka.common.config.ConfigException: Listener PLAINTEXT is not "
     "an SSL or SASL_SSL listener of this broker for configuration Invalid dynamic "
     "configuration"),
]


def test_refusals_are_kafkas_and_change_nothing(broker: Broker) -> None:
    for name, (key, value), message in REFUSALS:
        assert alter(broker, name, (key, value, SET)) == (KafkaError.INVALID_REQUEST, message)
    # validate_only checks and stores nothing
    assert alter(broker, "0", ("log.retention.ms", "5000", SET), validate_only=True) == (0, None)
    entries = describe(broker)
    assert all(e.source not in (D, DD) for e in entries.values())
    assert entries["log.retention.ms"].source == DF


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_legacy_alter_configs_replaces_the_level(broker: Broker) -> None:
    assert alter(broker, "0", ("log.retention.ms", "5000", SET),
                 ("log.retention.bytes", "100000", SET)) == (0, None)
    resource = ConfigResource(ResourceType.BROKER, "0", set_config={"log.roll.ms": "60000"})
    assert ck_code(next(iter(admin(broker).alter_configs([resource]).values()))) == 0
    dynamic = {k for k, e in describe(broker).items() if e.source == D}
    assert dynamic == {"log.roll.ms"}


def test_dynamic_configs_survive_a_restart(tmp_path: Path, tool) -> None:
    """Kept beside the data (pybroker-metadata.json); a restarted broker starts with them."""
    # One broker: its metadata file is the single broker's store (a node's brokers keep theirs
    # in the node's metadata service).
    with Broker(log_dir=tmp_path, num_cores="1") as broker:
        broker.create_topic("t")
        assert alter(broker, "", ("message.max.bytes", "2000", SET)) == (0, None)
        assert alter(broker, "0", ("log.retention.ms", "7000", SET)) == (0, None)
        broker.restart()
        refused = produce(broker, "t", 3000)
        assert refused is not None and refused.code() == KafkaError.MSG_SIZE_TOO_LARGE
        entries = describe(broker)
        assert (entries["message.max.bytes"].value, entries["message.max.bytes"].source) == \
            ("2000", DD)
        assert (entries["log.retention.ms"].value, entries["log.retention.ms"].source) == \
            ("7000", D)
    stored = json.loads((tmp_path / "pybroker-metadata.json").read_text())["broker_configs"]
    assert stored == {"<default>": {"message.max.bytes": "2000"},
                      "0": {"log.retention.ms": "7000"}}


def test_alters_arriving_together_both_count(broker: Broker) -> None:
    """Ten IncrementalAlterConfigs of the cluster default, each setting its own key, sent at
    once on ten connections: each edits what the one before it stored, none is lost."""
    keys = ["log.retention.ms", "log.retention.bytes", "log.segment.bytes", "log.roll.ms",
            "log.roll.jitter.ms", "log.flush.interval.messages", "log.flush.interval.ms",
            "log.index.interval.bytes", "log.segment.delete.delay.ms", "message.max.bytes"]
    connections = [RawConnection(broker.bootstrap) for _ in keys]
    try:
        for conn, key in zip(connections, keys):
            body = {"resources": [{"resource_type": 4, "resource_name": "", "configs": [
                {"name": key, "config_operation": 0, "value": "1000000"}]}],
                "validate_only": False}
            conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body, expect_response=False)
        for conn in connections:
            _, answer = decode_response(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, conn.read_frame())
            assert answer.responses[0].error_code == 0
    finally:
        for conn in connections:
            conn.close()
    dynamic = {name for name, e in describe(broker).items() if e.source == DD}
    assert dynamic == set(keys)


@pytest.mark.in_process("lists the broker's reconfigurable parts")
def test_every_key_accepted_dynamically_has_a_part_that_applies_it(broker: Broker) -> None:
    """No silent accept: each key a dynamic change may carry is followed by a part of the
    running broker (log defaults, cleaner, connection limits, TLS listeners)."""
    parts = broker.server_info.broker.dynamic_config.reconfigurables
    assert not [key for key in APPLIED if not any(part.follows(key) for part in parts)]
    assert all(BROKER_CONFIG_DEFS[key].state is KeyState.HONOURED for key in APPLIED)
