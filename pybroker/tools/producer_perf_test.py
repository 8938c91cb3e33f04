"""kafka-producer-perf-test: produce N records as fast as allowed, report throughput and latency.

Kafka's ProducerPerformance: `--num-records`, `--record-size` (one random payload of uppercase
letters, reused, as Kafka does) or `--payload-file` (lines split at `--payload-delimiter`, one
picked at random per record) or `--payload-monotonic`, `--throughput` records/s (-1: no limit),
producer settings as `--producer-props k=v ...` or `--producer.config`. While it runs it prints
a line every 5 s; at the end Kafka's summary:

    N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency,
    P50 ms 50th, P95 ms 95th, P99 ms 99th, P999 ms 99.9th.

Latency is from send() to the acknowledgement of the record's batch. Transactions are not
supported (pybroker has no transaction coordinator).
"""
from __future__ import annotations

import argparse
import random
import string
import sys
import time
from typing import Any, Sequence

import trio

from pybroker.client.producer import Producer, RecordMetadata
from pybroker.tools.client_config import idempotence, producer_options
from pybroker.tools.common import (
    INTERRUPTED, ArgumentParser, ClientProperties, ToolError, UsageError, connect, err,
    load_properties, out, parse_key_values, require, stop_on_signals, tool_main,
)

PROG = "kafka-producer-perf-test"
REPORTING_INTERVAL_MS = 5000
MAX_SAMPLES = 500000


def build_parser() -> ArgumentParser:
    p = ArgumentParser(PROG, "This tool is used to verify the producer performance.")
    p.add_argument("--bootstrap-server", help="The server(s) to connect to (or set "
                   "bootstrap.servers in --producer-props / --producer.config).")
    p.add_argument("--topic", help="REQUIRED: produce messages to this topic")
    p.add_argument("--num-records", type=int, help="REQUIRED: number of messages to produce")
    p.add_argument("--record-size", type=int, help="message size in bytes. Note that you must "
                   "provide exactly one of --record-size or --payload-file or "
                   "--payload-monotonic.")
    p.add_argument("--payload-file", help="file to read the message payloads from.")
    p.add_argument("--payload-delimiter", default="\\n", help="provides delimiter to be used "
                   "when --payload-file is provided (default: \\n)")
    p.add_argument("--payload-monotonic", action="store_true", help="payload is monotonically "
                   "increasing integer.")
    p.add_argument("--throughput", type=float, help="REQUIRED: throttle maximum message "
                   "throughput to *approximately* THROUGHPUT messages/sec. Set this to -1 to "
                   "disable throttling.")
    p.add_argument("--producer-props", "--command-property", nargs="+", action="extend",
                   dest="producer_props", metavar="PROP-NAME=PROP-VALUE",
                   help="kafka producer related configuration properties like "
                   "bootstrap.servers,client.id etc.")
    p.add_argument("--producer.config", "--command-config", dest="producer_config",
                   help="producer config properties file.")
    p.add_argument("--print-metrics", action="store_true", help="print out metrics at the end "
                   "of the test (not collected by this client; ignored).")
    p.add_argument("--transactional-id", help=argparse.SUPPRESS)
    p.add_argument("--transaction-duration-ms", type=int, help=argparse.SUPPRESS)
    p.add_argument("--warmup-records", type=int, default=0, help=argparse.SUPPRESS)
    return p


class Stats:
    """Kafka's ProducerPerformance.Stats: windows of 5 s and sampled latencies."""

    def __init__(self, num_records: int, interval_ms: int | None = None) -> None:
        self.start = time.monotonic()
        self.window_start = self.start
        self.sampling = max(1, num_records // min(max(num_records, 1), MAX_SAMPLES))
        self.latencies: list[int] = []
        self.interval = (REPORTING_INTERVAL_MS if interval_ms is None else interval_ms) / 1000
        self.count = self.bytes = self.total_latency = self.max_latency = 0
        self.window_count = self.window_bytes = self.window_total = self.window_max = 0
        self.iteration = 0
        self.errors = 0

    def record(self, latency_ms: int, size: int, now: float) -> None:
        self.count += 1
        self.bytes += size
        self.total_latency += latency_ms
        self.max_latency = max(self.max_latency, latency_ms)
        self.window_count += 1
        self.window_bytes += size
        self.window_total += latency_ms
        self.window_max = max(self.window_max, latency_ms)
        if self.iteration % self.sampling == 0 and len(self.latencies) < MAX_SAMPLES:
            self.latencies.append(latency_ms)
        self.iteration += 1
        if now - self.window_start >= self.interval:
            self.print_window(now)
            self.window_start = now
            self.window_count = self.window_bytes = self.window_total = self.window_max = 0

    def print_window(self, now: float) -> None:
        elapsed = max(now - self.window_start, 1e-9)
        out(f"{self.window_count} records sent, {self.window_count / elapsed:.1f} records/sec "
            f"({self.window_bytes / elapsed / (1024 * 1024):.2f} MB/sec), "
            f"{self.window_total / max(self.window_count, 1):.1f} ms avg latency, "
            f"{float(self.window_max):.1f} ms max latency.")
        sys.stdout.flush()

    def print_total(self) -> None:
        elapsed = max(time.monotonic() - self.start, 1e-9)
        latencies = sorted(self.latencies)

        def pct(q: float) -> int:
            return latencies[min(int(q * len(latencies)), len(latencies) - 1)] if latencies \
                else 0

        avg = self.total_latency / self.count if self.count else 0.0
        out(f"{self.count} records sent, {self.count / elapsed:f} records/sec "
            f"({self.bytes / elapsed / (1024 * 1024):.2f} MB/sec), {avg:.2f} ms avg latency, "
            f"{float(self.max_latency):.2f} ms max latency, {pct(0.5)} ms 50th, "
            f"{pct(0.95)} ms 95th, {pct(0.99)} ms 99th, {pct(0.999)} ms 99.9th.")


def payloads(args: argparse.Namespace) -> list[bytes]:
    chosen = [args.record_size is not None, args.payload_file is not None,
              args.payload_monotonic]
    if sum(chosen) != 1:
        raise UsageError("Either --record-size or --payload-file or --payload-monotonic must "
                         "be specified but not both.")
    if args.record_size is not None:
        if args.record_size < 0:
            raise UsageError("--record-size must be a non-negative number of bytes")
        rng = random.Random()
        return [bytes(rng.choice(string.ascii_uppercase.encode())
                      for _ in range(args.record_size))]
    if args.payload_file is not None:
        delimiter = args.payload_delimiter.encode().decode("unicode_escape").encode()
        try:
            with open(args.payload_file, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise ToolError(f"Cannot read {args.payload_file}: {exc.strerror or exc}") from None
        items = [p for p in data.split(delimiter) if p]
        if not items:
            raise ToolError(f"File is empty: {args.payload_file}")
        out(f"Reading payloads from: {args.payload_file}")
        out(f"Number of messages read: {len(items)}")
        return items
    return []


async def _main(args: argparse.Namespace) -> int:
    if args.transactional_id:
        raise ToolError("Transactions are not supported: pybroker has no transaction "
                        "coordinator", plain=True)
    props = load_properties(args.producer_config) if args.producer_config else ClientProperties()
    props.update(parse_key_values(args.producer_props, "producer property"))
    options: dict[str, Any] = {"linger_ms": 5}
    options.update(producer_options(props))
    options["enable_idempotence"] = idempotence(props, options.get("acks", -1))
    pool = payloads(args)
    rng = random.Random()
    stats = Stats(args.num_records)
    stopped = [False]
    target = args.throughput
    async with connect(args.bootstrap_server, props,
                       default_client_id="perf-producer-client") as client:
        async with Producer(client, **options) as producer:
            await producer.partitions_for(args.topic)
            with trio.CancelScope() as sending:
                await client.nursery.start(stop_on_signals, sending, stopped)
                start = time.monotonic()
                for i in range(args.num_records):
                    payload = (str(i).encode() if args.payload_monotonic
                               else pool[0] if len(pool) == 1 else rng.choice(pool))
                    sent_at = time.monotonic()

                    def done(meta: RecordMetadata | None, error: BaseException | None,
                             sent_at: float = sent_at, size: int = len(payload)) -> None:
                        now = time.monotonic()
                        if error is not None:
                            stats.errors += 1
                            return
                        stats.record(int((now - sent_at) * 1000), size, now)

                    await producer.send(args.topic, payload, callback=done)
                    if target is not None and target > 0:
                        ahead = (i + 1) / target - (time.monotonic() - start)
                        if ahead > 0:
                            await trio.sleep(ahead)
                    elif i % 64 == 63:
                        await trio.sleep(0)
    stats.print_total()
    if stats.errors:
        err(f"{stats.errors} records failed")
        return 1
    return INTERRUPTED if stopped[0] else 0


def check_args(args: argparse.Namespace) -> None:
    """`--topic ''` counts as given, as in Kafka's argparse4j (the broker then refuses the
    topic), where `require` would call an empty value missing."""
    if args.topic is None:
        require(args, "topic")
    require(args, "num_records", "throughput")


def main(argv: Sequence[str] | None = None) -> int:
    return tool_main(build_parser(), argv, _main, check=check_args)


if __name__ == "__main__":
    sys.exit(main())
