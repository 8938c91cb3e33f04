"""Walks the key tables: every key is honoured, inert until a named feature (and then says so
at start), or not applicable, and the docs table is the one generated from the key tables.
"""
from __future__ import annotations

import functools
import logging
import pathlib

import pytest

from pybroker.config import (
    ALL_TOPIC_CONFIG_SYNONYMS, BROKER_CONFIG_KEYS, FEATURES, TOPIC_CONFIG_KEYS, ConfigError, ConfigKey, KeyState,
    inert_topic_config_warnings, load_broker_config,
)
from pybroker.config.definitions import to_config_string
from pybroker.config.doc_table import render

ROOT = pathlib.Path(__file__).resolve().parents[1]
ALL_KEYS = [("broker", key) for key in BROKER_CONFIG_KEYS] + \
    [("topic", key) for key in TOPIC_CONFIG_KEYS]


def _id(item: tuple[str, ConfigKey]) -> str:
    return f"{item[0]}:{item[1].name}"


def test_docs_table_is_generated_from_the_key_tables() -> None:
    assert (ROOT / "docs" / "CONFIG.md").read_text() == render(), \
        "stale: python -m pybroker.config.doc_table > docs/CONFIG.md"


@pytest.mark.parametrize("item", ALL_KEYS, ids=_id)
def test_every_key_has_a_state_and_the_docs_list_it(item: tuple[str, ConfigKey]) -> None:
    _, key = item
    assert isinstance(key.state, KeyState)
    if key.state is KeyState.INERT:
        assert key.feature in FEATURES
    else:
        assert key.feature is None and key.refused_values == ()
    if key.state is KeyState.NOT_APPLICABLE:
        assert "Accepted" in key.doc, "a key pybroker does not use says why in its doc"
    assert f"| `{key.name}` | " in render()


def _example_value(key: ConfigKey) -> str:
    """A value the key accepts: its default, or something valid for a key with none."""
    text = to_config_string(key.default)
    if text:
        return text
    return {"inter.broker.listener.name": "PLAINTEXT", "zookeeper.connect": "localhost:2181",
            "zookeeper.connection.timeout.ms": "18000"}[key.name]


@pytest.mark.parametrize("key", [k for k in BROKER_CONFIG_KEYS if k.state is KeyState.INERT],
                         ids=lambda k: k.name)
def test_setting_an_inert_broker_key_warns_once_naming_key_and_feature(
        key: ConfigKey, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="pybroker.config"):
        config = load_broker_config(None, {key.name: _example_value(key)})
    assert len(config.warnings) == 1, config.warnings
    assert key.name in config.warnings[0] and key.feature in config.warnings[0]
    assert "\n" not in config.warnings[0]
    assert [r.getMessage() for r in caplog.records] == list(config.warnings)
    for refused in key.refused_values:
        with pytest.raises(ConfigError, match=key.feature):
            load_broker_config(None, {key.name: str(refused)})


def test_leaving_inert_keys_unset_is_silent() -> None:
    assert load_broker_config(None, {}).warnings == ()


# Keys with a default to set them to; one without (a keystore's location, a JAAS file...) has
# no value that is valid alone, and the tests of its feature set it.
@pytest.mark.parametrize("key", [k for k in BROKER_CONFIG_KEYS
                                 if k.state in (KeyState.HONOURED, KeyState.NOT_APPLICABLE)
                                 and k.name not in ("log.dir", "log.dirs")
                                 and to_config_string(k.default)],
                         ids=lambda k: k.name)
def test_setting_an_honoured_or_not_applicable_broker_key_is_silent(key: ConfigKey) -> None:
    assert load_broker_config(None, {key.name: to_config_string(key.default)}).warnings == ()


# Each deprecated key, and the key of today its warning names.
DEPRECATED = {"port": "listeners", "host.name": "listeners",
              "advertised.host.name": "advertised.listeners",
              "advertised.port": "advertised.listeners"}


def test_the_deprecated_keys_are_the_known_ones() -> None:
    assert {k.name for k in BROKER_CONFIG_KEYS if k.state is KeyState.DEPRECATED} == \
        set(DEPRECATED)


@pytest.mark.parametrize("name", sorted(DEPRECATED))
def test_setting_a_deprecated_key_warns_once_naming_todays_key(name: str) -> None:
    value = {"port": "9092", "host.name": "127.0.0.1", "advertised.host.name": "h",
             "advertised.port": "1"}[name]
    (warning,) = load_broker_config(None, {name: value}).warnings
    assert warning.startswith(f"Configuration '{name}' is deprecated: use {DEPRECATED[name]}=")


def test_no_topic_key_is_inert_now_throttling_is_built() -> None:
    """The replication-throttle lists were the last inert topic keys: setting them, or any
    topic key, warns of nothing."""
    assert [k.name for k in TOPIC_CONFIG_KEYS if k.state is KeyState.INERT] == []
    assert inert_topic_config_warnings({"follower.replication.throttled.replicas": "*",
                                        "leader.replication.throttled.replicas": "0:1",
                                        "retention.ms": "5"}) == []


# Where a key's effect is tested under the name of what it configures, not its own.
TESTED_AS = {"log.cleaner.dedupe.buffer.size": "max_map_entries"}
# Keys whose whole effect is on the configuration itself (which listeners are served), so
# the configuration tests are where it shows.
SHOWN_BY_CONFIG_TESTS = {"controller.listener.names", "listener.security.protocol.map"}


@functools.cache
def _test_sources() -> dict[str, str]:
    here = pathlib.Path(__file__).resolve()
    return {str(p): p.read_text() for p in (ROOT / "tests").rglob("*.py")
            if p.resolve() != here and p.name != "test_config.py"}


@pytest.mark.parametrize("item", [i for i in ALL_KEYS
                                  if i[1].state in (KeyState.HONOURED, KeyState.DEPRECATED)],
                         ids=_id)
def test_every_honoured_key_is_exercised_by_a_test(item: tuple[str, ConfigKey]) -> None:
    """'Honoured' is a claim a test must back: some test beyond the parsing tests sets the
    key (by its name, its underscore form in broker overrides, a topic config it supplies
    the default of, or the name of what it configures)."""
    _, key = item
    if key.name in SHOWN_BY_CONFIG_TESTS:
        assert key.name in (ROOT / "tests" / "test_config.py").read_text()
        return
    names = [key.name] + [topic for topic, chain in ALL_TOPIC_CONFIG_SYNONYMS.items()
                          if any(broker_name == key.name for broker_name, _ in chain)]
    forms = {form for name in names for form in (name, name.replace(".", "_"))}
    if key.name in TESTED_AS:
        forms.add(TESTED_AS[key.name])
    sources = _test_sources()
    assert any(form in text for text in sources.values() for form in forms), \
        f"no test sets {key.name}: test its effect, or mark it inert or not applicable"


def test_each_key_is_declared_once() -> None:
    """A second row for a name would silently replace the first in the lookup table (and
    show twice in docs/CONFIG.md)."""
    from pybroker.config.broker_keys import BROKER_CONFIG_DEFS, BROKER_CONFIG_KEYS
    names = [key.name for key in BROKER_CONFIG_KEYS]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []
    assert len(BROKER_CONFIG_DEFS) == len(BROKER_CONFIG_KEYS)
