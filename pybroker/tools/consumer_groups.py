"""kafka-consumer-groups: list, describe, delete groups, and reset or delete their offsets.

Kafka's ConsumerGroupCommand, table for table: `--describe` prints GROUP TOPIC PARTITION
CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID (with `--verbose`, LEADER-EPOCH
too), `--members` and `--state` their own tables, with Kafka's column widths (at least 15,
wider for longer values) and Kafka's leading blank line. `--reset-offsets` is a dry run unless
`--execute` is given and works only on groups without active members. A difference: where
Kafka prints "Error: ..." and still exits 0 (a group that does not exist, a failed deletion or
reset), this tool prints the same message on stderr and exits 1, so scripts can tell.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

from protocol.errors import ErrorCode, KafkaError
from pybroker.client.admin import Admin, OffsetSpec
from pybroker.client.cluster import TopicPartition
from pybroker.client.errors import error_message
from pybroker.client.group_admin import GroupDescription
from pybroker.tools.common import ArgumentParser, ToolError, UsageError, err, out, tool_main
from pybroker.tools.group_command import MISSING, add_flags, coordinator_cell, run_action, table
from pybroker.tools.group_reset import SCENARIOS, partitions_to_reset, plan, read_plan_file

PROG = "kafka-consumer-groups"
_ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
_STATES = {s.lower(): s for s in ("PreparingRebalance", "CompletingRebalance", "Stable",
                                  "Dead", "Empty", "Assigning", "Reconciling")}


def build_parser() -> ArgumentParser:
    p = ArgumentParser(PROG, "This tool helps to list all consumer groups, describe a consumer "
                       "group, delete consumer group info, or reset consumer group offsets.")
    add_flags(p, {
        "--bootstrap-server": "REQUIRED: The server(s) to connect to.",
        "--command-config": "Property file containing configs to be passed to Admin Client and "
            "Consumer.",
        "--group": "The consumer group we wish to act on.",
        "--all-groups": "Apply to all consumer groups.",
        "--topic": "The topic whose consumer group information should be deleted or topic "
            "whose should be included in the reset offset process (topic or "
            "topic:partition,partition).",
        "--all-topics": "Consider all topics assigned to a group in the `reset-offsets` "
            "process.",
        "--list": "List all consumer groups.",
        "--describe": "Describe consumer group and list offset lag (number of messages not yet "
            "processed) related to given group.",
        "--delete": "Pass in groups to delete topic partition offsets and ownership "
            "information over the entire consumer group.",
        "--reset-offsets": "Reset offsets of consumer group. Supports one consumer group at "
            "the time, and instances should be inactive.",
        "--delete-offsets": "Delete offsets of consumer group. Supports one consumer group at "
            "the time, and multiple topics.",
        "--offsets": "Describe the group and list all topic partitions in the group along with "
            "their offset lag.",
        "--members": "Describe members of the group.",
        "--state": "When specified with '--describe', includes the state of the group. With "
            "'--list', filters by the given comma-separated states.",
        "--type": "When specified with '--list', shows the group type (classic).",
        "--verbose": "Provide additional information.",
        "--dry-run": "Only show results without executing changes on Consumer Groups.",
        "--execute": "Execute operation.",
        "--export": "Export operation execution to a CSV file.",
        "--to-offset": "Reset offsets to a specific offset.",
        "--to-earliest": "Reset offsets to earliest.",
        "--to-latest": "Reset offsets to latest.",
        "--to-current": "Reset offsets to current.",
        "--to-datetime": "Reset offsets to offset from datetime. Format: "
            "'YYYY-MM-DDTHH:mm:SS.sss'",
        "--by-duration": "Reset offsets to offset by duration from current timestamp. Format: "
            "'PnDTnHnMnS'",
        "--shift-by": "Reset offsets shifting current offset by 'n'.",
        "--from-file": "Reset offsets to values defined in CSV file.",
        "--timeout": "The timeout that can be set for some use cases (default: 5000 ms).",
    })
    return p


def check_args(args: argparse.Namespace) -> str:
    actions = [a for a in _ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        raise UsageError("Command must include exactly one action: --list, --describe, "
                         "--delete, --reset-offsets, --delete-offsets")
    action = actions[0]
    if not args.bootstrap_server:
        raise UsageError('Missing required argument "[bootstrap-server]"')
    has_groups = bool(args.group) or args.all_groups
    flag = "--" + action.replace("_", "-")
    if action in ("describe", "delete", "reset_offsets") and not has_groups:
        raise UsageError(f"Option [{flag[2:]}] takes one of these options: [all-groups], "
                         "[group]")
    if args.group and args.all_groups:
        raise UsageError("Option [group] can't be used with option [all-groups]")
    if action == "delete_offsets" and (not args.group or len(args.group) != 1 or not args.topic):
        raise UsageError("Option [delete-offsets] takes the following options: [group], "
                         "[topic]")
    if action == "reset_offsets":
        if args.dry_run and args.execute:
            raise UsageError("Option [reset-offsets] only accepts one of [execute, dry-run]")
        if args.topic and args.all_topics:
            raise UsageError("Option [topic] can't be used with option [all-topics]")
        chosen = [s for s in SCENARIOS if getattr(args, s) not in (None, False)]
        if len(chosen) > 1:
            raise UsageError("Option [reset-offsets] takes only one of these scenarios: "
                             + ", ".join(f"[{s.replace('_', '-')}]" for s in chosen))
    if action != "describe" and (args.members or args.offsets):
        raise UsageError(f"Option [{'members' if args.members else 'offsets'}] can only be "
                         "used with option [describe]")
    if args.describe and sum((args.members, args.offsets, args.state is not None)) > 1:
        raise UsageError("Option [describe] takes at most one of these options: [members], "
                         "[offsets], [state]")
    return action


# -- printing ----------------------------------------------------------------------------------

def _write(text: str) -> None:
    sys.stdout.write(text)


def _state_ok(group: str, desc: GroupDescription, rows: int) -> bool:
    """Kafka's shouldPrintMemberState; raises for a group that does not exist."""
    if not desc.exists:
        raise ToolError(f"Consumer group '{group}' does not exist.")
    if desc.state == "Empty":
        err(f"\nConsumer group '{group}' has no active members.")
    elif desc.state in ("PreparingRebalance", "CompletingRebalance", "Assigning",
                        "Reconciling"):
        err(f"\nWarning: Consumer group '{group}' is rebalancing.")
    elif desc.state != "Stable":
        raise ToolError(f"Expected a valid consumer group state, but found '{desc.state}'.")
    return rows > 0


def _table(rows: list[list[str]], widths: list[int]) -> None:
    """Kafka's tables: a blank line, then a printf line per row."""
    _write("\n" + table(rows, widths))


async def describe_offsets(admin: Admin, group: str, desc: GroupDescription,
                           verbose: bool) -> None:
    committed = await admin.list_group_offsets(group)
    rows: list[tuple[str, str, str, str, str, str, str, str, str, str]] = []
    assigned: set[TopicPartition] = set()
    members = sorted((m for m in desc.members if m.assignment),
                     key=lambda m: -len(m.assignment))
    groups_of_rows = [(sorted(m.assignment), m.member_id, m.host, m.client_id) for m in members]
    for tps, *_ in groups_of_rows:
        assigned.update(tps)
    unassigned = sorted(tp for tp in committed if tp not in assigned)
    if unassigned:
        groups_of_rows.append((unassigned, MISSING, MISSING, MISSING))
    everything = [tp for tps, *_ in groups_of_rows for tp in tps]
    ends: dict[TopicPartition, Any] = await admin.list_offsets(
        {tp: OffsetSpec.LATEST for tp in everything}) if everything else {}
    for tps, member, host, client in groups_of_rows:
        for tp in tps:
            c = committed.get(tp)
            end = ends.get(tp)
            end_offset = end.offset if end is not None and not isinstance(end, BaseException) \
                else None
            lag = (end_offset - c.offset) if c is not None and end_offset is not None else None
            rows.append((group, tp.topic, str(tp.partition),
                         str(c.leader_epoch) if c is not None and c.leader_epoch >= 0
                         else MISSING,
                         str(c.offset) if c is not None else MISSING,
                         str(end_offset) if end_offset is not None else MISSING,
                         str(lag) if lag is not None else MISSING, member, host, client))
    if not _state_ok(group, desc, len(rows)):
        return
    g = max([15] + [len(r[0]) for r in rows])
    t = max([15] + [len(r[1]) for r in rows])
    cw = max([15] + [len(r[7]) for r in rows])
    h = max([15] + [len(r[8]) for r in rows])
    header = ("GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "CURRENT-OFFSET", "LOG-END-OFFSET",
              "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID")
    keep = list(range(10)) if verbose else [0, 1, 2, 4, 5, 6, 7, 8, 9]
    widths = ([g, t, 10, 15, 15, 15, 15, cw, h] if verbose else [g, t, 10, 15, 15, 15, cw, h])
    _table([[r[i] for i in keep] for r in [header, *rows]], widths)


def describe_members(group: str, desc: GroupDescription, verbose: bool) -> None:
    ok = _state_ok(group, desc, len(desc.members))
    members = desc.members if ok else ()
    g = max([15, len(group)])
    c = max([15] + [len(m.member_id) for m in members])
    gi = max([17] + [len(m.group_instance_id or "") for m in members])
    h = max([15] + [len(m.host) for m in members])
    cl = max([15] + [len(m.client_id) for m in members])
    with_instance = any(m.group_instance_id for m in members)

    def assignment(m: Any, partitions: Any = None) -> str:
        by_topic: dict[str, list[int]] = {}
        for tp in m.assignment if partitions is None else partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        text = ";".join(sorted(f"{t}:{','.join(map(str, sorted(ps)))}"
                               for t, ps in by_topic.items()))
        return text or MISSING

    a = max([20] + [len(assignment(m)) for m in members])

    def line(cells: list[str], widths: list[int]) -> str:
        return "".join(f"{v:<{w}} " for v, w in zip(cells, widths))

    base = [g, c] + ([gi] if with_instance else []) + [h, cl, 15]
    head = ["GROUP", "CONSUMER-ID"] + (["GROUP-INSTANCE-ID"] if with_instance else []) + \
        ["HOST", "CLIENT-ID", "#PARTITIONS"]
    text = "\n" + line(head, base)
    # As Kafka's tool (KIP-1099): an UPGRADED column once the group has a classic member (a
    # consumer group upgraded online), saying which members speak the consumer protocol.
    with_upgraded = any(m.upgraded is False for m in members)
    if verbose:
        text += f"{'CURRENT-EPOCH':<15} {'CURRENT-ASSIGNMENT':<{a}} {'TARGET-EPOCH':<15} " \
                f"{'TARGET-ASSIGNMENT':<20}" + (" UPGRADED" if with_upgraded else "")
    _write(text + "\n")
    for m in members:
        cells = [group, m.member_id] + ([m.group_instance_id or ""] if with_instance else []) + \
            [m.host, m.client_id, str(len(m.assignment))]
        row = line(cells, base)
        if verbose:  # the epochs and target of a KIP-848 member, "-" for a classic one
            epoch = MISSING if m.member_epoch is None else str(m.member_epoch)
            target_epoch = MISSING if m.target_epoch is None else str(m.target_epoch)
            target = MISSING if m.target_assignment is None \
                else assignment(m, m.target_assignment)
            row += f"{epoch:<15} {assignment(m):<{a}} {target_epoch:<15} {target:<20}"
            if with_upgraded:
                row += " " + ("true" if m.upgraded else "false")
        _write(row + "\n")


def _or_missing(value: int | None) -> str:
    return MISSING if value is None else str(value)


def describe_state(group: str, desc: GroupDescription, verbose: bool) -> None:
    if not _state_ok(group, desc, 1):
        return
    coordinator = coordinator_cell(desc.coordinator)
    widths = [max(15, len(group)), max(25, len(coordinator)), 20, 20]
    strategy = desc.protocol or MISSING
    if verbose:
        widths += [15, 25]
        _table([["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                 "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"],
                [group, coordinator, strategy, desc.state, _or_missing(desc.group_epoch),
                 _or_missing(desc.assignment_epoch), str(len(desc.members))]], widths)
    else:
        _table([["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                [group, coordinator, strategy, desc.state, str(len(desc.members))]], widths)


# -- actions -----------------------------------------------------------------------------------

async def _group_ids(admin: Admin, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [g.group_id for g in await admin.list_groups() if g.is_consumer_group]
    return list(dict.fromkeys(args.group))


async def list_groups(admin: Admin, args: argparse.Namespace) -> int:
    states: list[str] = []
    if args.state:
        for s in args.state.split(","):
            name = _STATES.get(s.strip().lower())
            if name is None:
                raise UsageError(f"Invalid state list '{args.state}'. Valid states are: "
                                 + ", ".join(_STATES.values()))
            states.append(name)
    groups = [g for g in await admin.list_groups(states=states) if g.is_consumer_group]
    if args.state is None and args.type is None:
        for g in groups:
            out(g.group_id)
        return 0
    width = max([15] + [len(g.group_id) for g in groups]) + 10
    columns = [("GROUP", lambda g: g.group_id, width)]
    if args.type is not None:
        columns.append(("TYPE", lambda g: (g.group_type or "classic").capitalize(), 20))
    if args.state is not None:
        columns.append(("STATE", lambda g: g.state or "Unknown", 20))
    out(" ".join(f"{name:<{w}}" for name, _, w in columns))
    for g in groups:
        out(" ".join(f"{get(g):<{w}}" for _, get, w in columns))
    return 0


async def describe(admin: Admin, args: argparse.Namespace) -> int:
    failed = 0
    for group, desc in sorted((await admin.describe_groups(await _group_ids(admin, args))).items()):
        try:
            if isinstance(desc, BaseException):
                raise desc
            if args.members:
                describe_members(group, desc, args.verbose)
            elif args.state is not None:
                describe_state(group, desc, args.verbose)
            else:
                await describe_offsets(admin, group, desc, args.verbose)
        except (ToolError, KafkaError) as exc:
            err(f"\nError: {error_message(exc)}")
            failed = 1
    return failed


async def delete(admin: Admin, args: argparse.Namespace) -> int:
    results = await admin.delete_groups(await _group_ids(admin, args))
    ok = [g for g, e in results.items() if e is None]
    failed = {g: e for g, e in results.items() if e is not None}
    if not failed:
        out("Deletion of requested consumer groups (" + ", ".join(f"'{g}'" for g in ok)
            + ") was successful.")
        return 0
    err("\nError: Deletion of some consumer groups failed:")
    for group, exc in failed.items():
        reason = error_message(exc)
        if isinstance(exc, KafkaError) and exc.code == ErrorCode.GROUP_ID_NOT_FOUND:
            reason = f"Group '{group}' does not exist."
        err(f"* Group '{group}' could not be deleted due to: {reason}")
    if ok:
        out("\nThese consumer groups were deleted successfully: "
            + ", ".join(f"'{g}'" for g in ok))
    return 1


async def reset_offsets(admin: Admin, args: argparse.Namespace) -> int:
    if not (args.dry_run or args.execute):
        err("WARN: No action will be performed as the --execute option is missing. In a future "
            "major release, the default behavior of this command will be to prompt the user "
            "before executing the reset rather than doing a dry run. You should add the "
            "--dry-run option explicitly if you are scripting this command and want to keep "
            "the current default behavior without prompting.")
    group_ids = await _group_ids(admin, args)
    file_plan = read_plan_file(args.from_file, group_ids) if args.from_file else None
    results: dict[str, dict[TopicPartition, int]] = {}
    failed = 0
    for group, desc in (await admin.describe_groups(group_ids)).items():
        if isinstance(desc, BaseException):
            raise desc
        if desc.exists and desc.state != "Empty":
            err(f"\nError: Assignments can only be reset if the group '{group}' is inactive, "
                f"but the current state is {desc.state}.")
            results[group], failed = {}, 1
            continue
        partitions = await partitions_to_reset(admin, args, group)
        offsets = await plan(admin, args, group, partitions, file_plan)
        if args.execute and offsets:
            for tp, exc in (await admin.alter_group_offsets(group, offsets)).items():
                if exc is not None:
                    raise KafkaError(exc.code, f"{error_message(exc)} ({tp})")
        results[group] = dict(sorted(offsets.items()))
    if args.export:
        single = len(group_ids) == 1
        for group, offsets in results.items():
            for tp, offset in offsets.items():
                out((f"{tp.topic},{tp.partition},{offset}" if single
                     else f"{group},{tp.topic},{tp.partition},{offset}"))
        return failed
    if results:
        g = max([15] + [len(x) for x in results])
        t = max([15] + [len(tp.topic) for o in results.values() for tp in o])
        rows = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]]
        rows += [[group, tp.topic, str(tp.partition), str(offset)]
                 for group, offsets in results.items() for tp, offset in offsets.items()]
        _table(rows, [g, t, 10])
    return failed


async def delete_offsets(admin: Admin, args: argparse.Namespace) -> int:
    group = args.group[0]
    partitions: list[TopicPartition] = []
    whole = []
    for arg in args.topic:
        if ":" in arg:
            topic, _, parts = arg.partition(":")
            partitions += [TopicPartition(topic, int(p)) for p in parts.split(",")]
        else:
            whole.append(arg)
    problems: dict[TopicPartition, Any] = {}
    for name, topic in (await admin.describe_topics(whole)).items() if whole else ():
        if isinstance(topic, BaseException):
            problems[TopicPartition(name, -1)] = topic
        else:
            partitions += [TopicPartition(name, p) for p in sorted(topic.partitions)]
    try:
        results: dict[TopicPartition, Any] = await admin.delete_group_offsets(group, partitions)
        status = 0
        out(f"Request succeeded for deleting offsets from group {group}.")
    except KafkaError as exc:
        err(f"\nError: {error_message(exc)}")
        return 1
    results.update(problems)
    if any(e is not None for e in results.values()):
        status = 1
    width = max([15] + [len(tp.topic) for tp in results])
    rows = [["TOPIC", "PARTITION", "STATUS"]]
    for tp, e in sorted(results.items(), key=lambda kv: f"{kv[0].topic}{kv[0].partition}"):
        rows.append([tp.topic, str(tp.partition) if tp.partition >= 0 else MISSING,
                     "Successful" if e is None else f"Error: {error_message(e)}"])
    _table(rows, [width, 10])
    return status


async def _main(args: argparse.Namespace, action: str) -> int:
    return await run_action(args, action, PROG, {
        "list": list_groups, "describe": describe, "delete": delete,
        "reset_offsets": reset_offsets, "delete_offsets": delete_offsets})


def main(argv: Sequence[str] | None = None) -> int:
    return tool_main(build_parser(), argv, _main, check=check_args,
                     error_prefix="Error: Executing consumer group command failed due to ")


if __name__ == "__main__":
    sys.exit(main())
