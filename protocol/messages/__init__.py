"""Every API we declare, by key. One module per API or close family of APIs."""
from __future__ import annotations

from protocol.messages import (
    acls, api_versions, cluster, configs, consumer_group, features, fetch, groups,
    list_offsets, metadata, offsets, produce, producer_ids, quotas, sasl, share_group,
    share_offsets, share_state, topics, transactions,
)
from protocol.messages.api import Api

_MODULES = (acls, api_versions, cluster, configs, consumer_group, features, fetch, groups,
            list_offsets, metadata, offsets, produce, producer_ids, quotas, sasl, share_group,
            share_offsets, share_state, topics, transactions)


def _collect() -> dict[int, Api]:
    apis: dict[int, Api] = {}
    for module in _MODULES:
        for value in vars(module).values():
            if isinstance(value, Api):
                if value.key in apis:
                    raise RuntimeError(f"API key {value.key} declared twice")
                apis[value.key] = value
    return dict(sorted(apis.items()))


APIS: dict[int, Api] = _collect()


def api(key: int) -> Api:
    """The declaration for an API key; KeyError if we declare none."""
    return APIS[key]
