"""Run the compatibility matrix: every client through every scenario, against one broker.

    python -m compat.run [--write] [--clients C ...] [--scenarios S ...] [--jobs N] [--logs DIR]
                         [--ecosystem all|python|none] [--only-ecosystem]

One broker is started in this process (in a thread, on an ephemeral port, in a temporary log
directory; the share-restart cells, which kill a broker -9, start one of their own). Each
(client, scenario) cell runs in its own worker process (`compat.worker`) and is killed at the
scenario's timeout; cells run `--jobs` at a time (each uses its own topics and groups). A
cell ends PASS, FAIL (with a one-line reason) or N/A (the client cannot express the scenario,
with the reason). The matrix is printed; with `--write` it is also stored in
`compat/MATRIX.md` and `compat/matrix.json` (a partial run updates only the cells it ran).
The ecosystem rows (Kafka's tools, Streams, Connect, MirrorMaker 2, Quix Streams, faust:
`compat/ecosystem.py`) run after the cells, by running the tests that check them; they take
minutes (a JVM or two each), so `--ecosystem python` keeps only the rows without a JVM and
`--ecosystem none` skips them (the default when `--clients` or `--scenarios` narrows the run).
Exit status: 0 when no cell or row failed, 1 otherwise.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from compat import ecosystem
from compat.clients import all_adapters
from compat.all_scenarios import SCENARIOS
from compat.worker import MARKER

COMPAT = Path(__file__).resolve().parent
ROOT = COMPAT.parent
MATRIX_MD = COMPAT / "MATRIX.md"
MATRIX_JSON = COMPAT / "matrix.json"
STATUSES = ("PASS", "FAIL", "N/A")


# -- running -----------------------------------------------------------------------------------

def run_cell(client: str, scenario: str, bootstrap: str, timeout: float,
             log_dir: Path | None = None) -> dict:
    """One cell in a worker process; its result dict (status, reason, note, seconds)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "compat.worker", client, scenario, bootstrap],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        result = None
        for line in out.decode(errors="replace").splitlines():
            if line.startswith(MARKER):
                result = json.loads(line[len(MARKER):])
        if result is None:
            tail = [x for x in out.decode(errors="replace").splitlines() if x.strip()]
            result = {"status": "FAIL", "note": None,
                      "reason": f"worker exited {proc.returncode} without a result: "
                                f"{tail[-1] if tail else '(no output)'}"[:240]}
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the worker and whatever it started (kcat, tools)
        out, _ = proc.communicate()
        result = {"status": "FAIL", "note": None, "reason": f"timed out after {timeout:.0f} s"}
    finally:
        try:  # members and tools the worker started and left behind
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    result["seconds"] = round(time.monotonic() - started, 2)
    if log_dir is not None:
        name = f"{client.replace(' ', '_')}--{scenario}.log"
        (log_dir / name).write_bytes(out or b"")
    return result


def run_matrix(clients: list[str] | None = None, scenarios: list[str] | None = None, *,
               jobs: int = 4, log_dir: Path | None = None,
               progress: Callable[[str], None] | None = None) -> dict:
    """Start a broker, run the cells, return the matrix as a dict (the matrix.json shape).
    The broker is a process of the test kit (pybroker.testing.Broker(process=True)): one
    broker, or with PYBROKER_NUM_CORES=2 a node of two, which the clients must see as the
    cluster of two brokers it is (issue #29 item 3)."""
    from compat.differential.config import SHARE_GROUPS
    from pybroker.testing import Broker

    adapters = all_adapters()
    clients = list(adapters) if clients is None else [_client_name(c) for c in clients]
    scenarios = list(SCENARIOS) if scenarios is None else scenarios
    unknown = [c for c in clients if c not in adapters] + \
        [s for s in scenarios if s not in SCENARIOS]
    if unknown:
        raise SystemExit(f"unknown client or scenario: {', '.join(unknown)} (clients: "
                         f"{', '.join(adapters)}; scenarios: {', '.join(SCENARIOS)})")
    for c in clients:
        try:
            adapters[c].prepare()
        except Exception as exc:  # noqa: BLE001 - its cells fail with the reason
            if progress:
                progress(f"{c}: not prepared: {exc}")
    # The slow scenarios first, so that they do not finish the run alone.
    cells = sorted(((c, s) for s in scenarios for c in clients),
                   key=lambda cs: -SCENARIOS[cs[1]].timeout)
    started = time.monotonic()
    results: dict[str, dict[str, dict]] = {c: {} for c in clients}
    # The share rows' settings (short record locks, a delivery limit of 3) touch share groups
    # alone: compat/share_group_scenarios.py. Kafka's dotted keys cannot spell the Broker's
    # keywords (keep, log_dir, log_lines), but mypy holds a dict's str values against their types.
    with tempfile.TemporaryDirectory(prefix="compat-broker-") as tmp, \
            Broker(process=True, log_dir=Path(tmp) / "logs",
                   **SHARE_GROUPS) as broker:  # type: ignore[arg-type]
        def one(cell: tuple[str, str]) -> None:
            client, scenario = cell
            result = run_cell(client, scenario, broker.bootstrap, SCENARIOS[scenario].timeout,
                              log_dir)
            results[client][scenario] = result
            if progress:
                why = result.get("reason") or result.get("note") or ""
                progress(f"{result['status']:<4}  {client:<16} {scenario:<16} "
                         f"{result['seconds']:6.1f} s  {why}")

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            list(pool.map(one, cells))
    versions = {}
    for c in clients:
        try:
            versions[c] = adapters[c].versions()
        except Exception as exc:  # noqa: BLE001 - a missing client still gets its row
            versions[c] = {c: f"unavailable ({exc.__class__.__name__})"}
    return {
        "generated": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "broker_commit": broker_commit(),
        "python": platform.python_version(),
        "runtime_seconds": round(time.monotonic() - started, 1),
        "jobs": jobs,
        "clients": {c: {"versions": versions[c]} for c in clients},
        "scenarios": {s: SCENARIOS[s].title for s in scenarios},
        "results": {c: {s: results[c][s] for s in scenarios} for c in clients},
    }


def _client_name(name: str) -> str:
    """A column name, also from its module's name (kafka_python, pybroker_tools, ...)."""
    for adapter in all_adapters().values():
        if name in (adapter.name, type(adapter).__module__.rsplit(".", 1)[-1]):
            return adapter.name
    return name


def broker_commit() -> str:
    """HEAD's commit, read from .git without running git; "unknown" if there is none."""
    git = ROOT / ".git"
    try:
        if git.is_file():  # a worktree: "gitdir: <path>"
            git = Path(git.read_text().split(":", 1)[1].strip())
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head
        ref = head.split(":", 1)[1].strip()
        if (git / "commondir").is_file():  # a worktree's branches live in the main .git
            git = (git / (git / "commondir").read_text().strip()).resolve()
        if (git / ref).exists():
            return (git / ref).read_text().strip()
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0]
    except (OSError, IndexError):
        pass
    return "unknown"


# -- merging and rendering ---------------------------------------------------------------------

def load_committed() -> dict | None:
    try:
        return json.loads(MATRIX_JSON.read_text())
    except (OSError, ValueError):
        return None


def merge(old: dict | None, new: dict) -> dict:
    """`new` with the cells (and clients, scenarios) of `old` that it did not run."""
    if not old:
        return new
    merged = dict(new)
    rows = {**old.get("ecosystem", {}), **new.get("ecosystem", {})}
    if rows:
        merged["ecosystem"] = {r: rows[r] for r in ecosystem.ROWS if r in rows}
    adapters = all_adapters()  # what no longer exists (a renamed column) is dropped
    clients = [c for c in dict.fromkeys([*old.get("clients", {}), *new["clients"]])
               if c in adapters]
    scenarios = [s for s in dict.fromkeys([*old.get("scenarios", {}), *new["scenarios"]])
                 if s in SCENARIOS]
    clients.sort(key=list(adapters).index)
    scenarios.sort(key=list(SCENARIOS).index)
    merged["clients"] = {c: new["clients"].get(c) or old["clients"][c] for c in clients}
    merged["scenarios"] = {s: new["scenarios"].get(s) or old["scenarios"][s] for s in scenarios}
    merged["results"] = {}
    for c in clients:
        row = {**old.get("results", {}).get(c, {}), **new["results"].get(c, {})}
        merged["results"][c] = {s: row[s] for s in scenarios if s in row}
    if not new["results"]:  # only ecosystem rows ran: the cells' run is the old one
        merged["runtime_seconds"], merged["jobs"] = old.get("runtime_seconds"), old.get("jobs")
    elif set(new["results"]) != set(clients) or set(new["scenarios"]) != set(scenarios):
        merged["runtime_seconds"] = None  # a partial run's time says nothing of the whole
    return merged


def render_text(matrix: dict) -> str:
    clients = list(matrix["clients"])
    width = max((len(s) for s in [*matrix["scenarios"], *matrix.get("ecosystem", {})]),
                default=0) + 2
    lines = ["".ljust(width) + "".join(c[:15].ljust(17) for c in clients)]
    for s in matrix["scenarios"]:
        cells = [matrix["results"][c].get(s, {}).get("status", "-") for c in clients]
        lines.append(s.ljust(width) + "".join(x.ljust(17) for x in cells))
    for name, r in matrix.get("ecosystem", {}).items():
        lines.append(f"{name.ljust(width)}{r['status']:<5} {r['seconds']:7.1f} s  "
                     f"{r.get('reason') or ''}")
    return "\n".join(lines)


def render_markdown(matrix: dict) -> str:
    clients = list(matrix["clients"])
    notes: list[str] = []

    def mark(text: str) -> str:
        if text not in notes:
            notes.append(text)
        return f"[{notes.index(text) + 1}]"

    rows = []
    for s, title in matrix["scenarios"].items():
        cells = []
        for c in clients:
            r = matrix["results"].get(c, {}).get(s)
            if r is None:
                cells.append("–")
                continue
            cell = {"PASS": "PASS", "FAIL": "**FAIL**", "N/A": "N/A"}[r["status"]]
            text = r.get("reason") if r["status"] != "PASS" else r.get("note")
            if text:
                cell += " " + mark(f"{c}, {s}: {text}" if r["status"] == "FAIL" else text)
            cells.append(cell)
        rows.append(f"| `{s}` | " + " | ".join(cells) + " |")
    counts = {st: sum(1 for c in clients for r in matrix["results"].get(c, {}).values()
                      if r["status"] == st) for st in STATUSES}
    rows_run = matrix.get("ecosystem", {})
    runtime = matrix.get("runtime_seconds")
    out = [
        "# Compatibility matrix",
        "",
        "The same scenarios through every client, against one pybroker broker. Generated by "
        "`python -m compat.run --write` (see `compat/run.py`); "
        "`tests/compat/test_matrix.py` fails when a cell marked PASS here stops passing.",
        "",
        f"- Generated: {matrix['generated']}",
        f"- Broker commit: `{matrix['broker_commit']}` (the tree the matrix was run on; "
        "uncommitted changes, if any, are not recorded)",
        f"- Python {matrix['python']}; "
        + (f"whole run {runtime} s with {matrix.get('jobs', '?')} cells at a time"
           if runtime is not None else "merged from partial runs"),
        f"- {counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['N/A']} N/A"
        + (f"; ecosystem: {sum(r['status'] == 'PASS' for r in rows_run.values())} of "
           f"{len(rows_run)} rows PASS" if rows_run else ""),
        "",
        "## Clients",
        "",
        "| Client | Version(s) tested |",
        "|---|---|",
    ]
    for c in clients:
        versions = matrix["clients"][c]["versions"]
        out.append(f"| {c} | " + ", ".join(f"{k} {v}" for k, v in versions.items()) + " |")
    out += [
        "",
        "kafka-python, confluent-kafka and aiokafka are pinned in `pyproject.toml` (the `test` "
        "extra); kcat is Debian's package (installed by `bin/test`), which bundles its own "
        "librdkafka; pybroker's tools are this tree's. franz-go and sarama are pinned by "
        "`compat/go/go.mod` and `go.sum` (one Go program, built on first use), kafkajs by "
        "`compat/js/package-lock.json` (`npm ci` on first use); each runs as one process per "
        "matrix run that every cell talks to (`compat/helper_process.py`).",
        "",
        "Apache Kafka's Java client (kafka-clients) is pinned in `compat/java/pom.xml` and driven "
        "by `compat/java/` (built with Maven on first use; one JVM serves the whole run).",
        "",
        "## Matrix",
        "",
        "| Scenario | " + " | ".join(clients) + " |",
        "|---|" + "---|" * len(clients),
        *rows,
        "",
        "PASS: the scenario ran and every check held (a note qualifies it). FAIL: a check failed "
        "or the client raised (the note gives the first line). N/A: the client cannot express "
        "the scenario (the note says why).",
        "",
        *render_ecosystem(rows_run),
        "## Notes",
        "",
    ]
    for i, text in enumerate(notes, 1):
        out.append(f"{i}. {text}")
    out += ["", "## Scenarios", ""]
    for s, title in matrix["scenarios"].items():
        out.append(f"- `{s}` — {title}")
    out += [
        "",
        "Each scenario sets up its topics and records with raw requests (`compat/wire.py`), "
        "drives the client through its adapter (`compat/clients/`), then checks both what the "
        "broker holds (raw Fetch, OffsetFetch, DescribeGroups, ...) and what the client read. "
        "The share rows (`compat/share_group_scenarios.py`) play the differential's share-group "
        "scenarios (`compat/differential/share_scenarios.py`) and expect what the same client "
        "saw on Apache Kafka 4.1.1 (`compat/differential.json`); `share-restart` kills -9 and "
        "restarts a pybroker process of its own.",
        "",
    ]
    return "\n".join(out)


def render_ecosystem(rows: dict[str, dict]) -> list[str]:
    """The Ecosystem section: one row per suite, with what it cost (its tests' time, the
    brokers and JVMs they start included)."""
    if not rows:
        return []
    out = [
        "## Ecosystem",
        "",
        "Whole programs of the Kafka ecosystem against pybroker, each row PASS when the tests "
        "that check it pass (`compat/ecosystem.py` names them; `--ecosystem python` skips the "
        "rows that start JVMs). Time: the row's tests, with their brokers and JVMs, on the "
        "machine that generated this file.",
        "",
        "| Row | What runs | Tests | Result | Time |",
        "|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        row = ecosystem.ROWS.get(name)
        where = "" if row is None else \
            "<br>".join(f"`{node}`" for node in row.node_ids())
        result = "PASS" if r["status"] == "PASS" else f"**FAIL**: {r.get('reason')}"
        out.append(f"| `{name}` | {row.title if row else '?'} | {where} | {result} | "
                   f"{r['seconds']:.0f} s |")
    return out + [""]


def write(matrix: dict) -> None:
    MATRIX_JSON.write_text(json.dumps(matrix, indent=1, sort_keys=False) + "\n")
    MATRIX_MD.write_text(render_markdown(matrix))


def main(argv: list[str] | None = None) -> int:
    import warnings
    warnings.simplefilter("ignore", DeprecationWarning)
    parser = argparse.ArgumentParser(prog="python -m compat.run", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--write", action="store_true",
                        help="store the result in compat/MATRIX.md and compat/matrix.json")
    parser.add_argument("--clients", nargs="+", metavar="CLIENT",
                        help=f"clients to run (default: all): {', '.join(all_adapters())}")
    parser.add_argument("--scenarios", nargs="+", metavar="SCENARIO",
                        help=f"scenarios to run (default: all): {', '.join(SCENARIOS)}")
    parser.add_argument("--jobs", type=int, default=4, help="cells run at a time (default 4)")
    parser.add_argument("--logs", type=Path, help="keep each cell's output in this directory")
    parser.add_argument("--ecosystem", choices=("all", "python", "none"),
                        help="ecosystem rows to run: all, python (no JVM rows) or none "
                             "(default: all for a whole run, none with --clients/--scenarios)")
    parser.add_argument("--only-ecosystem", action="store_true",
                        help="run only the ecosystem rows, not the client cells")
    args = parser.parse_args(argv)
    narrowed = bool(args.clients or args.scenarios)
    rows = ecosystem.select(args.ecosystem or ("none" if narrowed and not args.only_ecosystem
                                               else "all"))
    scenarios = args.scenarios or list(SCENARIOS)
    if args.logs:
        args.logs.mkdir(parents=True, exist_ok=True)
    progress = lambda line: print(line, flush=True)  # noqa: E731
    if args.only_ecosystem:
        matrix = {"generated": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                  "broker_commit": broker_commit(), "python": platform.python_version(),
                  "runtime_seconds": None, "jobs": args.jobs, "clients": {}, "scenarios": {},
                  "results": {}}
    else:
        matrix = run_matrix(args.clients, scenarios, jobs=args.jobs, log_dir=args.logs,
                            progress=progress)
    if rows:
        matrix["ecosystem"] = ecosystem.run_rows(rows, progress=progress)
    print()
    print(render_text(matrix))
    if matrix["runtime_seconds"] is not None:
        print(f"\n{matrix['runtime_seconds']} s")
    if args.write:
        write(merge(load_committed(), matrix))
        print(f"wrote {MATRIX_MD.relative_to(ROOT)} and {MATRIX_JSON.relative_to(ROOT)}")
    failed = any(r["status"] == "FAIL" for row in matrix["results"].values() for r in row.values()) \
        or any(r["status"] == "FAIL" for r in matrix.get("ecosystem", {}).values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
