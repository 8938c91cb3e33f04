"""The ecosystem rows of the matrix (issue #14): Kafka's tools, Streams, Connect, MirrorMaker 2,
Quix Streams and faust, each PASS or FAIL by running the test that already checks it.

Each row names the pytest tests whose checks it is (in `tests/compat/` and
`tests/reference/`), and the matrix runs exactly those tests in one pytest process, reading
each test's outcome from a JUnit XML report. The test modules stay the one place where the
checks, and the brokers they run against, are written: a row cannot drift from its test,
and the default test run still runs each suite once (the matrix test only checks the
rendered rows against `compat/matrix.json`). A row PASSes when every one of its tests passed;
otherwise the first failure's message is its reason.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Row:
    title: str
    module: str            # a test module's dotted name
    tests: tuple[str, ...]  # its test functions; empty: all of the module
    jvm: bool              # one or more JVMs (Apache Kafka's jars): the slow rows

    def node_ids(self) -> list[str]:
        path = self.module.replace(".", "/") + ".py"
        return [f"{path}::{t}" for t in self.tests] or [path]


STREAMS, CONNECT = "tests.compat.test_streams", "tests.compat.test_connect"
PYTHON_STREAMS = "tests.compat.test_python_streams"

ROWS: dict[str, Row] = {
    "kafka-tools": Row("Apache Kafka's command-line tools (topics, console producer/consumer, "
                       "consumer-groups, configs, get-offsets, delete-records, perf tests, "
                       "log-dirs, acls, transactions, leader election, reassignment, the README "
                       "quickstart)", "tests.reference.test_kafka_tools", (), True),
    "streams-alos": Row("Kafka Streams WordCount, at_least_once, with its own changelog and "
                        "repartition topics", STREAMS,
                        ("test_wordcount_at_least_once_with_its_own_internal_topics",), True),
    "streams-eos-restart": Row("Kafka Streams WordCount, exactly_once_v2, killed midway and "
                               "restored from its changelog", STREAMS,
                               ("test_wordcount_exactly_once_v2_resumes_after_a_kill",), True),
    "connect-standalone": Row("Kafka Connect standalone: FileStreamSource → topic → "
                              "FileStreamSink, as in Kafka's quickstart", CONNECT,
                              ("test_standalone_file_source_to_file_sink",), True),
    "connect-distributed": Row("Kafka Connect distributed: internal topics, REST connector, "
                               "worker restarted without loss", CONNECT,
                               ("test_distributed_worker_rest_connector_and_restart",), True),
    "mirror-maker-2": Row("MirrorMaker 2 from broker A to broker B: topic, configs, records, "
                          "checkpoints, heartbeats, a group moved and resumed",
                          "tests.compat.test_mirror_maker",
                          ("test_a_topic_and_a_group_mirrored_from_a_to_b",), True),
    "quix-streams": Row("Quix Streams stateful count, restarted without local state",
                        PYTHON_STREAMS,
                        ("test_quix_streams_count_recovers_from_its_changelog",), False),
    "faust-table": Row("faust-streaming agent with a table, restarted without local state",
                       PYTHON_STREAMS, ("test_faust_table_recovers_from_its_changelog",), False),
}


def select(mode: str) -> list[str]:
    """The rows of a `--ecosystem` mode: all, python (no JVM rows) or none."""
    if mode == "all":
        return list(ROWS)
    if mode == "python":
        return [name for name, row in ROWS.items() if not row.jvm]
    if mode == "none":
        return []
    raise ValueError(f"ecosystem mode {mode!r}: all, python or none")


def run_rows(names: list[str], *, timeout: float = 1800,
             progress: Callable[[str], None] | None = None) -> dict[str, dict]:
    """Run the rows' tests in one pytest process (each test module's broker fixtures set up
    once for the rows that share it); each row's result dict (status, reason, seconds, tests)."""
    unknown = [n for n in names if n not in ROWS]
    if unknown:
        raise SystemExit(f"unknown ecosystem row: {', '.join(unknown)} "
                         f"(rows: {', '.join(ROWS)})")
    if not names:
        return {}
    node_ids = [node for n in names for node in ROWS[n].node_ids()]
    with tempfile.TemporaryDirectory(prefix="compat-ecosystem-") as tmp:
        report = Path(tmp) / "report.xml"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   f"--junitxml={report}", "-o", "junit_family=xunit2", *node_ids]
        if progress:
            progress(f"ecosystem: {' '.join(command[3:])}")
        try:
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                                  timeout=timeout)
            output = done.stdout + done.stderr
        except subprocess.TimeoutExpired:
            output = f"pytest timed out after {timeout:.0f} s"
        outcomes = parse_junit(report) if report.exists() else {}
    results = {}
    for name in names:
        results[name] = judge(ROWS[name], outcomes, output)
        if progress:
            r = results[name]
            progress(f"{r['status']:<4}  {name:<22} {r['seconds']:6.1f} s  {r.get('reason') or ''}")
    return results


def parse_junit(report: Path) -> dict[tuple[str, str], tuple[str, str | None, float]]:
    """(module, test) -> (passed/failed/skipped, the failure's first line, seconds).
    A test with parameters counts under its function's name, failing if any case fails."""
    outcomes: dict[tuple[str, str], tuple[str, str | None, float]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        key = (case.get("classname", ""), case.get("name", "").split("[", 1)[0])
        seconds = float(case.get("time") or 0)
        outcome, message = "passed", None
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
                message = (child.get("message") or child.text or child.tag).strip()
                break
            if child.tag == "skipped":
                outcome, message = "skipped", (child.get("message") or "skipped").strip()
        before = outcomes.get(key)
        if before is not None:
            if before[0] == "failed":
                outcome, message = before[0], before[1]
            seconds += before[2]
        outcomes[key] = (outcome, message, seconds)
    return outcomes


def judge(row: Row, outcomes: dict[tuple[str, str], tuple[str, str | None, float]],
          output: str) -> dict:
    """PASS when each of the row's tests ran and passed; a skip is a FAIL too (bin/test
    installs everything these tests need, so a skip means something is missing)."""
    mine = {test: result for (module, test), result in outcomes.items() if module == row.module
            and (not row.tests or test in row.tests)}
    seconds = round(sum(r[2] for r in mine.values()), 1)
    missing = [t for t in row.tests if t not in mine]
    if not mine or missing:
        tail = [line for line in output.splitlines() if line.strip()]
        reason = f"not run ({', '.join(missing) or row.module}): " \
                 f"{tail[-1] if tail else '(no output)'}"
        return {"status": "FAIL", "reason": reason[:240], "seconds": seconds, "tests": 0}
    for test, (outcome, message, _) in mine.items():
        if outcome != "passed":
            first = (message or outcome).splitlines()[0]
            return {"status": "FAIL", "reason": f"{test}: {outcome}: {first}"[:240],
                    "seconds": seconds, "tests": len(mine)}
    return {"status": "PASS", "reason": None, "seconds": seconds, "tests": len(mine)}
