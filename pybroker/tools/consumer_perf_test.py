"""kafka-consumer-perf-test: consume N messages, report throughput.

Kafka's ConsumerPerformance: prints the header

    start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec

and one line of values when `--messages` have been read (or `--timeout` ms passed without a
record, with Kafka's WARNING). With `--show-detailed-stats` the header starts with
`time, threadId` and a line is printed every `--reporting-interval` ms instead of the summary.
Reading starts at the earliest offset (`--from-latest`: the latest). With `--group` the tool
joins that consumer group (rebalance.time.ms is the time to get partitions); without it, it
reads every partition directly, where Kafka would make up a "perf-consumer-NNNNN" group.
"""
from __future__ import annotations

import argparse
import math
import re
import sys
import time
from datetime import datetime
from typing import Sequence

import trio

from pybroker.client.consumer import Consumer
from pybroker.tools.client_config import consumer_options
from pybroker.tools.common import (
    INTERRUPTED, ArgumentParser, ClientProperties, UsageError, connect, load_properties, out,
    parse_key_values, require, stop_on_signals, subscribe_or_assign, tool_main,
)

PROG = "kafka-consumer-perf-test"
_JAVA_DATE = re.compile(r"yyyy|yy|MM|dd|HH|mm|ss|SSS|'[^']*'")


def build_parser() -> ArgumentParser:
    p = ArgumentParser(PROG, "This tool is used to verify the consumer performance.")
    p.add_argument("--bootstrap-server", help="REQUIRED: The server(s) to connect to.")
    p.add_argument("--broker-list", help=argparse.SUPPRESS)
    p.add_argument("--topic", help="The topic to consume from.")
    p.add_argument("--include", help="Regular expression specifying list of topics to include "
                   "for consumption.")
    p.add_argument("--group", help="The group id to consume on.")
    p.add_argument("--fetch-size", type=int, default=1024 * 1024, help="The amount of data to "
                   "fetch in a single request (default: 1048576).")
    p.add_argument("--from-latest", action="store_true", help="If the consumer does not "
                   "already have an established offset to consume from, start with the latest "
                   "message present in the log rather than the earliest message.")
    p.add_argument("--socket-buffer-size", type=int, help=argparse.SUPPRESS)
    p.add_argument("--consumer.config", "--command-config", dest="consumer_config",
                   help="Consumer config properties file.")
    p.add_argument("--command-property", action="append", dest="command_property",
                   metavar="prop=value", help="Consumer properties.")
    p.add_argument("--print-metrics", action="store_true", help="Print out the metrics "
                   "(not collected by this client; ignored).")
    p.add_argument("--show-detailed-stats", action="store_true", help="If set, stats are "
                   "reported for each reporting interval as configured by reporting-interval")
    p.add_argument("--timeout", type=int, default=10000, help="The maximum allowed time in "
                   "milliseconds between returned records (default: 10000).")
    p.add_argument("--messages", type=int, help="REQUIRED: The number of messages to consume.")
    p.add_argument("--reporting-interval", type=int, default=5000, help="Interval in "
                   "milliseconds at which to print progress info (default: 5000).")
    p.add_argument("--date-format", default="yyyy-MM-dd HH:mm:ss:SSS", help="The date format "
                   "to use for formatting the time field (java.text.SimpleDateFormat).")
    p.add_argument("--hide-header", action="store_true", help="If set, skips printing the "
                   "header for the stats")
    p.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    p.add_argument("--num-fetch-threads", type=int, help=argparse.SUPPRESS)
    return p


def java_date(pattern: str, ms: float) -> str:
    """A SimpleDateFormat pattern's common letters (y M d H m s S, quoted text)."""
    moment = datetime.fromtimestamp(ms / 1000)

    def token(m: re.Match[str]) -> str:
        t = m.group(0)
        return {"yyyy": f"{moment.year:04d}", "yy": f"{moment.year % 100:02d}",
                "MM": f"{moment.month:02d}", "dd": f"{moment.day:02d}",
                "HH": f"{moment.hour:02d}", "mm": f"{moment.minute:02d}",
                "ss": f"{moment.second:02d}",
                "SSS": f"{moment.microsecond // 1000:03d}"}.get(t, t[1:-1])

    return _JAVA_DATE.sub(token, pattern)


def jf(value: float, digits: int = 4) -> str:
    """Java's %.Nf, including its Infinity and NaN."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return f"{value:.{digits}f}"


def _div(a: float, b: float) -> float:
    if b == 0:
        return math.nan if a == 0 else math.copysign(math.inf, a)
    return a / b


async def _main(args: argparse.Namespace) -> int:
    props = load_properties(args.consumer_config) if args.consumer_config else ClientProperties()
    props.update(parse_key_values(args.command_property, "consumer property"))
    options = consumer_options(props)
    options.setdefault("auto_offset_reset", "latest" if args.from_latest else "earliest")
    options.setdefault("max_partition_fetch_bytes", args.fetch_size)
    if args.group:
        options["group_id"] = args.group
    if not args.hide_header:
        head = ("time, threadId" if args.show_detailed_stats else "start.time, end.time")
        out(f"{head}, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
            "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
    messages = bytes_read = last_messages = last_bytes = 0
    join_ms = 0.0
    stopped = [False]
    timeout = args.timeout / 1000
    interval = args.reporting_interval / 1000
    async with connect(args.bootstrap_server or args.broker_list, props,
                       default_client_id="perf-consumer-client") as client:
        async with Consumer(client, **options) as consumer:
            start = time.time()
            await subscribe_or_assign(consumer, args.topic, args.include)
            if consumer.group_id is not None:
                join_ms = (time.time() - start) * 1000
            last_report = last_consumed = now = time.time()
            window_join = join_ms
            with trio.CancelScope() as consuming:
                await client.nursery.start(stop_on_signals, consuming, stopped)
                while messages < args.messages and now - last_consumed <= timeout:
                    records = await consumer.poll(0.1)
                    now = time.time()
                    if records:
                        last_consumed = now
                    for r in records[:args.messages - messages]:
                        messages += 1
                        bytes_read += len(r.key or b"") + len(r.value or b"")
                        if now - last_report >= interval:
                            if args.show_detailed_stats:
                                _progress(args, bytes_read, last_bytes, messages, last_messages,
                                          last_report, now, window_join)
                            window_join = 0.0
                            last_report, last_messages, last_bytes = now, messages, bytes_read
            end = time.time()
    if messages < args.messages and not stopped[0]:
        out(f"WARNING: Exiting before consuming the expected number of messages: timeout "
            f"({args.timeout} ms) exceeded. You can use the --timeout option to increase the "
            "timeout.")
    if not args.show_detailed_stats:
        elapsed = end - start
        fetch_ms = (end - start) * 1000 - join_ms
        mb = bytes_read / (1024 * 1024)
        dates = (java_date(args.date_format, start * 1000), java_date(args.date_format, end * 1000))
        out(f"{dates[0]}, {dates[1]}, {jf(mb)}, {jf(_div(mb, elapsed))}, {messages}, "
            f"{jf(_div(messages, elapsed))}, {int(join_ms)}, {int(fetch_ms)}, "
            f"{jf(_div(mb, fetch_ms / 1000))}, {jf(_div(messages, fetch_ms / 1000))}")
    return INTERRUPTED if stopped[0] else 0


def _progress(args: argparse.Namespace, bytes_read: int, last_bytes: int, messages: int,
              last_messages: int, start: float, end: float, join_ms: float) -> None:
    elapsed_ms = (end - start) * 1000
    total_mb = bytes_read / (1024 * 1024)
    window_mb = (bytes_read - last_bytes) / (1024 * 1024)
    fetch_ms = elapsed_ms - join_ms
    line = (f"{java_date(args.date_format, end * 1000)}, 0, {jf(total_mb)}, "
            f"{jf(_div(1000 * window_mb, elapsed_ms))}, {messages}, "
            f"{jf(_div(messages - last_messages, elapsed_ms) * 1000)}, {int(join_ms)}, "
            f"{int(fetch_ms)}, {jf(0.0 if fetch_ms <= 0 else 1000 * window_mb / fetch_ms)}, "
            f"{jf(0.0 if fetch_ms <= 0 else 1000 * (messages - last_messages) / fetch_ms)}")
    out(line)
    sys.stdout.flush()


def check_args(args: argparse.Namespace) -> None:
    if bool(args.topic) == bool(args.include):
        raise UsageError("Exactly one of the following arguments is required: [topic], "
                         "[include]")
    require(args, ("bootstrap_server", "broker_list"))


def main(argv: Sequence[str] | None = None) -> int:
    return tool_main(build_parser(), argv, _main, required=("messages",), check=check_args)


if __name__ == "__main__":
    sys.exit(main())
