"""What kafka-consumer-groups and kafka-share-groups have in common, kept in one place.

Kafka's ConsumerGroupCommand and ShareGroupCommand take many flags of the same name and kind
(`--group` repeats, `--state` takes an optional value, `--to-offset` a number), print their
tables with the same Java printf, and run one action through an Admin client. Those are
here; what differs stays in each tool and is spelt out there: every flag's help text (Kafka
words them per tool), which flags a tool takes and in what order, its checks of the command
line and what each action prints.
"""
from __future__ import annotations

import argparse
from typing import Any, Awaitable, Callable, Mapping

from pybroker.client.admin import Admin
from pybroker.client.cluster import BrokerNode
from pybroker.tools.common import ArgumentParser, ClientProperties, connect, load_properties

__all__ = ["MISSING", "add_flags", "coordinator_cell", "table", "run_action"]

MISSING = "-"  # Kafka's tables' cell for a value not known

# Each group-tool flag's argparse kind; a flag not listed is a plain option with a value.
_KINDS: dict[str, dict[str, Any]] = {
    "--group": {"action": "append"},
    "--topic": {"action": "append"},
    # optional value: `--state` alone is "" (show the state), `--state Stable` a filter
    "--state": {"nargs": "?", "const": "", "default": None},
    "--type": {"nargs": "?", "const": "", "default": None},
    "--to-offset": {"type": int},
    "--shift-by": {"type": int},
    "--timeout": {"type": int, "default": 5000},
    **{flag: {"action": "store_true"} for flag in (
        "--all-groups", "--all-topics", "--list", "--describe", "--delete", "--reset-offsets",
        "--delete-offsets", "--offsets", "--members", "--verbose", "--dry-run", "--execute",
        "--export", "--to-earliest", "--to-latest", "--to-current")},
}


def add_flags(parser: ArgumentParser, helps: Mapping[str, str]) -> None:
    """Add the flags `helps` names, in its order, each with its help text there and the kind
    both tools give it (`_KINDS`), so a flag the two share can never parse differently."""
    for flag, text in helps.items():
        parser.add_argument(flag, help=text, **_KINDS.get(flag, {}))


def table(rows: list[list[str]], widths: list[int]) -> str:
    """Java's printf("%-Ws %-Ws ... %s%n") for each row: a cell per width padded to it, the
    cells past the widths as they are."""
    return "".join(" ".join([f"{v:<{w}}" for v, w in zip(row, widths)] + row[len(widths):])
                   + "\n" for row in rows)


def coordinator_cell(node: BrokerNode | None) -> str:
    """The COORDINATOR (ID) cell of a `--describe --state` table: host:port  (id), or "-"
    where the coordinator is not known."""
    return f"{node.host}:{node.port}  ({node.node_id})" if node is not None else MISSING


Action = Callable[[Admin, argparse.Namespace], Awaitable[int]]


async def run_action(args: argparse.Namespace, action: str, client_id: str,
                     actions: Mapping[str, Action]) -> int:
    """Run the chosen action with an Admin on `--bootstrap-server`, with `--command-config`'s
    properties; `--timeout` (ms) bounds the admin calls, at least 1 s, and each request
    waits at least 30 s."""
    props = load_properties(args.command_config) if args.command_config else ClientProperties()
    timeout = max(1.0, args.timeout / 1000)
    async with connect(args.bootstrap_server, props, default_client_id=client_id,
                       request_timeout=max(timeout, 30.0)) as client:
        return await actions[action](Admin(client, timeout=timeout), args)
