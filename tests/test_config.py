"""Broker and topic configuration: properties parsing, Kafka's defaults and precedence,
validation messages, topic config resolution and DescribeConfigs rows."""
from __future__ import annotations

import logging
import pathlib
import re
import subprocess
import sys

import pytest

from pybroker.config import (
    BROKER_CONFIG_DEFS, TOPIC_CONFIG_DEFS, TOPIC_CONFIG_SYNONYMS, BrokerConfig, ConfigError,
    ConfigSource, ConfigType, Listener, describe_broker_config, describe_topic_config,
    load_broker_config, load_properties, parse_properties, resolve_topic_config,
    validate_topic_configs,
)
from pybroker.config.definitions import to_config_string

ROOT = pathlib.Path(__file__).resolve().parent.parent
CONFIG_DIR = ROOT / "config"
# Broker configs; config/zookeeper.properties is ZooKeeper's (bin/zookeeper-server-start.sh).
SHIPPED = sorted(path for path in CONFIG_DIR.rglob("*.properties")
                 if path.name != "zookeeper.properties")


def _entry(entries, name):
    return next(entry for entry in entries if entry.name == name)


def _synonyms(entry):
    return [(s.name, s.value, s.source) for s in entry.synonyms]


# --- properties files ----------------------------------------------------------------------------


def test_comments_blank_lines_and_separators() -> None:
    text = (
        "# a comment\n"
        "   ! another comment, indented\n"
        "\n"
        "a=1\n"
        "b: 2\n"
        "c 3\n"
        "  d  =  four  \n"
        "e=\n"
        "f\n"
        "g:=h\n"
    )
    assert parse_properties(text) == {
        "a": "1", "b": "2", "c": "3", "d": "four", "e": "", "f": "", "g": "=h"}


def test_continuation_lines() -> None:
    text = ("listeners=PLAINTEXT://a:1,\\\n"
            "          PLAINTEXT2://b:2\n"
            "# not continued \\\n"
            "x=1\n"
            "even=ends in a backslash\\\\\n"
            "y=2\n"
            "z=last\\")
    assert parse_properties(text) == {
        "listeners": "PLAINTEXT://a:1,PLAINTEXT2://b:2", "x": "1",
        "even": "ends in a backslash\\", "y": "2", "z": "last"}


def test_continued_line_starting_with_hash_is_not_a_comment() -> None:
    assert parse_properties("k=a\\\n  #b\n") == {"k": "a#b"}


def test_escapes_and_trailing_whitespace() -> None:
    text = ("key\\=with\\:seps=v\n"
            "tab=a\\tb\n"
            "uni=\\u0041\\u00e9\n"
            "kept=space\\ \n"
            "trimmed=value \t \n"
            "pair=\\uD83D\\uDE00\n")
    assert parse_properties(text) == {
        "key=with:seps": "v", "tab": "a\tb", "uni": "Aé", "kept": "space ",
        "trimmed": "value", "pair": "\U0001F600"}


def test_crlf_and_last_duplicate_wins() -> None:
    assert parse_properties("a=1\r\nb=2\ra=3\r\n") == {"a": "3", "b": "2"}


def test_malformed_unicode_escape_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="Malformed"):
        parse_properties("bad=\\u12G4\n")


def test_load_properties_reads_utf8_and_latin1(tmp_path: pathlib.Path) -> None:
    utf8 = tmp_path / "a.properties"
    utf8.write_bytes("log.dirs=/data/é\n".encode("utf-8"))
    latin1 = tmp_path / "b.properties"
    latin1.write_bytes("log.dirs=/data/é\n".encode("iso-8859-1"))
    assert load_properties(utf8) == {"log.dirs": "/data/é"}
    assert load_properties(latin1) == {"log.dirs": "/data/é"}


# --- defaults ------------------------------------------------------------------------------------

KAFKA_DEFAULTS = {
    "num.partitions": 1, "default.replication.factor": 1, "auto.create.topics.enable": True,
    "delete.topic.enable": True, "log.segment.bytes": 1073741824, "log.roll.hours": 168,
    "log.roll.ms": None, "log.retention.hours": 168, "log.retention.minutes": None,
    "log.retention.ms": None, "log.retention.bytes": -1,
    "log.retention.check.interval.ms": 300000, "log.index.interval.bytes": 4096,
    "log.index.size.max.bytes": 10485760, "log.flush.interval.messages": 2**63 - 1,
    "log.flush.interval.ms": None, "log.flush.scheduler.interval.ms": 2**63 - 1,
    "log.flush.offset.checkpoint.interval.ms": 60000, "log.cleanup.policy": ("delete",),
    "log.cleaner.enable": True, "log.cleaner.delete.retention.ms": 86400000,
    "log.cleaner.min.cleanable.ratio": 0.5, "log.cleaner.min.compaction.lag.ms": 0,
    "log.cleaner.backoff.ms": 15000, "log.message.timestamp.type": "CreateTime",
    "message.max.bytes": 1048588, "replica.fetch.max.bytes": 1048576,
    "socket.request.max.bytes": 104857600, "connections.max.idle.ms": 600000,
    "num.network.threads": 3, "num.io.threads": 8, "group.initial.rebalance.delay.ms": 3000,
    "group.min.session.timeout.ms": 6000, "group.max.session.timeout.ms": 1800000,
    "group.max.size": 2**31 - 1, "offsets.topic.num.partitions": 50,
    "offsets.topic.replication.factor": 3, "offsets.retention.minutes": 10080,
    "offsets.commit.timeout.ms": 5000, "transaction.state.log.num.partitions": 50,
    "transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2,
    "transactional.id.expiration.ms": 604800000, "transaction.max.timeout.ms": 900000,
    "min.insync.replicas": 1, "unclean.leader.election.enable": False,
    "compression.type": "producer", "zookeeper.connect": None, "cluster.id": None,
    "process.roles": (), "log.dir": ("/tmp/kafka-logs",), "log.dirs": None,
}


@pytest.mark.parametrize(("name", "expected"), sorted(KAFKA_DEFAULTS.items()))
def test_kafka_defaults(name: str, expected: object) -> None:
    config = load_broker_config(None, {})
    assert config[name] == expected
    assert config.source(name) == "DEFAULT_CONFIG"


def test_socket_buffers_default_to_the_systems_autotuning() -> None:
    """The one deliberate difference from Kafka's defaults (102400 for both): fixed buffers
    measured 20-30 % slower for large records here; a configured value is applied."""
    config = load_broker_config(None, {})
    assert (config.socket_send_buffer_bytes, config.socket_receive_buffer_bytes) == (-1, -1)
    configured = load_broker_config(None, {"socket.send.buffer.bytes": "102400"})
    assert configured.socket_send_buffer_bytes == 102400


def test_typed_attributes_with_no_configuration() -> None:
    config = load_broker_config()
    assert config.warnings == ()
    assert config.explicit == frozenset()
    assert (config.node_id, config.broker_id) == (0, 0)
    assert config.listeners == (Listener("PLAINTEXT", "127.0.0.1", 9092),)
    assert config.advertised_listeners == config.listeners
    assert config.listeners[0] == ("PLAINTEXT", "127.0.0.1", 9092)
    assert config.log_dirs == ("/tmp/kafka-logs",)
    assert config.log_retention_ms == 7 * 24 * 3600 * 1000
    assert config.log_roll_ms == 7 * 24 * 3600 * 1000
    assert config.log_flush_interval_ms == 2**63 - 1
    assert config.log_cleanup_policy == frozenset({"delete"})
    assert config.inter_broker_listener_name == "PLAINTEXT"


def test_config_is_read_only() -> None:
    config = load_broker_config()
    with pytest.raises(AttributeError):
        config.node_id = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        config["node.id"] = 5  # type: ignore[index]


# --- precedence ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("given", "expected_ms"), [
    ({"log.retention.hours": "2"}, 2 * 3600000),
    ({"log.retention.hours": "2", "log.retention.minutes": "3"}, 3 * 60000),
    ({"log.retention.hours": "2", "log.retention.minutes": "3", "log.retention.ms": "4"}, 4),
    ({"log.retention.minutes": "3", "log.retention.ms": "4"}, 4),
    ({"log.retention.ms": "-1"}, -1),
    ({"log.retention.ms": "-5"}, -1),
    ({"log.retention.hours": "-1"}, -1),
    ({"log.retention.minutes": "-1", "log.retention.hours": "5"}, -1),
])
def test_retention_precedence(given: dict[str, str], expected_ms: int) -> None:
    config = load_broker_config(None, given)
    assert config.log_retention_ms == expected_ms
    assert resolve_topic_config(config, {}).retention_ms == expected_ms


def test_roll_and_flush_fallbacks() -> None:
    assert load_broker_config(None, {"log.roll.hours": "1"}).log_roll_ms == 3600000
    assert load_broker_config(None, {"log.roll.hours": "1", "log.roll.ms": "5"}).log_roll_ms == 5
    assert load_broker_config(
        None, {"log.flush.scheduler.interval.ms": "700"}).log_flush_interval_ms == 700
    assert load_broker_config(None, {"log.flush.scheduler.interval.ms": "700",
                                     "log.flush.interval.ms": "20"}).log_flush_interval_ms == 20


def test_log_dirs_wins_over_log_dir() -> None:
    assert load_broker_config(None, {"log.dir": "/a"}).log_dirs == ("/a",)
    both = load_broker_config(None, {"log.dir": "/a", "log.dirs": "/b, /c"})
    assert both.log_dirs == ("/b", "/c")


def test_overrides_win_over_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=3\nlog.dirs=/from/file\n")
    config = load_broker_config(path, {"num.partitions": "7", "delete.topic.enable": False})
    assert config.num_partitions == 7
    assert config.log_dirs == ("/from/file",)
    assert config.delete_topic_enable is False
    assert config.source("num.partitions") == "STATIC_BROKER_CONFIG"
    assert config.source("log.dirs") == "STATIC_BROKER_CONFIG"
    assert config.source("message.max.bytes") == "DEFAULT_CONFIG"
    assert config.explicit == {"num.partitions", "log.dirs", "delete.topic.enable"}


def test_node_id_and_broker_id_are_one_setting() -> None:
    assert load_broker_config(None, {"broker.id": "4"}).node_id == 4
    assert load_broker_config(None, {"node.id": "4"}).broker_id == 4
    same = load_broker_config(None, {"node.id": "4", "broker.id": "4"})
    assert (same.node_id, same.broker_id) == (4, 4)
    with pytest.raises(ConfigError, match="broker.id"):
        load_broker_config(None, {"node.id": "4", "broker.id": "5"})


# --- shipped files and Kafka's own -----------------------------------------------------------------


def test_config_dir_has_the_expected_files() -> None:
    names = {path.relative_to(CONFIG_DIR).as_posix() for path in SHIPPED}
    assert {"standalone/server.properties", "cluster/server-1.properties", "cluster/server-2.properties",
            "cluster/server-3.properties"} <= names


def _inert_keys_warned(config: BrokerConfig) -> dict[str, str]:
    """The keys `config` warned about as inert, each with the feature its warning names;
    fails on any other warning."""
    warned = {}
    for message in config.warnings:
        match = re.fullmatch(r"Configuration '([a-z.]+)' has no effect yet: it is used by "
                             r"([a-z]+) \(.*\), which pybroker does not have yet", message)
        assert match, message
        warned[match.group(1)] = match.group(2)
    return warned


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.relative_to(CONFIG_DIR).as_posix())
def test_shipped_file_warns_only_about_inert_keys(path: pathlib.Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    """Every shipped file loads silently: each key it sets takes effect (the transaction
    log's keys, inert until transactions land, are there commented out)."""
    with caplog.at_level(logging.WARNING, logger="pybroker.config"):
        config = load_broker_config(path, {})
    assert _inert_keys_warned(config) == {}
    assert [r.getMessage() for r in caplog.records] == list(config.warnings)


def test_single_broker_file_values() -> None:
    config = load_broker_config(CONFIG_DIR / "standalone" / "server.properties", {})
    assert config.node_id == 0
    assert config.listeners == (Listener("PLAINTEXT", "127.0.0.1", 9092),)
    assert config.advertised_listeners == config.listeners
    assert config.log_dirs == ("/tmp/pybroker-logs",)
    assert config.group_initial_rebalance_delay_ms == 0
    assert config.offsets_topic_replication_factor == 1
    # Commented out (inert until transactions land), so Kafka's defaults stand.
    assert config.transaction_state_log_replication_factor == 3
    assert config.log_retention_ms == 168 * 3600000
    assert config["log.flush.interval.messages"] == 2**63 - 1  # commented out: Kafka's default


def test_zookeeper_file_values() -> None:
    """config/server.properties is Kafka's quickstart broker (issue #27): broker 0 on
    127.0.0.1:9092 through port's default, data in log.dir, registered at the root of
    config/zookeeper.properties's server, internal topics with one replica."""
    config = load_broker_config(CONFIG_DIR / "server.properties", {})
    text = (CONFIG_DIR / "server.properties").read_text()
    assert config.node_id == 0 and "broker.id=0" in text.splitlines()
    assert config.listeners == (Listener("PLAINTEXT", "127.0.0.1", 9092),)
    # The keys the quickstart edits must not be shadowed by keys the file sets.
    assert not {"listeners", "log.dirs", "node.id"} & config.explicit
    assert config.log_dirs == ("/tmp/kafka-logs",)
    zookeeper = load_properties(CONFIG_DIR / "zookeeper.properties")
    assert config.zookeeper_connect == f"localhost:{zookeeper['clientPort']}"
    assert config.offsets_topic_replication_factor == 1
    assert config.warnings == ()


def test_a_copy_edited_as_kafkas_quickstart_says_is_a_second_broker() -> None:
    """`cp config/server.properties config/server-1.properties`, then broker.id=1,
    port=9093, log.dir=/tmp/kafka-logs-1: each edit takes effect, the port one with
    Kafka 0.8's deprecation warning naming listeners."""
    lines = (CONFIG_DIR / "server.properties").read_text().splitlines()
    edits = {"broker.id": "1", "port": "9093", "log.dir": "/tmp/kafka-logs-1"}
    edited = [f"{line.split('=')[0]}={edits.pop(line.split('=')[0])}"
              if line.split("=")[0] in edits else line for line in lines]
    edited += [f"{k}={v}" for k, v in edits.items()]
    config = load_broker_config(None, parse_properties("\n".join(edited)))
    assert config.node_id == 1
    assert config.listeners == (Listener("PLAINTEXT", "127.0.0.1", 9093),)
    assert config.log_dirs == ("/tmp/kafka-logs-1",)
    assert config.warnings == (
        "Configuration 'port' is deprecated: use listeners=PLAINTEXT://127.0.0.1:9093",)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_cluster_files_values(n: int) -> None:
    """Kafka's quickstart cluster: ids 1-3 on ports 9092-9094 (HTTP 9644-9646), one data dir
    each, at the root of config/zookeeper.properties's server, RF 3 with min.insync 2."""
    config = load_broker_config(CONFIG_DIR / "cluster" / f"server-{n}.properties", {})
    assert config.node_id == n
    assert config.listeners == (Listener("PLAINTEXT", "127.0.0.1", 9091 + n),)
    assert config.advertised_listeners == config.listeners
    # the HTTP side door too: 9644 like config/standalone/server.properties, then 9645 and 9646
    assert config.http_listeners == (Listener("HTTP", "127.0.0.1", 9643 + n),)
    assert config.log_dirs == (f"/tmp/pybroker-logs-{n}",)
    zookeeper = load_properties(CONFIG_DIR / "zookeeper.properties")
    # No chroot: Kafka's quickstart types --zookeeper localhost:2181 (issue #27).
    assert config.zookeeper_connect == f"localhost:{zookeeper['clientPort']}"
    # ZooKeeper grants sessions of 2 to 20 ticks; zookeeper.properties keeps its default
    # tickTime (3000 ms), so 6000 is the shortest it accepts as asked.
    assert "tickTime" not in zookeeper
    assert config["zookeeper.session.timeout.ms"] == 6000
    assert (config.default_replication_factor, config.min_insync_replicas) == (3, 2)
    assert config.offsets_topic_replication_factor == 3
    assert config["unclean.leader.election.enable"] is False
    # Inert until transactions land: commented out, so Kafka's defaults (3 and 2) stand.
    assert config.transaction_state_log_replication_factor == 3


def test_cluster_files_differ_only_in_identity_ports_and_data_dir() -> None:
    texts = [(CONFIG_DIR / "cluster" / f"server-{n}.properties").read_text()
             for n in (1, 2, 3)]
    for n, text in enumerate(texts, 1):
        normalised = re.sub(r"server-\d\.properties", "server-N.properties", text)
        normalised = normalised.replace(f"broker {n} of", "broker N of")
        normalised = normalised.replace(f"node.id={n}", "node.id=N")
        normalised = normalised.replace(f"127.0.0.1:{9091 + n}", "127.0.0.1:PORT")
        normalised = normalised.replace(f"127.0.0.1:{9643 + n}", "127.0.0.1:HTTP_PORT")
        normalised = normalised.replace(f"/tmp/pybroker-logs-{n}", "/tmp/pybroker-logs-N")
        texts[n - 1] = normalised
    assert texts[0] == texts[1] == texts[2]


KAFKA_KRAFT_STYLE = """\
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""

KAFKA_ZOOKEEPER_STYLE = """\
broker.id=0
num.network.threads=3
num.io.threads=8
log.dirs=/tmp/kafka-logs
num.partitions=1
offsets.topic.replication.factor=1
log.retention.hours=168
zookeeper.connect=localhost:2181
zookeeper.connection.timeout.ms=18000
group.initial.rebalance.delay.ms=0
"""


def test_kafka_kraft_style_file_loads_warning_only_about_inert_keys() -> None:
    config = load_broker_config(None, parse_properties(KAFKA_KRAFT_STYLE))
    assert _inert_keys_warned(config) == {}
    assert config.listeners == (Listener("PLAINTEXT", "", 9092), Listener("CONTROLLER", "", 9093))
    assert config.advertised_listeners == (Listener("PLAINTEXT", "localhost", 9092),)
    assert config.broker_listeners == (Listener("PLAINTEXT", "", 9092),)
    assert config.process_roles == ("broker", "controller")


def test_kafka_zookeeper_style_file_loads_as_a_cluster_member() -> None:
    """Kafka's ZooKeeper-mode server.properties loads without a warning: zookeeper.connect and
    its timeout make the broker a member of the cluster coordinated there (issue #11)."""
    config = load_broker_config(None, parse_properties(KAFKA_ZOOKEEPER_STYLE))
    assert _inert_keys_warned(config) == {}
    assert config.node_id == 0
    assert config.zookeeper_connect == "localhost:2181"


def test_a_sasl_ssl_listener_needs_its_key_material_and_mechanisms() -> None:
    # Served with TLS and SASL both: Kafka's default mechanism GSSAPI is refused as on
    # SASL_PLAINTEXT, whatever the listener is called.
    with pytest.raises(ConfigError, match="GSSAPI"):
        load_broker_config(None, {"listeners": "EXTERNAL://127.0.0.1:9093",
                                  "inter.broker.listener.name": "EXTERNAL",
                                  "listener.security.protocol.map":
                                      "EXTERNAL:SASL_SSL,PLAINTEXT:PLAINTEXT"})


def test_ssl_listener_is_accepted() -> None:
    # Served with TLS (its key material is checked at start: tests/test_tls_config.py).
    config = load_broker_config(None, {"listeners": "SSL://127.0.0.1:9093",
                                       "security.inter.broker.protocol": "SSL"})
    assert config.listener_security_protocol_map["SSL"] == "SSL"
    assert config.inter_broker_listener_name == "SSL"


def test_a_sasl_plaintext_listener_left_with_gssapi_is_refused() -> None:
    with pytest.raises(ConfigError, match="GSSAPI .Kerberos. is not supported"):
        load_broker_config(None, {"listeners": "SASL_PLAINTEXT://127.0.0.1:9093",
                                  "inter.broker.listener.name": "SASL_PLAINTEXT"})
    config = load_broker_config(None, {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:9093",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_plaintext.sasl.jaas.config":
            'org.apache.kafka.common.security.scram.ScramLoginModule required;'})
    assert config.sasl_listeners["SASL_PLAINTEXT"].mechanisms == ("SCRAM-SHA-512",)
    assert config.warnings == ()


def test_every_plaintext_client_listener_is_served() -> None:
    config = load_broker_config(None, {
        "listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"})
    assert [item.name for item in config.broker_listeners] == ["PLAINTEXT", "INTERNAL"]


def test_plaintext_listener_under_another_name_is_served() -> None:
    config = load_broker_config(None, {
        "listeners": "CLIENT://127.0.0.1:9092", "inter.broker.listener.name": "CLIENT",
        "listener.security.protocol.map": "CLIENT:PLAINTEXT"})
    assert config.broker_listeners == (Listener("CLIENT", "127.0.0.1", 9092),)


def test_controller_listener_gets_plaintext_when_no_map_is_given() -> None:
    config = load_broker_config(None, {"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
                                       "controller.listener.names": "CONTROLLER"})
    assert config.listener_security_protocol_map["CONTROLLER"] == "PLAINTEXT"


def test_ipv6_listener_and_port_zero() -> None:
    config = load_broker_config(None, {"listeners": "PLAINTEXT://[::1]:0"})
    assert config.listeners == (Listener("PLAINTEXT", "::1", 0),)
    assert config.listeners[0].url == "PLAINTEXT://[::1]:0"


# --- Kafka 0.8's listener keys ----------------------------------------------------------------------


@pytest.mark.parametrize("given, listener", [
    ({"port": "9093", "host.name": "127.0.0.1"}, "PLAINTEXT://127.0.0.1:9093"),
    ({"port": "9093"}, "PLAINTEXT://127.0.0.1:9093"),  # pybroker's loopback default host
    ({"host.name": ""}, "PLAINTEXT://:9092"),  # every interface, Kafka's default port
    ({"host.name": "::1", "port": "0"}, "PLAINTEXT://[::1]:0"),
])
def test_port_and_host_name_make_the_listener_when_listeners_is_unset(
        given: dict[str, str], listener: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="pybroker.config"):
        config = load_broker_config(None, given)
    assert [item.url for item in config.listeners] == [listener]
    assert [item.url for item in config.advertised_listeners] == [listener]
    assert config.warnings == tuple(f"Configuration '{name}' is deprecated: use "
                                    f"listeners={listener}"
                                    for name in ("port", "host.name") if name in given)
    assert [r.getMessage() for r in caplog.records] == list(config.warnings)


def test_listeners_wins_over_port_and_host_name() -> None:
    config = load_broker_config(None, {"listeners": "PLAINTEXT://127.0.0.1:9094",
                                       "port": "9093", "host.name": "0.0.0.0"})
    assert config.listeners == (Listener("PLAINTEXT", "127.0.0.1", 9094),)
    assert config.warnings == (
        "Configuration 'port' (9093) is ignored: listeners is set and wins "
        "(PLAINTEXT://127.0.0.1:9094); port is deprecated",
        "Configuration 'host.name' (0.0.0.0) is ignored: listeners is set and wins "
        "(PLAINTEXT://127.0.0.1:9094); host.name is deprecated")


def test_log_dirs_wins_over_log_dir_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="pybroker.config"):
        config = load_broker_config(None, {"log.dirs": "/data/a,/data/b",
                                           "log.dir": "/tmp/kafka-logs-1"})
    assert config.log_dirs == ("/data/a", "/data/b")
    assert config.warnings == ("Configuration 'log.dir' (/tmp/kafka-logs-1) is ignored: "
                               "log.dirs is set and wins (/data/a,/data/b)",)
    assert [r.getMessage() for r in caplog.records] == list(config.warnings)
    assert load_broker_config(None, {"log.dir": "/tmp/x"}).warnings == ()
    assert load_broker_config(None, {"log.dirs": "/tmp/x"}).warnings == ()


@pytest.mark.parametrize("given, advertised", [
    ({"advertised.host.name": "broker1.example"}, "PLAINTEXT://broker1.example:9092"),
    ({"advertised.port": "19092"}, "PLAINTEXT://127.0.0.1:19092"),
    ({"port": "9093", "advertised.host.name": "b", "advertised.port": "1"}, "PLAINTEXT://b:1"),
    ({"listeners": "INTERNAL://:0,PLAINTEXT://10.0.0.1:0",
      "listener.security.protocol.map": "INTERNAL:PLAINTEXT,PLAINTEXT:PLAINTEXT",
      "advertised.host.name": "public.example"}, "PLAINTEXT://public.example:0"),
])
def test_advertised_host_name_and_port_replace_the_plaintext_listeners(
        given: dict[str, str], advertised: str) -> None:
    config = load_broker_config(None, given)
    assert [item.url for item in config.advertised_listeners] == [advertised]
    assert all(f"use advertised.listeners={advertised}" in message
               for message in config.warnings if "'advertised." in message)


def test_advertised_listeners_wins_over_advertised_host_name() -> None:
    config = load_broker_config(None, {"advertised.listeners": "PLAINTEXT://a:1",
                                       "advertised.host.name": "b", "advertised.port": "2"})
    assert [item.url for item in config.advertised_listeners] == ["PLAINTEXT://a:1"]
    assert config.warnings == tuple(
        f"Configuration '{name}' ({value}) is ignored: advertised.listeners is set and wins "
        f"(PLAINTEXT://a:1); {name} is deprecated"
        for name, value in (("advertised.host.name", "b"), ("advertised.port", "2")))


@pytest.mark.parametrize("given, key", [
    ({"advertised.port": "1", "listeners": "INTERNAL://:0",
      "listener.security.protocol.map": "INTERNAL:PLAINTEXT"}, "advertised.port"),
    ({"port": "65536"}, "port"),
    ({"advertised.host.name": "0.0.0.0"}, "advertised.listeners"),
])
def test_legacy_listener_key_errors(given: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_broker_config(None, given)
    assert caught.value.key == key


# --- unknown keys and invalid values ---------------------------------------------------------------


def test_unknown_key_warns_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="pybroker.config"):
        config = load_broker_config(None, {"no.such.setting": "1", "retention.ms": "5"})
    assert len(config.warnings) == 2
    assert "no.such.setting" in config.warnings[0]
    assert "log.retention.ms" in config.warnings[1]  # a topic name gets a hint
    assert [r.levelno for r in caplog.records] == [logging.WARNING, logging.WARNING]
    assert config.originals["no.such.setting"] == "1"
    assert config.log_retention_ms == 604800000


@pytest.mark.parametrize(("given", "message"), [
    ({"num.partitions": "abc"},
     "Invalid value abc for configuration num.partitions: Not a number of type INT"),
    ({"num.partitions": "0"},
     "Invalid value 0 for configuration num.partitions: Value must be at least 1"),
    ({"num.partitions": "-3"},
     "Invalid value -3 for configuration num.partitions: Value must be at least 1"),
    ({"message.max.bytes": "-5"},
     "Invalid value -5 for configuration message.max.bytes: Value must be at least 0"),
    ({"log.cleanup.policy": "bogus"},
     "Invalid value bogus for configuration log.cleanup.policy: String must be one of: "
     "compact, delete"),
    ({"auto.create.topics.enable": "yes"},
     "Invalid value yes for configuration auto.create.topics.enable: Expected value to be "
     "either true or false"),
    ({"num.partitions": "2147483648"},
     "Invalid value 2147483648 for configuration num.partitions: Not a number of type INT"),
    ({"log.retention.bytes": "9223372036854775808"},
     "Invalid value 9223372036854775808 for configuration log.retention.bytes: Not a number "
     "of type LONG"),
    ({"log.segment.bytes": "13"},
     "Invalid value 13 for configuration log.segment.bytes: Value must be at least 14"),
    ({"log.cleaner.min.cleanable.ratio": "1.5"},
     "Invalid value 1.5 for configuration log.cleaner.min.cleanable.ratio: Value must be no "
     "more than 1"),
    ({"compression.type": "brotli"},
     "Invalid value brotli for configuration compression.type: String must be one of: "
     "uncompressed, zstd, lz4, snappy, gzip, producer"),
    ({"group.consumer.migration.policy": "sideways"},
     "Invalid value sideways for configuration group.consumer.migration.policy: String must "
     "be one of (case insensitive): DISABLED, DOWNGRADE, UPGRADE, BIDIRECTIONAL"),
    ({"group.consumer.migration.policy": ""},
     "Invalid value  for configuration group.consumer.migration.policy: String must "
     "be one of (case insensitive): DISABLED, DOWNGRADE, UPGRADE, BIDIRECTIONAL"),
])
def test_invalid_values_give_kafkas_message(given: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_broker_config(None, given)
    assert str(info.value) == message
    assert info.value.key == next(iter(given))


@pytest.mark.parametrize("policy", ["bidirectional", "Upgrade", "DOWNGRADE", "disabled"])
def test_migration_policy_takes_kafkas_names_in_any_case(policy: str) -> None:
    """Kafka's CaseInsensitiveValidString: case is no error (its default: bidirectional)."""
    assert load_broker_config(None, {})["group.consumer.migration.policy"] == \
        "bidirectional"
    given = load_broker_config(None, {"group.consumer.migration.policy": policy})
    assert given["group.consumer.migration.policy"] == policy


@pytest.mark.parametrize(("given", "key"), [
    ({"num.partitions": "1_000"}, "num.partitions"),
    ({"num.partitions": "1.0"}, "num.partitions"),
    ({"listeners": "PLAINTEXT:/localhost:9092"}, "listeners"),
    ({"listeners": "localhost:9092"}, "listeners"),
    ({"listeners": "PLAINTEXT://localhost:99999"}, "listeners"),
    ({"listeners": "PLAINTEXT://localhost"}, "listeners"),
    ({"listeners": "FOO://localhost:9092"}, "listeners"),
    ({"listeners": ""}, "listeners"),
    ({"listeners": "PLAINTEXT://a:1,PLAINTEXT://b:2"}, "listeners"),
    ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners"),
    ({"advertised.listeners": "OTHER://a:1"}, "advertised.listeners"),
    ({"advertised.listeners": "PLAINTEXT://a:1\\nmore"}, "advertised.listeners"),
    ({"log.dirs": "/a,/a"}, "log.dirs"),
    ({"log.dirs": ""}, "log.dirs"),
    ({"process.roles": "broker,worker"}, "process.roles"),
    ({"listener.security.protocol.map": "PLAINTEXT:QUIC"}, "listener.security.protocol.map"),
    ({"inter.broker.listener.name": "NOPE"}, "inter.broker.listener.name"),
    ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
     "inter.broker.listener.name"),
    ({"security.inter.broker.protocol": "SSL"}, "security.inter.broker.protocol"),
    ({"security.inter.broker.protocol": "SASL_PLAINTEXT"}, "security.inter.broker.protocol"),
    ({"node.id": "-1"}, "node.id"),
    ({"offsets.topic.replication.factor": "40000"}, "offsets.topic.replication.factor"),
    ({"log.retention.check.interval.ms": "0"}, "log.retention.check.interval.ms"),
])
def test_invalid_values_name_the_key_in_one_line(given: dict[str, str], key: str) -> None:
    given = {name: value.replace("\\n", "\n") for name, value in given.items()}
    with pytest.raises(ConfigError) as info:
        load_broker_config(None, given)
    assert info.value.key == key
    assert key in str(info.value)
    assert "\n" not in str(info.value)


def test_invalid_value_in_a_file_is_reported(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("num.partitions = abc\n")
    with pytest.raises(ConfigError, match="num.partitions"):
        load_broker_config(path, {})


def test_every_default_passes_its_own_validator() -> None:
    for key in [*BROKER_CONFIG_DEFS.values(), *TOPIC_CONFIG_DEFS.values()]:
        if key.default is not None:
            assert key.parse(to_config_string(key.default) or "") == key.default, key.name


# --- topic configs ---------------------------------------------------------------------------------


def test_topic_synonym_map_matches_kafka() -> None:
    assert TOPIC_CONFIG_SYNONYMS == {
        "cleanup.policy": "log.cleanup.policy",
        "compression.type": "compression.type",
        "delete.retention.ms": "log.cleaner.delete.retention.ms",
        "file.delete.delay.ms": "log.segment.delete.delay.ms",
        "flush.messages": "log.flush.interval.messages",
        "flush.ms": "log.flush.interval.ms",
        "index.interval.bytes": "log.index.interval.bytes",
        "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
        "max.message.bytes": "message.max.bytes",
        "message.downconversion.enable": "log.message.downconversion.enable",
        "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
        "message.timestamp.type": "log.message.timestamp.type",
        "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
        "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
        "min.insync.replicas": "min.insync.replicas",
        "preallocate": "log.preallocate",
        "retention.bytes": "log.retention.bytes",
        "retention.ms": "log.retention.ms",
        "segment.bytes": "log.segment.bytes",
        "segment.index.bytes": "log.index.size.max.bytes",
        "segment.jitter.ms": "log.roll.jitter.ms",
        "segment.ms": "log.roll.ms",
        "unclean.leader.election.enable": "unclean.leader.election.enable",
    }
    assert set(TOPIC_CONFIG_SYNONYMS.values()) <= set(BROKER_CONFIG_DEFS)


def test_topic_inherits_from_broker() -> None:
    broker = load_broker_config(None, {
        "log.retention.minutes": "10", "log.roll.hours": "2", "log.cleanup.policy": "compact",
        "message.max.bytes": "2000", "log.flush.scheduler.interval.ms": "900",
        "log.message.timestamp.type": "LogAppendTime", "min.insync.replicas": "2"})
    topic = resolve_topic_config(broker, {})
    assert topic.retention_ms == 600000
    assert topic.segment_ms == 7200000
    assert topic.cleanup_policy == frozenset({"compact"})
    assert (topic.compact, topic.delete) == (True, False)
    assert topic.max_message_bytes == 2000
    assert topic.flush_ms == 900
    assert topic.log_append_time
    assert topic.min_insync_replicas == 2
    assert topic.segment_bytes == 1073741824
    assert topic.overrides == {}


def test_topic_overrides_win() -> None:
    broker = load_broker_config(None, {"log.retention.hours": "1"})
    topic = resolve_topic_config(broker, {
        "retention.ms": "-1", "cleanup.policy": "compact, delete", "segment.bytes": "1024",
        "min.cleanable.dirty.ratio": "0.1", "preallocate": "TRUE"})
    assert topic.retention_ms == -1
    assert (topic.compact, topic.delete) == (True, True)
    assert topic.segment_bytes == 1024
    assert topic.min_cleanable_dirty_ratio == 0.1
    assert topic.preallocate is True
    assert topic.get("segment.bytes") == 1024
    assert topic.overrides == {"retention.ms": "-1", "cleanup.policy": "compact, delete",
                               "segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.1",
                               "preallocate": "TRUE"}


def test_max_segment_ms_honours_max_compaction_lag() -> None:
    broker = load_broker_config()
    topic = resolve_topic_config(broker, {"cleanup.policy": "compact",
                                          "max.compaction.lag.ms": "1000"})
    assert topic.max_segment_ms == 1000
    assert resolve_topic_config(broker, {"max.compaction.lag.ms": "1000"}).max_segment_ms == \
        604800000


def test_validate_topic_configs_accepts_good_values() -> None:
    validate_topic_configs({"cleanup.policy": "compact,delete", "retention.ms": "-1",
                            "compression.type": "zstd", "leader.replication.throttled.replicas":
                            "0:1,1:2", "follower.replication.throttled.replicas": "*"})


@pytest.mark.parametrize(("configs", "message"), [
    ({"retention.mss": "1"}, "Unknown topic config name: retention.mss"),
    ({"log.retention.ms": "1"}, "Unknown topic config name: log.retention.ms"),
    ({"cleanup.policy": "bogus"},
     "Invalid value bogus for configuration cleanup.policy: String must be one of: compact, "
     "delete"),
    ({"cleanup.policy": "compact,bogus"},
     "Invalid value bogus for configuration cleanup.policy: String must be one of: compact, "
     "delete"),
    ({"retention.ms": "-2"},
     "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
    ({"retention.ms": "abc"},
     "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
    ({"segment.bytes": "3"},
     "Invalid value 3 for configuration segment.bytes: Value must be at least 14"),
    ({"min.insync.replicas": "0"},
     "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"),
    ({"message.timestamp.type": "Now"},
     "Invalid value Now for configuration message.timestamp.type: String must be one of: "
     "CreateTime, LogAppendTime"),
    ({"retention.ms": None}, "Null value not supported for topic configs: retention.ms"),
    ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
     "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
])
def test_validate_topic_configs_rejects(configs: dict[str, str | None], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate_topic_configs(configs)
    assert str(info.value) == message


def test_resolve_rejects_bad_override() -> None:
    with pytest.raises(ConfigError, match="Unknown topic config name: nope"):
        resolve_topic_config(load_broker_config(), {"nope": "1"})


# --- DescribeConfigs rows --------------------------------------------------------------------------

S, D, T = (ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG,
           ConfigSource.DYNAMIC_TOPIC_CONFIG)


def test_wire_numbering() -> None:
    assert [int(s) for s in (T, ConfigSource.DYNAMIC_BROKER_CONFIG,
                             ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, S, D,
                             ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG)] == [1, 2, 3, 4, 5, 6]
    assert [int(ConfigType[n]) for n in ("BOOLEAN", "STRING", "INT", "SHORT", "LONG", "DOUBLE",
                                         "LIST", "CLASS", "PASSWORD")] == list(range(1, 10))


def test_describe_retention_ms_without_override() -> None:
    # server.properties sets log.retention.hours only. Kafka lists retention.ms's synonyms from
    # log.retention.ms onwards, which is unset, so none are shown and the source is DEFAULT.
    broker = load_broker_config(CONFIG_DIR / "standalone" / "server.properties", {})
    entry = _entry(list(describe_topic_config(broker, {})), "retention.ms")
    assert (entry.value, entry.source, entry.is_default) == ("604800000", D, True)
    assert entry.synonyms == ()
    assert (entry.read_only, entry.is_sensitive, entry.config_type) == (False, False,
                                                                       ConfigType.LONG)
    assert entry.documentation


def test_describe_retention_ms_with_broker_ms_set() -> None:
    broker = load_broker_config(None, {"log.retention.ms": "1000", "log.retention.hours": "1"})
    entry = _entry(list(describe_topic_config(broker, {})), "retention.ms")
    assert (entry.value, entry.source, entry.is_default) == ("1000", S, False)
    assert _synonyms(entry) == [("log.retention.ms", "1000", S),
                                ("log.retention.hours", "1", S),
                                ("log.retention.hours", "168", D)]


def test_describe_retention_ms_with_topic_override() -> None:
    broker = load_broker_config(None, {"log.retention.ms": "1000"})
    entry = _entry(list(describe_topic_config(broker, {"retention.ms": " 5000"})),
                   "retention.ms")
    assert (entry.value, entry.source, entry.is_default) == ("5000", T, False)
    assert _synonyms(entry) == [("retention.ms", "5000", T),
                                ("log.retention.ms", "1000", S),
                                ("log.retention.hours", "168", D)]


def test_describe_synonym_order_topic_then_static_then_default() -> None:
    broker = load_broker_config(None, {"log.segment.bytes": "2048"})
    entries = list(describe_topic_config(broker, {"segment.bytes": "4096"}))
    assert _synonyms(_entry(entries, "segment.bytes")) == [
        ("segment.bytes", "4096", T), ("log.segment.bytes", "2048", S),
        ("log.segment.bytes", "1073741824", D)]
    unset = _entry(entries, "index.interval.bytes")
    assert (unset.source, _synonyms(unset)) == (D, [("log.index.interval.bytes", "4096", D)])
    no_broker_key = _entry(entries, "leader.replication.throttled.replicas")
    assert (no_broker_key.value, no_broker_key.source, no_broker_key.synonyms) == ("", D, ())


def test_describe_types_and_values_as_kafka_prints_them() -> None:
    entries = list(describe_topic_config(load_broker_config(), {
        "cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.0001"}))
    assert [e.name for e in entries] == sorted(TOPIC_CONFIG_DEFS)
    expected = {"cleanup.policy": ("compact,delete", ConfigType.LIST),
                "min.cleanable.dirty.ratio": ("1.0E-4", ConfigType.DOUBLE),
                "preallocate": ("false", ConfigType.BOOLEAN),
                "segment.bytes": ("1073741824", ConfigType.INT),
                "compression.type": ("producer", ConfigType.STRING),
                "flush.ms": (str(2**63 - 1), ConfigType.LONG)}
    for name, (value, type_) in expected.items():
        entry = _entry(entries, name)
        assert (entry.value, entry.config_type) == (value, type_), name


def test_describe_broker_config() -> None:
    broker = load_broker_config(None, {"log.retention.hours": "24", "mystery.key": "x"})
    entries = list(describe_broker_config(broker))
    hours = _entry(entries, "log.retention.hours")
    assert (hours.value, hours.source, hours.read_only) == ("24", S, True)
    assert _synonyms(hours) == [("log.retention.hours", "24", S),
                                ("log.retention.hours", "168", D)]
    millis = _entry(entries, "log.retention.ms")
    assert (millis.value, millis.source, millis.synonyms) == (None, D, ())
    listeners = _entry(entries, "listeners")
    assert (listeners.value, listeners.config_type) == ("PLAINTEXT://127.0.0.1:9092",
                                                        ConfigType.LIST)
    unknown = _entry(entries, "mystery.key")
    assert (unknown.value, unknown.source, unknown.config_type) == ("x", S, ConfigType.UNKNOWN)


def test_config_package_does_not_import_trio() -> None:
    code = "import sys, pybroker.config; assert 'trio' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT,
                   env={"PYTHONPATH": str(ROOT)})

