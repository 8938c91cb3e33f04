"""The offset arithmetic behind `kafka-consumer-groups --reset-offsets`.

Kafka's GroupOffsetsResetter: choose the partitions (`--all-topics`: those the group has
committed; `--topic t` or `--topic t:0,2`), then the new offsets by scenario (earliest, latest,
current, an offset, a shift, a date-time, a duration, or a CSV plan), clamping explicit offsets
into [log start, log end] with a warning as Kafka does. Nothing here writes: the caller commits
the plan with --execute and prints it either way.
"""
from __future__ import annotations

import argparse
import csv
import re
from datetime import datetime, timedelta, timezone
from typing import Mapping

from protocol.errors import ErrorCode, KafkaError
from pybroker.client.admin import Admin, OffsetSpec
from pybroker.client.cluster import TopicPartition
from pybroker.tools.common import ToolError, UsageError, err, out

__all__ = ["SCENARIOS", "partitions_to_reset", "plan", "parse_datetime", "parse_duration",
           "read_plan_file"]

SCENARIOS = ("to_offset", "to_earliest", "to_latest", "to_current", "to_datetime",
             "by_duration", "shift_by", "from_file")
_DURATION = re.compile(r"^(?P<sign>[-+]?)P(?:(?P<d>[-+]?\d+(?:\.\d+)?)D)?"
                       r"(?:T(?:(?P<h>[-+]?\d+(?:\.\d+)?)H)?(?:(?P<m>[-+]?\d+(?:\.\d+)?)M)?"
                       r"(?:(?P<s>[-+]?\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE)


def parse_datetime(text: str) -> int:
    """Kafka's `Utils.getDateTime`: 'YYYY-MM-DDTHH:mm:SS.sss' with an optional zone (Z,
    +HH:MM); without one, local time. Milliseconds since the epoch."""
    value = text.strip()
    if "T" not in value:
        raise ToolError(f"Error parsing timestamp '{text}': expected format "
                        "'YYYY-MM-DDTHH:mm:SS.sss', e.g. '2024-01-31T23:59:00.000'")
    try:
        moment = datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        raise ToolError(f"Error parsing timestamp '{text}': expected format "
                        "'YYYY-MM-DDTHH:mm:SS.sss'") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return int(moment.timestamp() * 1000)


def parse_duration(text: str) -> timedelta:
    """An ISO-8601 duration as Java's Duration.parse reads it (PnDTnHnMn.nS)."""
    m = _DURATION.match(text.strip())
    if not m or not any(m.group(g) for g in ("d", "h", "m", "s")):
        raise ToolError(f"Text cannot be parsed to a Duration: {text}")
    value = timedelta(days=float(m.group("d") or 0), hours=float(m.group("h") or 0),
                      minutes=float(m.group("m") or 0), seconds=float(m.group("s") or 0))
    return -value if m.group("sign") == "-" else value


def read_plan_file(path: str, groups: list[str]) -> dict[str, dict[TopicPartition, int]]:
    """A reset plan CSV: `topic,partition,offset` (one group) or `group,topic,partition,offset`."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = [r for r in csv.reader(f) if r and any(c.strip() for c in r)]
    except OSError as exc:
        raise ToolError(f"Cannot read {path}: {exc.strerror or exc}") from None
    result: dict[str, dict[TopicPartition, int]] = {}
    try:
        for row in rows:
            if len(row) == 3 and len(groups) == 1:
                group, (topic, partition, offset) = groups[0], row
            elif len(row) == 4:
                group, topic, partition, offset = row
            else:
                raise ValueError(",".join(row))
            result.setdefault(group.strip(), {})[
                TopicPartition(topic.strip(), int(partition))] = int(offset)
    except ValueError as exc:
        raise ToolError(f"Invalid line in reset plan {path}: {exc}") from None
    return result


async def partitions_to_reset(admin: Admin, args: argparse.Namespace, group: str
                              ) -> list[TopicPartition]:
    if args.all_topics:
        return list(await admin.list_group_offsets(group))
    if not args.topic:
        if args.from_file:
            return []
        raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
    chosen: list[TopicPartition] = []
    whole: list[str] = []
    for arg in args.topic:
        if ":" in arg:
            topic, _, parts = arg.partition(":")
            for p in parts.split(","):
                try:
                    chosen.append(TopicPartition(topic, int(p)))
                except ValueError:
                    raise UsageError(f"Invalid partition '{p}' specified in topic arg "
                                     f"'{arg}'") from None
        else:
            whole.append(arg)
    if whole:
        described = await admin.describe_topics(whole)
        for name in whole:
            topic = described[name]
            if isinstance(topic, BaseException):
                raise topic
            chosen.extend(TopicPartition(name, p) for p in sorted(topic.partitions))
    return chosen


async def _check_valid(admin: Admin, partitions: list[TopicPartition]) -> None:
    topics = sorted({tp.topic for tp in partitions})
    described = await admin.describe_topics(topics) if topics else {}
    missing = [tp for tp in partitions
               if isinstance(described.get(tp.topic), BaseException)
               or tp.partition not in described[tp.topic].partitions]
    if missing:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         f"The partitions \"{','.join(str(tp) for tp in missing)}\" do not exist")
    leaderless = [tp for tp in partitions
                  if described[tp.topic].partitions[tp.partition].leader < 0]
    if leaderless:
        raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE,
                         f"The partitions \"{','.join(str(tp) for tp in leaderless)}\" "
                         "have no leader")


async def _offsets(admin: Admin, partitions: list[TopicPartition], spec: int
                   ) -> dict[TopicPartition, int]:
    results = await admin.list_offsets({tp: spec for tp in partitions})
    found: dict[TopicPartition, int] = {}
    for tp in partitions:
        outcome = results.get(tp)
        if isinstance(outcome, BaseException):
            raise outcome
        if outcome is not None:
            found[tp] = outcome.offset
    return found


async def _clamped(admin: Admin, wanted: Mapping[TopicPartition, int]
                   ) -> dict[TopicPartition, int]:
    """Kafka's checkOffsetsRange: out-of-range offsets move to the nearest end, with a warning."""
    tps = list(wanted)
    starts, ends = await _offsets(admin, tps, OffsetSpec.EARLIEST), \
        await _offsets(admin, tps, OffsetSpec.LATEST)
    result: dict[TopicPartition, int] = {}
    for tp, offset in wanted.items():
        if tp in ends and offset > ends[tp]:
            err(f"WARN: New offset ({offset}) is higher than latest offset for topic partition "
                f"{tp}. Value will be set to {ends[tp]}")
            offset = ends[tp]
        elif tp in starts and offset < starts[tp]:
            err(f"WARN: New offset ({offset}) is lower than earliest offset for topic partition "
                f"{tp}. Value will be set to {starts[tp]}")
            offset = starts[tp]
        result[tp] = offset
    return result


async def _by_timestamp(admin: Admin, partitions: list[TopicPartition], timestamp: int
                        ) -> dict[TopicPartition, int]:
    found = await _offsets(admin, partitions, timestamp)
    empty = [tp for tp in partitions if found.get(tp, -1) < 0]
    for tp in empty:
        out(f"\nWarn: Partition {tp.partition} from topic {tp.topic} is empty. "
            "Falling back to latest known offset.")
    if empty:
        found.update(await _offsets(admin, empty, OffsetSpec.LATEST))
    return found


async def plan(admin: Admin, args: argparse.Namespace, group: str,
               partitions: list[TopicPartition],
               file_plan: dict[str, dict[TopicPartition, int]] | None
               ) -> dict[TopicPartition, int]:
    """The new offset of each partition under the chosen scenario."""
    await _check_valid(admin, partitions)
    if args.to_offset is not None:
        return await _clamped(admin, {tp: args.to_offset for tp in partitions})
    if args.to_earliest:
        return await _offsets(admin, partitions, OffsetSpec.EARLIEST)
    if args.to_latest:
        return await _offsets(admin, partitions, OffsetSpec.LATEST)
    if args.shift_by is not None:
        current = await admin.list_group_offsets(group, partitions)
        for tp in partitions:
            if tp not in current:
                raise ToolError(f"Cannot shift offset for partition {tp} since there is no "
                                "current committed offset")
        return await _clamped(admin, {tp: current[tp].offset + args.shift_by
                                      for tp in partitions})
    if args.to_datetime is not None:
        return await _by_timestamp(admin, partitions, parse_datetime(args.to_datetime))
    if args.by_duration is not None:
        moment = datetime.now(timezone.utc) - parse_duration(args.by_duration)
        return await _by_timestamp(admin, partitions, int(moment.timestamp() * 1000))
    if args.from_file is not None:
        assert file_plan is not None
        group_plan = file_plan.get(group)
        if group_plan is None:
            out(f"\nError: No reset plan for group {group} found.")
            return {}
        await _check_valid(admin, list(group_plan))
        return await _clamped(admin, group_plan)
    if args.to_current:
        current = await admin.list_group_offsets(group, partitions)
        result = {tp: current[tp].offset for tp in partitions if tp in current}
        rest = [tp for tp in partitions if tp not in current]
        if rest:
            result.update(await _offsets(admin, rest, OffsetSpec.LATEST))
        return result
    raise UsageError("Option [reset-offsets] requires one of the following scenarios: "
                     "[to-offset], [to-earliest], [to-latest], [to-current], [to-datetime], "
                     "[by-duration], [shift-by], [from-file]")
