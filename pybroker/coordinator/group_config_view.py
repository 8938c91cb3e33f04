"""What the consumer and share coordinators run a group with: the broker's values under the
group's own configs (the GROUP config resource, config/group.py), as the current metadata
image holds them.

Read where a value is used (a heartbeat, an acquisition, a share-partition's first use), so a
change applies from the next such use, as in Kafka; parsed once per change of the image's
entry for the group.
"""
from __future__ import annotations

from collections.abc import Mapping

from pybroker.cluster.metadata import MetadataStore
from pybroker.config.broker import BrokerConfig
from pybroker.config.group import GroupSettings, group_settings


class GroupConfigView:
    def __init__(self, config: BrokerConfig, metadata: MetadataStore) -> None:
        self.config = config
        self.metadata = metadata
        self.default = group_settings(config, {})
        self._parsed: dict[str, tuple[Mapping[str, str], GroupSettings]] = {}

    def __call__(self, group_id: str) -> GroupSettings:
        overrides = self.metadata.image.group_configs.get(group_id)
        if not overrides:
            self._parsed.pop(group_id, None)
            return self.default
        cached = self._parsed.get(group_id)
        if cached is not None and cached[0] is overrides:
            return cached[1]
        settings = group_settings(self.config, overrides)
        self._parsed[group_id] = (overrides, settings)
        return settings
