"""kafka-acls: add, list and remove ACLs with Kafka's flags and Kafka's output (AclCommand)."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from protocol.acl_operations import AclOperation
from protocol.api_keys import ApiKey
from protocol.errors import KafkaError
from pybroker.client.client import KafkaClient
from pybroker.security.acl.model import (
    CLUSTER_NAME, SUPPORTED_OPERATIONS, AclBinding, AclPermission, PatternType, ResourceType,
    operation_from_name,
)
from pybroker.tools.common import (
    ArgumentParser, ClientProperties, ToolError, UsageError, connect, load_properties, out,
    tool_main,
)

PROG = "kafka-acls"
_O = AclOperation


def build_parser() -> ArgumentParser:
    p = ArgumentParser(PROG, "This tool helps to manage acls on kafka.")
    p.add_argument("--bootstrap-server", help="REQUIRED: A list of host/port pairs to use "
                   "for establishing the connection to the Kafka cluster.")
    p.add_argument("--command-config", help="A property file containing configs to be "
                   "passed to Admin Client.")
    for flag in ("--add", "--remove", "--list", "--force", "--producer", "--consumer",
                 "--idempotent", "--cluster"):
        p.add_argument(flag, action="store_true")
    for flag in ("--allow-principal", "--deny-principal", "--allow-host", "--deny-host",
                 "--operation", "--topic", "--group", "--transactional-id"):
        p.add_argument(flag, action="append", default=[])
    p.add_argument("--principal", action="append", default=[])
    p.add_argument("--resource-pattern-type", default=None,
                   choices=["literal", "prefixed", "match", "any", "LITERAL", "PREFIXED",
                            "MATCH", "ANY"])
    return p


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    found = [(ResourceType.TOPIC, t) for t in args.topic]
    found += [(ResourceType.GROUP, g) for g in args.group]
    found += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster or (args.producer and args.idempotent):
        found.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return found


def _operations(args: argparse.Namespace, rtype: ResourceType) -> list[AclOperation]:
    if args.producer or args.consumer:
        ops: list[AclOperation] = []
        if args.producer:
            ops += {ResourceType.TOPIC: [_O.WRITE, _O.DESCRIBE, _O.CREATE],
                    ResourceType.TRANSACTIONAL_ID: [_O.WRITE, _O.DESCRIBE],
                    ResourceType.CLUSTER: [_O.IDEMPOTENT_WRITE]}.get(rtype, [])
        if args.consumer:
            ops += {ResourceType.TOPIC: [_O.READ, _O.DESCRIBE],
                    ResourceType.GROUP: [_O.READ]}.get(rtype, [])
        return ops
    try:
        return [operation_from_name(o) for o in args.operation] or [_O.ALL]
    except ValueError as exc:
        raise ToolError(str(exc)) from None


def _check_operations(args: argparse.Namespace) -> None:
    """An operation the resource type has no use for is a usage error before anything is
    sent, as Kafka's AclCommand says it (its list in a set's order, ours in Kafka's enum's)."""
    for rtype, _ in _resources(args):
        valid = SUPPORTED_OPERATIONS[rtype] | {_O.ALL}
        if set(_operations(args, rtype)) - valid:
            names = ", ".join(op.name for op in sorted(valid))
            raise UsageError(f"ResourceType {rtype.name} only supports operations [{names}]")


def _confirm(args: argparse.Namespace, question: str) -> bool:
    """--force, or a "y" typed on stdin after the question (Kafka's confirmAction; Kafka 4.1
    reads the terminal and fails without one, we read stdin so a script can pipe its answer)."""
    if args.force:
        return True
    out(question)
    answer = sys.stdin.readline()
    return answer.strip().lower() == "y"


def _bindings(args: argparse.Namespace, pattern: PatternType) -> list[AclBinding]:
    entries = []
    for permission, principals, hosts in (
            (AclPermission.ALLOW, args.allow_principal, args.allow_host),
            (AclPermission.DENY, args.deny_principal, args.deny_host)):
        for principal in principals:
            for host in hosts or ["*"]:
                entries.append((principal, host, permission))
    if not entries:
        raise ToolError("You must specify one of: --allow-principal, --deny-principal when "
                        "trying to add ACLs.")
    return [AclBinding(rtype, name, pattern, principal, host, op, permission)
            for rtype, name in _resources(args) for op in _operations(args, rtype)
            for principal, host, permission in entries]


def _pattern_text(rtype: int, name: str, ptype: int) -> str:
    return (f"ResourcePattern(resourceType={ResourceType(rtype).name}, name={name}, "
            f"patternType={PatternType(ptype).name})")


def _entry_text(principal: str, host: str, op: int, permission: int) -> str:
    return (f"(principal={principal}, host={host}, operation={AclOperation(op).name}, "
            f"permissionType={AclPermission(permission).name})")


def _block(header: str, entries: list[str], lead: str = "") -> str:
    """Kafka 4.1's AclCommand layout: its `Adding` header keeps a space after the colon and
    its first entry a space before the tab; its `Current` header and entries have neither.
    Each block ends with a blank line."""
    return header + "\n" + lead + "\n".join("\t" + e for e in entries) + "\n"


def _pattern_order(key: tuple[int, str, int]) -> tuple[str, str, str]:
    """Kafka orders resources by a Java hash map (arbitrary, stable per JVM run, group
    before topic in practice); ours sorts by type, name and pattern, which keeps that."""
    rtype, name, ptype = key
    return ResourceType(rtype).name, name, PatternType(ptype).name


def _print_acls(resources: list, principal: str | None = None) -> None:
    by_pattern: dict[tuple[int, str, int], list[str]] = {}
    for r in resources:
        entries = by_pattern.setdefault((r.resource_type, r.resource_name, r.pattern_type), [])
        entries += [_entry_text(a.principal, a.host, a.operation, a.permission_type)
                    for a in r.acls if principal is None or a.principal == principal]
    for key in sorted(by_pattern, key=_pattern_order):
        if by_pattern[key]:
            out(_block(f"Current ACLs for resource `{_pattern_text(*key)}`:", by_pattern[key]))


async def _describe(client: KafkaClient, rtype: int, name: str | None, ptype: int,
                    principal: str | None = None) -> list:
    answer = await client.request(ApiKey.DESCRIBE_ACLS, {
        "resource_type_filter": rtype, "resource_name_filter": name,
        "pattern_type_filter": ptype, "principal_filter": principal, "host_filter": None,
        "operation": int(_O.ANY), "permission_type": int(AclPermission.ANY)})
    if answer.error_code:
        raise KafkaError(answer.error_code, answer.error_message)
    return list(answer.resources)


async def _main(args: argparse.Namespace) -> int:
    props = load_properties(args.command_config) if args.command_config else ClientProperties()
    # Kafka's default is literal for every action: `--list --topic t` shows only t's literal
    # ACLs and `--remove --topic t` leaves a prefixed t alone.
    pattern = PatternType[(args.resource_pattern_type or "literal").upper()]
    async with connect(args.bootstrap_server, props, default_client_id=PROG) as client:
        if args.add:
            if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
                raise ToolError("A '--resource-pattern-type' value of 'literal' or 'prefixed' "
                                "is required when adding ACLs.")
            bindings = _bindings(args, pattern)
            keys = {(int(b.resource_type), b.resource_name, int(pattern)) for b in bindings}
            for key in sorted(keys, key=_pattern_order):
                mine = [_entry_text(b.principal, b.host, b.operation, b.permission)
                        for b in bindings if (b.resource_type, b.resource_name) == key[:2]]
                out(_block(f"Adding ACLs for resource `{_pattern_text(*key)}`: ", mine, " "))
            answer = await client.request(ApiKey.CREATE_ACLS, {"creations": [
                {"resource_type": int(b.resource_type), "resource_name": b.resource_name,
                 "resource_pattern_type": int(b.pattern_type), "principal": b.principal,
                 "host": b.host, "operation": int(b.operation),
                 "permission_type": int(b.permission)} for b in bindings]})
            for r in answer.results:
                if r.error_code:
                    raise KafkaError(r.error_code, r.error_message)
        elif args.remove:
            for rtype, name in _resources(args):
                key = (int(rtype), name, int(pattern))
                filter_text = _pattern_text(*key)
                if args.allow_principal or args.deny_principal:
                    matching = [b for b in _bindings(args, pattern)
                                if (b.resource_type, b.resource_name) == (rtype, name)]
                    entries = "\n".join("\t" + _entry_text(b.principal, b.host, b.operation,
                                                            b.permission) for b in matching)
                    if not _confirm(args, f"Are you sure you want to remove ACLs: \n {entries}"
                                          f"\n from resource filter `{filter_text}`? (y/n)"):
                        continue
                    filters = [{"resource_type_filter": int(b.resource_type),
                                "resource_name_filter": b.resource_name,
                                "pattern_type_filter": int(pattern),
                                "principal_filter": b.principal, "host_filter": b.host,
                                "operation": int(b.operation),
                                "permission_type": int(b.permission)} for b in matching]
                else:
                    if not _confirm(args, "Are you sure you want to delete all ACLs for "
                                          f"resource filter `{filter_text}`? (y/n)"):
                        continue
                    filters = [{"resource_type_filter": int(rtype),
                                "resource_name_filter": name, "pattern_type_filter": int(pattern),
                                "principal_filter": None, "host_filter": None,
                                "operation": int(_O.ANY),
                                "permission_type": int(AclPermission.ANY)}]
                answer = await client.request(ApiKey.DELETE_ACLS, {"filters": filters})
                for r in answer.filter_results:
                    if r.error_code:
                        raise KafkaError(r.error_code, r.error_message)
        else:
            found = []
            for rtype, name in _resources(args):
                found += await _describe(client, rtype, name, pattern)
            if not _resources(args):  # no resource named: every ACL, whatever its pattern
                found = await _describe(client, ResourceType.ANY, None, PatternType.ANY)
            if not args.principal:
                _print_acls(found)
            for principal in args.principal:  # Kafka filters by principal on its side
                out(f"ACLs for principal `{principal}`")
                _print_acls(found, principal)
    return 0


def check_args(args: argparse.Namespace) -> None:
    if sum((args.add, args.remove, args.list)) != 1:
        raise UsageError("Command must include exactly one action: --list, --add, --remove.")
    if args.add or args.remove:
        _check_operations(args)


def main(argv: Sequence[str] | None = None) -> int:
    return tool_main(build_parser(), argv, _main, required=("bootstrap_server",),
                     check=check_args)


if __name__ == "__main__":
    sys.exit(main())
