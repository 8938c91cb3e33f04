"""Client scenarios on both brokers (issue #33 item 3): the consumer group protocol's matrix
scenarios (compat/consumer_scenarios.py) run by stock clients against Apache Kafka and against
pybroker, each cell in a worker process of its own (`compat.run.run_cell`, killed at the
scenario's timeout), and the two outcomes compared.

Where the corpus compares answers field by field, this compares what a client lives through:
a scenario passes, fails (with the first assertion that did not hold) or is not applicable
(the client cannot do it). A cell is "identical" when both brokers give the same status (and,
for N/A, the same reason); a difference is "deliberate" only with an entry in `EXPLAINED`,
else "differs". `EXPLAINED` also says why a cell is N/A on both: the report must not leave a
hole unexplained.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

CLIENTS = ("franz-go", "confluent-kafka", "java kafka-clients")
SCENARIO_PREFIX = "consumer-"

# (client, scenario) -> why the cell is not a plain PASS on both brokers.
EXPLAINED: dict[tuple[str, str], str] = {
    ("franz-go", "consumer-static"):
        "N/A on both: kgo v1.22.3 (the newest the Go module proxy serves) leaves as a static "
        "member with MemberEpoch -2 and no InstanceId; both brokers answer INVALID_REQUEST "
        "\"InstanceId can't be null.\", so the member stays and a restart is refused "
        "(UNRELEASED_INSTANCE_ID) until its session expires",
}


def scenario_ids() -> list[str]:
    from compat.all_scenarios import SCENARIOS
    return [s for s in SCENARIOS if s.startswith(SCENARIO_PREFIX)]


def _outcome(cell: dict[str, Any]) -> dict[str, Any]:
    return {"status": cell["status"], "reason": cell.get("reason"), "note": cell.get("note"),
            "seconds": cell.get("seconds")}


def compare(client: str, scenario: str, kafka: dict[str, Any],
            pybroker: dict[str, Any]) -> dict[str, Any]:
    same = kafka["status"] == pybroker["status"] and (
        kafka["status"] != "N/A" or kafka["reason"] == pybroker["reason"])
    why = EXPLAINED.get((client, scenario))
    status = "identical" if same else "deliberate" if why else "differs"
    return {"client": client, "scenario": scenario, "status": status, "explained": why,
            "kafka": kafka, "pybroker": pybroker}


def run_scenarios(kafka_bootstrap: str, pybroker_bootstrap: str, *,
                  jobs: int = 2) -> list[dict[str, Any]]:
    """Every (client, scenario) cell on both brokers; `jobs` cells at a time on each."""
    from compat.clients import all_adapters
    from compat.run import run_cell
    from compat.all_scenarios import SCENARIOS

    adapters = all_adapters()
    for client in CLIENTS:
        adapters[client].prepare()  # builds (go, mvn) once, not in every cell
    cells = [(c, s) for s in scenario_ids() for c in CLIENTS]

    def both(cell: tuple[str, str]) -> dict[str, Any]:
        client, scenario = cell
        timeout = SCENARIOS[scenario].timeout
        with ThreadPoolExecutor(2) as pair:
            on_kafka = pair.submit(run_cell, client, scenario, kafka_bootstrap, timeout)
            on_pybroker = pair.submit(run_cell, client, scenario, pybroker_bootstrap, timeout)
            return compare(client, scenario, _outcome(on_kafka.result()),
                           _outcome(on_pybroker.result()))

    with ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(both, cells))


def counts(results: list[dict[str, Any]]) -> dict[str, int]:
    out = {"identical": 0, "deliberate": 0, "differs": 0}
    for r in results:
        out[r["status"]] += 1
    return out


def _cell(outcome: dict[str, Any]) -> str:
    return outcome["status"]


def markdown(results: list[dict[str, Any]], kafka_version: str) -> list[str]:
    """The report's section on client scenarios."""
    if not results:
        return []
    c = counts(results)
    scenarios = list(dict.fromkeys(r["scenario"] for r in results))
    clients = list(dict.fromkeys(r["client"] for r in results))
    by_cell = {(r["client"], r["scenario"]): r for r in results}
    lines = [
        "## Client scenarios: the consumer group protocol (KIP-848)", "",
        f"The matrix's consumer-protocol scenarios (`compat/consumer_scenarios.py`) run by "
        f"each client with `group.protocol=consumer` against Apache Kafka {kafka_version} and "
        "against pybroker, side by side (`compat/differential/clients.py`). Each cell reads "
        "Kafka / pybroker.", "",
        f"**{len(results)} cells: {c['identical']} identical, {c['deliberate']} deliberately "
        f"different, {c['differs']} different and not yet explained.**", "",
        "| Scenario | " + " | ".join(clients) + " |",
        "|---|" + "---|" * len(clients),
    ]
    for s in scenarios:
        row = []
        for client in clients:
            r = by_cell.get((client, s))
            row.append("" if r is None else f"{_cell(r['kafka'])} / {_cell(r['pybroker'])}")
        lines.append(f"| {s} | " + " | ".join(row) + " |")
    lines.append("")
    for r in results:
        k, p = r["kafka"], r["pybroker"]
        if r["status"] == "identical" and k["status"] == "PASS" and not r["explained"]:
            continue
        lines.append(f"- **{r['client']}, {r['scenario']}** ({r['status']})")
        if r["explained"]:
            lines.append(f"  - {r['explained']}")
        if r["explained"] and r["status"] == "identical" and k["status"] == "N/A":
            continue  # the explanation says it; the two reasons are the same
        for name, o in (("Kafka", k), ("pybroker", p)):
            if o["status"] != "PASS":
                lines.append(f"  - {name}: {o['status']}: `{o['reason']}`")
    notes = sorted({o["note"] for r in results for o in (r["kafka"], r["pybroker"])
                    if o.get("note")})
    if notes:
        lines += ["", "Notes the scenarios gave (on both brokers):", ""]
        lines += [f"- {n}" for n in notes]
    lines.append("")
    return lines
