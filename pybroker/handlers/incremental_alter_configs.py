"""IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on a topic's overrides, on a
broker's dynamic configs at one level (KIP-226: "" the cluster default, "<id>" one broker), or
on a group's configs (KIP-848/932, config/group.py).

APPEND and SUBTRACT apply to list-typed configs only (e.g. cleanup.policy), as in Kafka.
"""
from __future__ import annotations

from enum import IntEnum
from typing import cast

from construct import Container

from protocol.api_keys import ApiKey
from pybroker.config import BROKER_CONFIG_DEFS, TOPIC_CONFIG_DEFS, ConfigError, ConfigType
from pybroker.config.dynamic import split_listener_key
from pybroker.config.group import GROUP_CONFIG_DEFS
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._configs_common import alter_configs, alter_error_response


class Op(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def apply_ops(current: dict[str, str], ops: list, *, kind: str = "topic") -> dict[str, str]:
    """The configs after `ops` on a resource of `kind` (topic, broker or group); ConfigError
    for a bad operation, or for an unknown topic config name (a broker's or a group's unknown
    names are refused with the rest of its checks, config/dynamic.py and config/group.py)."""
    broker = kind == "broker"
    configs = dict(current)
    for op in ops:
        name = op.name
        definition = (BROKER_CONFIG_DEFS.get(split_listener_key(name)[1]) if broker
                      else GROUP_CONFIG_DEFS.get(name) if kind == "group"
                      else TOPIC_CONFIG_DEFS.get(name))
        if definition is None and kind == "topic":
            raise ConfigError(name, op.value or "", "Unknown topic config name")
        if op.config_operation == Op.SET:
            if op.value is None:
                raise ConfigError(name, "", "SET needs a value")
            configs[name] = op.value
        elif op.config_operation == Op.DELETE:
            configs.pop(name, None)
        elif op.config_operation in (Op.APPEND, Op.SUBTRACT):
            if definition is None or definition.type != ConfigType.LIST:
                raise ConfigError(name, op.value or "",
                                  f"Config value append/subtract is not allowed for {name}")
            present = configs.get(name)
            items = [] if present is None else [x for x in present.split(",") if x]
            if present is None and definition.default and kind == "topic":
                items = list(cast("tuple[str, ...]", definition.default))  # a LIST's
            given = [x.strip() for x in (op.value or "").split(",") if x.strip()]
            if op.config_operation == Op.APPEND:
                items += [x for x in given if x not in items]
            else:
                items = [x for x in items if x not in given]
            configs[name] = ",".join(items)
        else:
            raise ConfigError(name, str(op.config_operation), "Unknown config operation")
    return configs


async def handle(ctx: RequestContext, request: Container) -> dict:
    return await alter_configs(ctx, request, lambda current, resource, kind: apply_ops(
        current, resource.configs, kind=kind))


HANDLER = Handler(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, handle, alter_error_response)
