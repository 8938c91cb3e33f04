"""The broker's dynamic configs (KIP-226): checked, stored, and applied to the running parts.

Theory of operation. The metadata image carries every broker's dynamic configs
(`image.broker_configs`: "<default>" and "<id>" entities), kept where the rest of the
metadata is (ZooKeeper's /config/brokers, or the single broker's metadata file). This object
is a metadata listener: whenever the image's default or own entity differs from what it last
applied, it stacks them over the static configuration (`BrokerConfig.with_dynamic`), makes
that `current` (what DescribeConfigs and the handlers read), and hands old and new to each
registered `Reconfigurable` whose keys changed (Kafka's BrokerReconfigurable): the log
defaults, the cleaner, the connection limits, the TLS listeners. A store write is the only
way in, so every broker of a cluster applies the same change, each from its own watch, and a
restarted broker starts from what was stored.

An alter is checked on the broker that receives it before anything is stored: Kafka's rules
(`config/dynamic.py`), then each affected part's own check against the configuration the
change would make (a keystore that does not load, a cleaner thread count out of bounds).
A change that fails later, on a broker whose files differ, is logged and that part keeps its
previous settings, as Kafka does.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import trio

from pybroker.cluster.metadata import MetadataDelta, MetadataImage, MetadataStore
from pybroker.config import BrokerConfig, ConfigError
from pybroker.config.dynamic import (
    DEFAULT_ENTITY, DynamicConfigError, check_change, split_listener_key,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Reconfigurable:
    """A part of the broker that follows some dynamic keys. `follows(name)` says whether a
    changed key (its base name, without a listener prefix) concerns it; `validate(old, new)`
    raises ConfigError or ValueError when `new` cannot be applied; `reconfigure(old, new)`
    applies it."""

    name: str
    follows: Callable[[str], bool]
    reconfigure: Callable[[BrokerConfig, BrokerConfig], None]
    validate: Callable[[BrokerConfig, BrokerConfig], None] | None = None


def entity_of(resource_name: str) -> str:
    """The stored entity of a BROKER resource name: "" is the cluster default."""
    return DEFAULT_ENTITY if resource_name == "" else resource_name


def invalid_dynamic_configuration(reason: str) -> str:
    """Kafka's answer when a part refuses a change: its ConfigException wrapped, word for
    word, in the one DynamicBrokerConfig.processReconfiguration throws."""
    return ("Invalid value org.apache.kafka.common.config.ConfigException: "
            f"{reason} for configuration Invalid dynamic configuration")


class DynamicBrokerConfig:
    def __init__(self, static: BrokerConfig, node_id: int, store: MetadataStore) -> None:
        """Starts from the dynamic configs already stored, so the parts built next start
        with them (Kafka reads them before it starts its components); stored ones that no
        longer hold together with this broker's file are logged and left out."""
        self.static = static
        self.node_id = node_id
        self.store = store
        self.reconfigurables: list[Reconfigurable] = []
        self._altering = trio.Lock()
        default, own = self._layers(store.image)
        self.current = static
        self._applied = (default, own)
        if default or own:
            try:
                self.current = static.with_dynamic(default, own)
            except ConfigError as exc:  # Kafka too starts without dynamic configs it cannot use
                log.error("stored dynamic broker configs are ignored: %s", exc)

    def _layers(self, image: MetadataImage) -> tuple[dict[str, str], dict[str, str]]:
        entities = image.broker_configs
        return (dict(entities.get(DEFAULT_ENTITY, {})),
                dict(entities.get(str(self.node_id), {})))

    def add(self, reconfigurable: Reconfigurable) -> None:
        self.reconfigurables.append(reconfigurable)

    def stored(self, resource_name: str) -> dict[str, str]:
        """The dynamic configs stored for a BROKER resource name (Kafka's persistent props)."""
        return dict(self.store.image.broker_configs.get(entity_of(resource_name), {}))

    # -- altering -------------------------------------------------------------------------------
    def validate(self, resource_name: str, props: Mapping[str, str]) -> BrokerConfig:
        """The configuration this broker would run with if `resource_name`'s dynamic
        configs became `props`; DynamicConfigError with Kafka's message otherwise."""
        per_broker = resource_name != ""
        check_change(props, per_broker=per_broker)
        default, own = self._layers(self.store.image)
        if per_broker:
            own = dict(props)
        else:
            default = dict(props)
        try:
            new = self.static.with_dynamic(default, own)
        except ConfigError as exc:
            raise DynamicConfigError(str(exc)) from None
        old = self.current
        for part in self._affected(old, new):
            if part.validate is None:
                continue
            try:
                part.validate(old, new)
            except (ConfigError, ValueError) as exc:
                raise DynamicConfigError(invalid_dynamic_configuration(str(exc))) from None
        return new

    async def alter(self, resource_name: str,
                    edit: Callable[[dict[str, str]], dict[str, str]], *,
                    validate_only: bool) -> None:
        """Replace `resource_name`'s dynamic configs by `edit(stored)` once checked (every
        broker applies them from the store); ConfigError from `edit`, DynamicConfigError
        from the checks. Alters on this broker are serialised, so two at once both count. A
        keystore named again with the same location is reloaded here, since the stored
        configs do not change (Kafka's reloadUpdatedFilesWithoutConfigChange)."""
        async with self._altering:
            stored = self.stored(resource_name)
            props = edit(dict(stored))
            self.validate(resource_name, props)
            if validate_only:
                return
            await self.store.set_broker_configs(entity_of(resource_name), props)
        if stored == props and resource_name == str(self.node_id):
            self._reconfigure(self.current, self.current, force=set(props))

    # -- applying ---------------------------------------------------------------------------------
    async def apply_delta(self, image: MetadataImage, delta: MetadataDelta) -> None:
        """A store listener: apply this broker's dynamic layers when they changed."""
        layers = self._layers(image)
        if layers == self._applied:
            return
        self._applied = layers
        try:
            new = self.static.with_dynamic(*layers)
        except ConfigError as exc:
            log.error("dynamic broker configs could not be applied, keeping the previous "
                      "ones: %s", exc)
            return
        old, self.current = self.current, new
        self._reconfigure(old, new)

    def _reconfigure(self, old: BrokerConfig, new: BrokerConfig, *,
                     force: set[str] | None = None) -> None:
        for part in self._affected(old, new, force):
            try:
                part.reconfigure(old, new)
            except Exception:  # one part's failure leaves it as it was, the others apply
                log.exception("dynamic config change could not be applied to %s", part.name)
            else:
                log.info("applied dynamic broker configs to %s", part.name)

    def _affected(self, old: BrokerConfig, new: BrokerConfig,
                  force: set[str] | None = None) -> list[Reconfigurable]:
        changed = {split_listener_key(name)[1]
                   for name in set(old.originals) | set(new.originals) | (force or set())
                   if name in (force or ()) or old.originals.get(name) != new.originals.get(name)}
        return [part for part in self.reconfigurables if any(map(part.follows, changed))]
