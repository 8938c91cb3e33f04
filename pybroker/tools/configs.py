"""kafka-configs: describe and alter topic and broker configs.

Kafka's ConfigCommand for `--entity-type topics|brokers` (and the shorthands `--topic`,
`--broker`, `--broker-defaults`; `groups` and `broker-loggers` are passed to the broker, which
answers whether it supports them). `--describe` prints "Dynamic configs for topic t are:" and
one `  name=value sensitive=false synonyms={SOURCE:name=value, ...}` line per config whose
source is the entity's dynamic one, or every config with `--all`. `--alter` sends
IncrementalAlterConfigs (deletions, then `--add-config k=v,k2=[a,b]` settings) and prints
"Completed updating config for topic t.". Client quotas (`--entity-type clients|users`, with
`--entity-name` or `--entity-default`, both types for a user's client) go through
DescribeClientQuotas / AlterClientQuotas and print Kafka's "Quota configs for client-id 'c1'
are producer_byte_rate=1048576.0"; a user's SCRAM-SHA-256/512 credentials go through
configs_scram.py (a user's --alter may carry both, as Kafka's); ips are refused. Where Kafka exits 0 after "The topic 't' doesn't exist and
doesn't have dynamic config.", this tool exits 1.
"""
from __future__ import annotations

import argparse
import re
import sys
from decimal import Decimal
from typing import Sequence

from pybroker.client.client import KafkaClient
from pybroker.client.admin import (
    Admin, AlterConfigOp, AlterOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType,
)
from pybroker.tools.configs_scram import alter_scram, describe_scram, is_scram_key
from pybroker.tools.common import (
    ArgumentParser, ClientProperties, ToolError, UsageError, connect, err, load_properties, out,
    split_list,
    tool_main,
)

PROG = "kafka-configs"
_TYPES = {"topics": ResourceType.TOPIC, "brokers": ResourceType.BROKER,
          "broker-loggers": ResourceType.BROKER_LOGGER, "groups": ResourceType.GROUP_CONFIG}
_UNSUPPORTED = ("ips", "client-metrics")
_QUOTA_TYPES = {"users": "user", "clients": "client-id"}
_QUOTA_LABELS = {"user": "user-principal", "client-id": "client-id"}
_DYNAMIC = {"topics": ConfigSource.DYNAMIC_TOPIC_CONFIG,
            "brokers": ConfigSource.DYNAMIC_BROKER_CONFIG,
            "groups": ConfigSource.DYNAMIC_GROUP_CONFIG}
_KEY = re.compile(r"[$a-zA-Z0-9._-]*")
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"


def build_parser() -> ArgumentParser:
    p = ArgumentParser(PROG, "This tool helps to manipulate and describe entity config for a "
                       "topic, client, user, broker, ip, client-metrics or group")
    p.add_argument("--bootstrap-server", help="The Kafka servers to connect to.")
    p.add_argument("--bootstrap-controller", help=argparse.SUPPRESS)
    p.add_argument("--command-config", help="Property file containing configs to be passed to "
                   "Admin Client.")
    p.add_argument("--alter", action="store_true", help="Alter the configuration for the "
                   "entity.")
    p.add_argument("--describe", action="store_true", help="List configs for the given entity.")
    p.add_argument("--all", action="store_true", help="List all configs for the given topic, "
                   "broker, or broker-logger entity (includes static configuration when the "
                   "entity type is brokers)")
    p.add_argument("--entity-type", action="append", default=[],
                   help="Type of entity (topics/clients/users/brokers/broker-loggers/ips/"
                   "client-metrics/groups)")
    p.add_argument("--entity-name", action="append", default=[],
                   help="Name of entity (topic name/client id/user principal name/broker id/"
                   "ip/client metrics/group id)")
    p.add_argument("--entity-default", action="append_const", const="", dest="entity_name",
                   help="Default entity name for "
                   "clients/users/brokers/ips (applies to corresponding entity type)")
    p.add_argument("--add-config", help="Key Value pairs of configs to add. Square brackets "
                   "can be used to group values which contain commas: 'k1=v1,k2=[v1,v2,v2],"
                   "k3=v3'.")
    p.add_argument("--add-config-file", help="Path to a properties file with configs to add.")
    p.add_argument("--delete-config", action="append", help="config keys to remove 'k1,k2'")
    p.add_argument("--force", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--topic", help="The topic's name.")
    p.add_argument("--broker", help="The broker's ID.")
    p.add_argument("--broker-defaults", action="store_true", help="The config defaults for all "
                   "brokers.")
    p.add_argument("--broker-logger", help="The broker's ID for its logger config.")
    p.add_argument("--group", help="The group's ID.")
    for flag in ("client", "user", "ip", "client-metrics"):
        p.add_argument(f"--{flag}", help=argparse.SUPPRESS)
    for flag in ("client-defaults", "user-defaults", "ip-defaults"):
        p.add_argument(f"--{flag}", action="store_true", help=argparse.SUPPRESS)
    return p


def _types_and_names(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    types = list(args.entity_type)
    names = list(args.entity_name)
    for flag, kind in (("topic", "topics"), ("broker", "brokers"),
                       ("broker_logger", "broker-loggers"), ("group", "groups"),
                       ("client", "clients"), ("user", "users"), ("ip", "ips"),
                       ("client_metrics", "client-metrics")):
        value = getattr(args, flag)
        if value is not None:
            types.append(kind)
            names.append(value)
    for flag, kind in (("broker_defaults", "brokers"), ("client_defaults", "clients"),
                       ("user_defaults", "users"), ("ip_defaults", "ips")):
        if getattr(args, flag):
            types.append(kind)
            names.append("")
    return types, names


def quota_entity(args: argparse.Namespace) -> list[tuple[str, str | None]] | None:
    """For users / clients (quotas): [(quota entity type, name; "" the default; None: every
    one)], as ConfigCommand pairs --entity-type with --entity-name in order; None for other
    entity types."""
    types, names = _types_and_names(args)
    if not types or any(t not in _QUOTA_TYPES for t in types):
        return None
    if len(names) > len(types):
        raise UsageError("More entity names specified than entity types")
    if len(set(types)) != len(types):
        raise UsageError("Each entity type may be given once")
    return [(_QUOTA_TYPES[t], names[i] if i < len(names) else None)
            for i, t in enumerate(types)]


def entity(args: argparse.Namespace) -> tuple[str, str | None]:
    """(entity type, name or None for "all"; "" for the default entity)."""
    types, names = _types_and_names(args)
    if not types:
        raise UsageError("At least one entity type must be specified")
    kind = types[0]
    if kind in _UNSUPPORTED:
        raise ToolError(f"Entity type '{kind}' (IP quotas, client metrics) is not supported "
                        "here: pybroker serves topic, broker and group configs, user / client "
                        "quotas and SCRAM credentials", plain=True)
    if kind not in _TYPES:
        raise UsageError(f"Invalid entity type {kind}, the entity type must be one of "
                         "topics, clients, users, brokers, broker-loggers, ips, "
                         "client-metrics, groups")
    if len(types) > 1 and any(t != kind for t in types):
        raise UsageError(f"Only one entity type is supported here, got {', '.join(types)}")
    if len(names) > 1:
        raise UsageError("Only one entity name may be specified")
    name = names[0] if names else None
    if kind == "brokers" and name and not name.isdigit():
        raise UsageError(f"The entity name for brokers must be a valid integer broker id, "
                         f"found: {name}")
    if name == "" and kind not in ("brokers",):
        raise UsageError(f"--entity-default is not valid for entity type {kind}")
    return kind, name


def parse_add_config(text: str | None, path: str | None) -> dict[str, str]:
    """Kafka's parseConfigsToBeAdded: commas split pairs except inside [..]."""
    props = load_properties(path) if path else {}
    if text:
        for pair in re.split("," + _OUTSIDE_BRACKETS, text):
            parts = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, pair)
            if len(parts) != 2:
                raise UsageError('Invalid entity config: all configs to be added must be in '
                                 'the format "key=val" or  "key=[val1,val2]" to group values '
                                 'which contain commas.')
            props[parts[0].strip()] = re.sub(r"[\[\]]", "", parts[1]).strip()
    for key in props:
        if not _KEY.fullmatch(key):
            raise UsageError(f"Invalid character found for config key: {key}")
    return props


def _describe_line(e: ConfigEntry) -> str:
    synonyms = ", ".join(f"{s.source.name}:{s.name}={s.value}" for s in e.synonyms)
    return (f"  {e.name}={e.value} sensitive={'true' if e.sensitive else 'false'} "
            f"synonyms={{{synonyms}}}")


async def _entries(admin: Admin, kind: str, name: str, *, synonyms: bool,
                   everything: bool) -> list[ConfigEntry]:
    resource = ConfigResource(_TYPES[kind], name)
    result = (await admin.describe_configs([resource], include_synonyms=synonyms))[resource]
    if isinstance(result, BaseException):
        raise result
    wanted = None
    if not everything:
        wanted = (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG if kind == "brokers" and not name
                  else _DYNAMIC.get(kind))
    return sorted((e for e in result if wanted is None or e.source == wanted),
                  key=lambda e: e.name)


async def describe(admin: Admin, kind: str, name: str | None, everything: bool) -> int:
    singular = kind[:-1]
    if name is not None and not everything:
        if kind == "topics" and name not in await admin.list_topics():
            err(f"The {singular} '{name}' doesn't exist and doesn't have dynamic config.")
            return 1
        if kind == "brokers" and name:
            _, _, brokers = await admin.describe_cluster()
            if int(name) not in brokers:
                err(f"The {singular} '{name}' doesn't exist and doesn't have dynamic config.")
                return 1
    if name is not None:
        names = [name]
    elif kind == "topics":
        names = list(await admin.list_topics())
    elif kind in ("brokers", "broker-loggers"):
        _, _, brokers = await admin.describe_cluster()
        names = [str(b) for b in sorted(brokers)] + ([""] if kind == "brokers" else [])
    else:
        names = [g.group_id for g in await admin.list_groups()]
    for entity_name in names:
        if entity_name == "":
            out(f"Default configs for {kind} in the cluster are:")
        else:
            out(f"{'All' if everything else 'Dynamic'} configs for {singular} {entity_name} are:")
        for e in await _entries(admin, kind, entity_name, synonyms=True,
                                everything=everything or kind == "broker-loggers"):
            out(_describe_line(e))
    return 0


async def alter(admin: Admin, kind: str, name: str | None, add: dict[str, str],
                delete: list[str]) -> int:
    if name is None:
        raise UsageError(f"An entity name must be specified with --alter of {kind}")
    if kind != "broker-loggers":
        present = {e.name for e in await _entries(admin, kind, name, synonyms=False,
                                                  everything=False)}
        invalid = [k for k in delete if k not in present]
        if invalid:
            raise ToolError("Invalid config(s): " + ",".join(invalid), plain=True)
    ops = [AlterConfigOp(k, "", AlterOpType.DELETE) for k in delete]
    ops += [AlterConfigOp(k, v, AlterOpType.SET) for k, v in add.items()]
    resource = ConfigResource(_TYPES[kind], name)
    outcome = (await admin.incremental_alter_configs({resource: ops}))[resource]
    if isinstance(outcome, BaseException):
        raise outcome
    if name:
        out(f"Completed updating config for {kind[:-1]} {name}.")
    else:
        out(f"Completed updating default config for {kind} in the cluster.")
    return 0


def java_double(value: float) -> str:
    """A double as Java's Double.toString prints it (what Kafka's tools print):
    1048576.0, 1.0E7, 0.5."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    text = "".join(map(str, digits))
    power = len(digits) - 1 + int(exponent)
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"


def _entity_text(entity: dict[str, str | None]) -> str:
    parts = []
    for kind in ("user", "client-id"):
        if kind in entity:
            name = entity[kind]
            label = _QUOTA_LABELS[kind]
            parts.append(f"{label} '{name}'" if name is not None else f"the default {label}")
    return ", ".join(parts)


async def describe_quotas(admin: Admin, entities: list[tuple[str, str | None]]) -> int:
    components = [(kind, 2, None) if name is None else (kind, 1, None) if name == ""
                  else (kind, 0, name) for kind, name in entities]
    for entity, values in await admin.describe_client_quotas(components, strict=True):
        text = ", ".join(f"{k}={java_double(v)}" for k, v in values.items())
        out(f"Quota configs for {_entity_text(entity)} are {text}")
    return 0


async def alter_quotas(admin: Admin, entities: list[tuple[str, str | None]],
                       add: dict[str, str], delete: list[str]) -> int:
    if any(name is None for _, name in entities):
        raise UsageError("--entity-name or --entity-default must be specified with each "
                         "--entity-type for --alter")
    wanted = [(kind, 1, None) if name == "" else (kind, 0, name) for kind, name in entities]
    found = await admin.describe_client_quotas(wanted, strict=True)
    present = found[0][1] if found else {}
    invalid = [k for k in delete if k not in present]
    if invalid:
        raise ToolError("Invalid config(s): " + ",".join(invalid), plain=True)
    ops: list[tuple[str, float | None]] = []
    for key, value in add.items():
        try:
            ops.append((key, float(value)))
        except ValueError:
            raise ToolError(f"Cannot parse quota configuration value for {key}: {value}",
                            plain=True) from None
    ops += [(key, None) for key in delete]
    await admin.alter_client_quotas({kind: name or None for kind, name in entities}, ops)
    kind, name = entities[0]
    plural = {"user": "users", "client-id": "clients"}[kind]
    if name:
        out(f"Completed updating config for {plural[:-1]} {name}.")
    else:
        out(f"Completed updating default config for {plural} in the cluster.")
    return 0


async def _users_and_clients(args: argparse.Namespace, client: KafkaClient, admin: Admin,
                             quotas: list[tuple[str, str | None]], add: dict[str, str],
                             delete: list[str]) -> int:
    """Quotas of users and clients, and a user's SCRAM credentials, told apart by their keys
    as Kafka's ConfigCommand does (SCRAM-SHA-256/512 are credentials, the rest quotas)."""
    user = quotas[0][1] if [kind for kind, _ in quotas] == ["user"] else None
    scram_add = {k: v for k, v in add.items() if is_scram_key(k)}
    scram_delete = [k for k in delete if is_scram_key(k)]
    if (scram_add or scram_delete) and not user:
        raise UsageError("SCRAM credentials belong to a named user alone: "
                         "--entity-type users --entity-name <user>")
    if args.alter:
        quota_add = {k: v for k, v in add.items() if k not in scram_add}
        quota_delete = [k for k in delete if k not in scram_delete]
        if quota_add or quota_delete:
            await alter_quotas(admin, quotas, quota_add, quota_delete)
        if scram_add or scram_delete:
            await alter_scram(client, user, scram_add, scram_delete)
        return 0
    await describe_quotas(admin, quotas)
    if [kind for kind, _ in quotas] == ["user"] and quotas[0][1] != "":
        await describe_scram(client, quotas[0][1])
    return 0


async def _main(args: argparse.Namespace) -> int:
    quotas = quota_entity(args)
    kind, name = entity(args) if quotas is None else ("", None)
    add = parse_add_config(args.add_config, args.add_config_file)
    delete = split_list(args.delete_config)
    if args.alter and not (add or delete):
        raise UsageError("At least one of --add-config, --add-config-file, or --delete-config "
                         "must be specified with --alter")
    if args.describe and (add or delete):
        raise UsageError("--add-config and --delete-config can only be used with --alter")
    if args.all and not args.describe:
        raise UsageError("--all can only be used with --describe")
    props = load_properties(args.command_config) if args.command_config else ClientProperties()
    async with connect(args.bootstrap_server, props, default_client_id="kafka-configs") as client:
        admin = Admin(client)
        if quotas is not None:
            if args.all:
                raise UsageError("--all can only be used with topics, brokers and "
                                 "broker-loggers")
            return await _users_and_clients(args, client, admin, quotas, add, delete)
        if args.alter:
            return await alter(admin, kind, name, add, delete)
        return await describe(admin, kind, name, args.all)


def check_args(args: argparse.Namespace) -> None:
    if args.alter == args.describe:
        raise UsageError("Command must include exactly one action: --describe, --alter")
    if args.bootstrap_controller and not args.bootstrap_server:
        raise UsageError("--bootstrap-controller is not supported: pybroker has no KRaft "
                         "controllers; use --bootstrap-server")
    if not args.bootstrap_server:
        raise UsageError("One of the required --bootstrap-server or --bootstrap-controller "
                         "arguments must be specified")


def main(argv: Sequence[str] | None = None) -> int:
    return tool_main(build_parser(), argv, _main, check=check_args,
                     error_prefix="Error while executing config command: ")


if __name__ == "__main__":
    sys.exit(main())
