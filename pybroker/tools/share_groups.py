"""kafka-share-groups: list, describe and delete share groups (KIP-932), and reset or delete
their start offsets.

Kafka 4.1.1's ShareGroupCommand, table for table: `--describe` prints GROUP TOPIC PARTITION
START-OFFSET (with `--verbose`, LEADER-EPOCH too), `--members` and `--state` their own tables,
`--list` the ids (with `--state`, a GROUP STATE table, filtered by the states given), with
Kafka's column widths (at least 15, wider for longer values) and leading blank line.
`--delete-offsets` drops whole topics and prints TOPIC STATUS. `--reset-offsets` (earliest,
latest, an offset, a date-time) works only on a group without members and is a dry run unless
`--execute` is given; Kafka 4.1.1's own tool refuses it ("not yet implemented"), so its
output here is kafka-consumer-groups' (GROUP TOPIC PARTITION NEW-OFFSET). As this project's
kafka-consumer-groups does, where Kafka prints "Error: ..." and exits 0, this tool prints it
on stderr and exits 1.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

from protocol.errors import ErrorCode, KafkaError
from pybroker.client.admin import Admin
from pybroker.client.cluster import TopicPartition
from pybroker.client.errors import error_message
from pybroker.client.share_group_admin import SHARE_GROUP_TYPE, ShareGroupDescription
from pybroker.tools.common import ArgumentParser, ToolError, UsageError, err, out, tool_main
from pybroker.tools.group_command import MISSING, add_flags, coordinator_cell, run_action, table
from pybroker.tools.group_reset import partitions_to_reset, plan

PROG = "kafka-share-groups"
_ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
_STATES = {s.lower(): s for s in ("Stable", "Empty", "Dead", "Unknown")}
_SCENARIOS = ("to_offset", "to_earliest", "to_latest", "to_datetime")


def build_parser() -> ArgumentParser:
    p = ArgumentParser(PROG, "This tool helps to list, describe, reset and delete share "
                       "groups.")
    add_flags(p, {
        "--bootstrap-server": "REQUIRED: The server(s) to connect to.",
        "--command-config": "Property file containing configs to be passed to Admin Client.",
        "--group": "The share group we wish to act on.",
        "--all-groups": "Apply to all share groups.",
        "--topic": "The topic whose offset information should be deleted or included in the "
            "reset offset process. When resetting offsets, partitions can be specified using "
            "this format: 'topic1:0,1,2', where 0,1,2 are the partitions to be included.",
        "--all-topics": "Consider all topics assigned to a share group in the 'reset-offsets' "
            "process.",
        "--list": "List all share groups.",
        "--describe": "Describe share group, members and offset information.",
        "--delete": "Delete share group.",
        "--reset-offsets": "Reset offsets of share group. Supports one share group at the "
            "time, and instances must be inactive.",
        "--delete-offsets": "Delete offsets of share group. Supports one share group at the "
            "time, and multiple topics.",
        "--offsets": "Describe the group and list all topic partitions in the group along with "
            "their offset information. This is the default sub-action and may be used with the "
            "'--describe' option only.",
        "--members": "Describe members of the group. This option may be used with the "
            "'--describe' option only.",
        "--state": "When specified with '--describe', includes the state of the group. When "
            "specified with '--list', it displays the state of all groups. It can also be used "
            "to list groups with specific states.",
        "--verbose": "Provide additional information, if any, when describing the group.",
        "--dry-run": "Only show results without executing changes on share groups. Supported "
            "operations: reset-offsets.",
        "--execute": "Execute operation. Supported operations: reset-offsets.",
        "--to-offset": "Reset offsets to a specific offset.",
        "--to-earliest": "Reset offsets to earliest offset.",
        "--to-latest": "Reset offsets to latest offset.",
        "--to-datetime": "Reset offsets to offset from datetime. Format: "
            "'YYYY-MM-DDThh:mm:ss.sss'",
        "--timeout": "The timeout that can be set for some use cases (default: 5000 ms).",
    })
    # the consumer-group scenarios group_reset.plan knows and share groups do not take
    p.set_defaults(shift_by=None, by_duration=None, from_file=None, to_current=False)
    return p


def check_args(args: argparse.Namespace) -> str:
    actions = [a for a in _ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        raise UsageError("Command must include exactly one action: --list, --describe, "
                         "--delete, --reset-offsets, --delete-offsets")
    action = actions[0]
    if not args.bootstrap_server:
        raise UsageError('Missing required argument "[bootstrap-server]"')
    flag = action.replace("_", "-")
    if action in ("describe", "delete") and not (args.group or args.all_groups):
        raise UsageError(f"Option [{flag}] takes one of these options: [all-groups], [group]")
    if args.group and args.all_groups:
        raise UsageError("Option [group] can't be used with option [all-groups]")
    if action in ("reset_offsets", "delete_offsets") and (
            not args.group or len(args.group) != 1 or args.all_groups):
        raise UsageError(f"Option [{flag}] takes the option: [group]")
    if action == "delete_offsets" and not args.topic:
        raise UsageError("Option [delete-offsets] takes the following options: [group], "
                         "[topic]")
    if action == "reset_offsets":
        if args.dry_run and args.execute:
            raise UsageError("Option [reset-offsets] only accepts one of [execute, dry-run]")
        if args.topic and args.all_topics:
            raise UsageError("Option [topic] can't be used with option [all-topics]")
        if not (args.topic or args.all_topics):
            raise UsageError("Option [reset-offsets] takes one of these options: "
                             "[all-topics], [topic]")
        chosen = [s for s in _SCENARIOS if getattr(args, s) not in (None, False)]
        if len(chosen) != 1:
            raise UsageError("Option [reset-offsets] takes exactly one of these scenarios: "
                             "[to-offset], [to-earliest], [to-latest], [to-datetime]")
    if action != "describe" and (args.members or args.offsets):
        raise UsageError(f"Option [{'members' if args.members else 'offsets'}] can only be "
                         "used with option [describe]")
    if args.describe and sum((args.members, args.offsets, args.state is not None)) > 1:
        raise UsageError("Option [describe] takes at most one of these options: [members], "
                         "[offsets], [state]")
    return action


# -- printing ----------------------------------------------------------------------------------

def _exists(group: str, desc: Any) -> ShareGroupDescription:
    if isinstance(desc, KafkaError) and desc.code == ErrorCode.GROUP_ID_NOT_FOUND:
        raise ToolError(f"Share group '{group}' does not exist.")
    if isinstance(desc, BaseException):
        raise desc
    assert isinstance(desc, ShareGroupDescription)
    if desc.state == "Dead":
        raise ToolError(f"Share group '{group}' group state is DEAD.")
    return desc


def _no_members(group: str, desc: ShareGroupDescription) -> bool:
    if desc.state == "Empty" or not desc.members:
        err(f"\nShare group '{group}' has no active members.")
        return True
    return False


async def describe_offsets(admin: Admin, group: str, verbose: bool) -> None:
    offsets = await admin.list_share_group_offsets(group)
    rows = [[group, tp.topic, str(tp.partition),
             MISSING if o.leader_epoch is None else str(o.leader_epoch),
             MISSING if o.start_offset is None else str(o.start_offset)]
            for tp, o in sorted(offsets.items())]
    g = max([15, len(group)])
    t = max([15] + [len(r[1]) for r in rows])
    header = ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET"]
    keep = [0, 1, 2, 3, 4] if verbose else [0, 1, 2, 4]
    widths = [g, t, 10, 13] if verbose else [g, t, 10]
    sys.stdout.write("\n" + table([[r[i] for i in keep] for r in [header, *rows]], widths))


def _assignment(partitions: Sequence[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    text = ";".join(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in sorted(by_topic.items()))
    return text or MISSING


def describe_members(group: str, desc: ShareGroupDescription, verbose: bool) -> None:
    if _no_members(group, desc):
        return
    members = desc.members
    widths = [max(15, len(group)), max([15] + [len(m.member_id) for m in members]),
              max([15] + [len(m.host) for m in members]),
              max([15] + [len(m.client_id) for m in members]), 12]
    header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    rows = [[group, m.member_id, m.host, m.client_id, str(len(m.assignment))]
            + ([str(m.member_epoch)] if verbose else []) + [_assignment(m.assignment)]
            for m in members]
    if verbose:
        header.append("MEMBER-EPOCH")
        widths.append(13)
    sys.stdout.write("\n" + table([header + ["ASSIGNMENT"], *rows], widths))


def describe_state(group: str, desc: ShareGroupDescription, verbose: bool) -> None:
    coordinator = coordinator_cell(desc.coordinator)
    widths = [max(15, len(group)), max(25, len(coordinator)), 15]
    header = ["GROUP", "COORDINATOR (ID)", "STATE"]
    row = [group, coordinator, desc.state]
    if verbose:
        header += ["GROUP-EPOCH", "ASSIGNMENT-EPOCH"]
        row += [str(desc.group_epoch), str(desc.assignment_epoch)]
        widths += [12, 17]
    sys.stdout.write("\n" + table([header + ["#MEMBERS"], row + [str(len(desc.members))]],
                                  widths))
    _no_members(group, desc)


# -- actions -----------------------------------------------------------------------------------

async def _group_ids(admin: Admin, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [g.group_id for g in await admin.list_groups(types=[SHARE_GROUP_TYPE])]
    return list(dict.fromkeys(args.group))


async def list_groups(admin: Admin, args: argparse.Namespace) -> int:
    states: list[str] = []
    for s in (args.state or "").split(","):
        if s.strip():
            name = _STATES.get(s.strip().lower())
            if name is None:
                raise UsageError(f"Invalid state list '{args.state}'. Valid states are: "
                                 + ", ".join(_STATES.values()))
            states.append(name)
    groups = await admin.list_groups(states=states, types=[SHARE_GROUP_TYPE])
    if args.state is None:
        for g in groups:
            out(g.group_id)
        return 0
    width = max([15] + [len(g.group_id) for g in groups])
    sys.stdout.write(table([["GROUP", "STATE"]] + [[g.group_id, g.state] for g in groups],
                           [width]))
    return 0


async def describe(admin: Admin, args: argparse.Namespace) -> int:
    failed = 0
    for group, desc in sorted((await admin.describe_share_groups(
            await _group_ids(admin, args))).items()):
        try:
            found = _exists(group, desc)
            if args.members:
                describe_members(group, found, args.verbose)
            elif args.state is not None:
                describe_state(group, found, args.verbose)
            else:
                await describe_offsets(admin, group, args.verbose)
        except (ToolError, KafkaError) as exc:
            err(f"\nError: {error_message(exc)}")
            failed = 1
    return failed


async def delete(admin: Admin, args: argparse.Namespace) -> int:
    groups = await _group_ids(admin, args)
    shares = {g.group_id for g in await admin.list_groups(types=[SHARE_GROUP_TYPE])}
    failed: dict[str, str] = {g: f"Group '{g}' is not a share group." for g in groups
                              if g not in shares}
    results = await admin.delete_groups([g for g in groups if g in shares])
    for group, exc in results.items():
        if isinstance(exc, KafkaError) and exc.code == ErrorCode.NON_EMPTY_GROUP:
            failed[group] = f"Share group '{group}' is not EMPTY."
        elif exc is not None:
            failed[group] = error_message(exc)
    ok = [g for g in groups if g not in failed]
    if not failed:
        out("Deletion of requested share groups (" + ", ".join(f"'{g}'" for g in ok)
            + ") was successful.")
        return 0
    err("\nError: Deletion of some share groups failed:")
    for group, reason in failed.items():
        err(f"* Group '{group}' could not be deleted due to: {reason}")
    if ok:
        out("\nThese share groups were deleted successfully: " + ", ".join(f"'{g}'" for g in ok))
    return 1


async def reset_offsets(admin: Admin, args: argparse.Namespace) -> int:
    if not (args.dry_run or args.execute):
        err("WARN: No action will be performed as the --execute option is missing. "
            "You should add the --dry-run option explicitly if you are scripting this command.")
    group = args.group[0]
    desc = _exists(group, (await admin.describe_share_groups([group]))[group])
    if desc.state != "Empty":
        raise ToolError(f"Share group '{group}' is not empty.")
    if args.all_topics:
        partitions = sorted(await admin.list_share_group_offsets(group))
    else:
        partitions = await partitions_to_reset(admin, args, group)
    offsets = dict(sorted((await plan(admin, args, group, partitions, None)).items()))
    if args.execute and offsets:
        for tp, exc in (await admin.alter_share_group_offsets(group, offsets)).items():
            if exc is not None:
                raise KafkaError(exc.code, f"{error_message(exc)} ({tp})")
    g = max([15, len(group)])
    t = max([15] + [len(tp.topic) for tp in offsets])
    sys.stdout.write("\n" + table([["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]] + [
        [group, tp.topic, str(tp.partition), str(o)] for tp, o in offsets.items()], [g, t, 10]))
    return 0


async def delete_offsets(admin: Admin, args: argparse.Namespace) -> int:
    group = args.group[0]
    topics = list(dict.fromkeys(args.topic))
    try:
        results: dict[str, Any] = await admin.delete_share_group_offsets(group, topics)
        status = 0
    except KafkaError as exc:
        err(f"\nError: {error_message(exc)}")
        results, status = {t: exc for t in topics}, 1
    if any(e is not None for e in results.values()):
        status = 1
    width = max([15] + [len(t) for t in results])
    sys.stdout.write("\n" + table([["TOPIC", "STATUS"]] + [
        [t, "Successful" if e is None else f"Error: {error_message(e)}"]
        for t, e in sorted(results.items())], [width]))
    return status


async def _main(args: argparse.Namespace, action: str) -> int:
    return await run_action(args, action, PROG, {
        "list": list_groups, "describe": describe, "delete": delete,
        "reset_offsets": reset_offsets, "delete_offsets": delete_offsets})


def main(argv: Sequence[str] | None = None) -> int:
    return tool_main(build_parser(), argv, _main, check=check_args,
                     error_prefix="Error: Executing share group command failed due to ")


if __name__ == "__main__":
    sys.exit(main())
