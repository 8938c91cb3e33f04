"""The performance regression guard (issue #6 item 4): a short peer_bench run, as ratios.

Three short rounds against pybroker and the peer (Tansu): 1 KB records to one partition,
produced (acks=1) and consumed, and 100 B records likewise for the broker CPU per record.
Four figures, each a ratio where higher is better for pybroker:

    produce 1 KB MB/s      pybroker / peer
    consume 1 KB MB/s      pybroker / peer
    produce 100 B CPU/rec  peer / pybroker
    consume 100 B CPU/rec  peer / pybroker

And one ratio against Apache Kafka (issue #15 §3), in two short rounds of its own (each broker
first once) so that it costs a JVM start and a few seconds of load (11 to 14 s on this 2-core
machine at a load average of 2 to 2.7):

    produce 1 KB MB/s      pybroker / Apache Kafka

Kafka's JIT has had no time to warm up in so short a run, so the figure flatters pybroker; it
guards against a collapse of pybroker's produce path, not Kafka's best figure (that is
tests/bench/KAFKA_FIGURES.md's job).

tests/test_perf_guard.py runs it in the default test run (well under a minute) and fails only
on a collapse: a figure below half of the one committed in guard_figures.json. Ratios, not
absolute times, because both brokers share the machine's noise; and half, because a timed test
must not flake. Refresh the committed figures on a quiet machine after a deliberate change:

    .venv/bin/python tests/bench/guard.py --write
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.bench.peer_bench import Plan, Results, measure, throughput_metrics  # noqa: E402

FIGURES = Path(__file__).with_name("guard_figures.json")
COLLAPSE = 0.5  # fail below this fraction of the committed figure
PLAN = Plan(rounds=3, workloads=("throughput",), sizes=(1024, 100), partitions=(1,),
            acks=("1",), counts={1024: 200_000, 100: 1_000_000}, idle_rss=False)
KAFKA_PLAN = Plan(rounds=2, workloads=("throughput",), sizes=(1024,), partitions=(1,),
                  acks=("1",), counts={1024: 200_000}, consume=False, idle_rss=False)
KAFKA_FIGURE = "produce 1 KB: MB/s, pybroker / Apache Kafka"


def figures(results: Results) -> dict[str, float]:
    """The guard's four ratios from a run of PLAN (higher is better for pybroker)."""
    out: dict[str, float] = {}
    for size, key in ((1024, "mb_s"), (100, "cpu")):
        for side, acks in (("produce", "1"), ("consume", None)):
            metric = throughput_metrics(size, 1, acks)[key]
            ratio = results.ratio(metric)
            if ratio is None:
                raise RuntimeError(f"no figure for {metric.section} {metric.name}")
            if key == "cpu":
                out[f"{side} 100 B: broker CPU per record, peer / pybroker"] = 1 / ratio
            else:
                out[f"{side} 1 KB: MB/s, pybroker / peer"] = ratio
    return out


def kafka_figures(results: Results) -> dict[str, float]:
    """The guard's ratio against Apache Kafka from a run of KAFKA_PLAN."""
    metric = throughput_metrics(1024, 1, "1")["mb_s"]
    ratio = results.ratio(metric, "kafka")
    if ratio is None:
        raise RuntimeError(f"no figure for {metric.section} {metric.name} against Kafka")
    return {KAFKA_FIGURE: ratio}


def committed() -> dict[str, float]:
    return json.loads(FIGURES.read_text())["figures"]


def compare(current: dict[str, float], reference: dict[str, float]) -> tuple[list[str], list[str]]:
    """(report lines, collapses): every figure against its committed value."""
    lines, collapses = [], []
    for name, value in current.items():
        ref = reference.get(name)
        if ref is None:
            lines.append(f"  {name}: {value:.2f} (no committed figure)")
            continue
        floor = ref * COLLAPSE
        verdict = "ok" if value >= floor else "COLLAPSED"
        lines.append(f"  {name}: {value:.2f} (committed {ref:.2f}, fails below {floor:.2f}): "
                     f"{verdict}")
        if value < floor:
            collapses.append(name)
    return lines, collapses


def run() -> dict[str, float]:
    return figures(measure(PLAN))


def run_kafka() -> dict[str, float]:
    """ApacheKafkaUnavailable (as PeerUnavailable) when Java or Maven is missing."""
    return kafka_figures(measure(KAFKA_PLAN, peers=("kafka",)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true",
                        help=f"store the measured figures in {FIGURES.name}")
    args = parser.parse_args()
    t0 = time.perf_counter()
    current = {**run(), **run_kafka()}
    lines, collapses = compare(current, committed() if FIGURES.exists() else {})
    print(f"perf guard ({time.perf_counter() - t0:.0f} s):")
    print("\n".join(lines))
    if args.write:
        FIGURES.write_text(json.dumps({
            "note": "Ratios from `tests/bench/guard.py --write` on a 2-core machine; higher "
                    "is better for pybroker. tests/test_perf_guard.py fails below half of "
                    "these.",
            "measured": time.strftime("%Y-%m-%d"),
            "figures": {k: round(v, 3) for k, v in current.items()},
        }, indent=2) + "\n")
        print(f"written to {FIGURES}")
    return 1 if collapses and not args.write else 0


if __name__ == "__main__":
    sys.exit(main())
