"""The configuration table of the docs (docs/CONFIG.md), generated from the key tables.

One table is the truth: `BROKER_CONFIG_KEYS` and `TOPIC_CONFIG_KEYS` say what each key does and
whether the broker acts on it (`KeyState`); this renders them so the docs cannot drift (a test
compares the file with `render()`). Regenerate with
`python -m pybroker.config.doc_table > docs/CONFIG.md`.
"""
from __future__ import annotations

from typing import Iterable

from pybroker.config.broker_keys import BROKER_CONFIG_KEYS
from pybroker.config.definitions import FEATURES, ConfigKey, KeyState, to_config_string
from pybroker.config.dynamic import APPLIED, SECURITY_CONFIGS, UpdateMode, update_mode
from pybroker.config.group import GROUP_CONFIG_KEYS
from pybroker.config.topic import TOPIC_CONFIG_KEYS

_GROUP_INTRO = (
    "A consumer or share group's own settings (KIP-848, KIP-932), set with "
    "`kafka-configs --entity-type groups --entity-name G --alter --add-config k=v` "
    "(IncrementalAlterConfigs on resource type 32) whether the group exists yet or not. A "
    "timeout must lie within the broker's `group.consumer.*` / `group.share.*` min./max. "
    "bounds; unset, the group runs with the broker key of the same name after `group.`. "
    "Kafka 4.1's `streams.*` group keys are refused: pybroker serves no streams groups. "
    "Share groups themselves are switched on by the cluster, not by a group key: as in "
    "Kafka 4.1, where they are a preview, they are served once the `share.version` feature "
    "is finalized at 1 (`kafka-features --bootstrap-server B upgrade --feature "
    "share.version=1`, UpdateFeatures; 0 by default; the level is the cluster's: sent to "
    "any broker, every broker follows it), or on a broker started "
    "with `group.share.enable=true` (Kafka's internal broker key, which it takes too); "
    "before that their APIs are not advertised and answer UNSUPPORTED_VERSION.")

_HEADER = """\
# Configuration keys

Generated from `pybroker/config/broker_keys.py` and `pybroker/config/topic.py` by
`python -m pybroker.config.doc_table > docs/CONFIG.md`; a test fails when this file is stale.

Every key pybroker accepts is in one of these states:

- **honoured**: it acts as in Kafka, or as its description says where pybroker differs on
  purpose.
- **inert until *feature***: the feature that uses it is not built yet. The key is accepted
  (so Kafka's own files load), and setting it logs a one-line warning at start (a topic
  key: when a topic is created or altered with it, and at every start while a topic has
  it). Values that could only work with the feature are refused at start. Features: {features}.
- **not applicable**: it tunes a part of Kafka that pybroker has no counterpart for (thread
  pools, KRaft controllers, preallocated files); accepted silently, the description says why.
- **deprecated**: an older Kafka name (Kafka 0.8's `port`, `host.name`, ...) for part of a
  key of today. Honoured as Kafka read it then, and setting it logs a one-line warning at
  start naming the key to use instead.

A broker key's **dynamic** column is its update mode (KIP-226): *read-only* keys are read from
server.properties at start; *cluster-wide* ones may also be changed on a running cluster,
for every broker (`kafka-configs --alter --entity-type brokers --entity-default`) or one
(`--entity-name <id>`); *per-broker* ones for one broker only, and a TLS listener's key and
trust stores only with the listener prefix (`listener.name.<listener>.ssl.keystore.location`:
new connections get the new certificate). Precedence: a broker's own dynamic value, then the
cluster default, then server.properties, then the default. Kafka updates a few more keys
dynamically (thread pools, listeners, SASL settings); pybroker refuses those with Kafka's
"Cannot update these configs dynamically" (docs/OPERATIONS.md).

Keys pybroker does not know are reported with a warning at start and otherwise ignored, as
Kafka does. Listeners: every PLAINTEXT client listener is served, each answering Metadata
with its own advertised endpoints; an SSL, SASL_SSL or SASL_PLAINTEXT listener is refused at
start.
"""


def _state(key: ConfigKey) -> str:
    if key.state is KeyState.INERT:
        text = f"inert until {key.feature}"
        if key.refused_values:
            text += "; refused: " + ", ".join(str(v) for v in key.refused_values)
        return text
    return key.state.value


def _cell(text: str | None) -> str:
    return "" if text is None else text.replace("|", "\\|")


def _dynamic(key: ConfigKey) -> str:
    """The key's update mode here: Kafka's, for the keys pybroker applies live."""
    mode = update_mode(key.name)
    if key.name not in APPLIED or mode is UpdateMode.READ_ONLY:
        return UpdateMode.READ_ONLY.value
    if key.name in SECURITY_CONFIGS:
        return "per-broker, listener prefix only"
    return mode.value


def _table(keys: Iterable[ConfigKey], *, broker: bool = False) -> list[str]:
    if broker:
        lines = ["| key | state | dynamic | default | description |",
                 "| --- | --- | --- | --- | --- |"]
    else:
        lines = ["| key | state | default | description |", "| --- | --- | --- | --- |"]
    for key in sorted(keys, key=lambda k: k.name):
        default = to_config_string(key.default)
        dynamic = f" {_dynamic(key)} |" if broker else ""
        lines.append(f"| `{key.name}` | {_state(key)} |{dynamic} "
                     f"{'`' + _cell(default) + '`' if default else ''} | {_cell(key.doc)} |")
    return lines


def render() -> str:
    """docs/CONFIG.md as it should read."""
    features = "; ".join(f"*{name}*: {text}" for name, text in FEATURES.items())
    parts = [_HEADER.format(features=features), "## Broker keys (server.properties)", "",
             *_table(BROKER_CONFIG_KEYS, broker=True), "", "## Topic keys", "",
             *_table(TOPIC_CONFIG_KEYS), "", "## Group keys (the GROUP config resource)", "", _GROUP_INTRO, "",
             *_table(GROUP_CONFIG_KEYS)]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    print(render(), end="")
