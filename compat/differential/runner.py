"""Run the corpus against Apache Kafka and pybroker, compare, and write the report.

`run_corpus(kafka_bootstrap, pybroker_bootstrap)` runs every case on both (each case on
Kafka then on pybroker; topics are the case's own, so cases do not disturb each other) and
returns one result per case. `main()` starts both brokers fresh with `config.SHARED`, runs,
and writes `compat/differential.json` and `compat/DIFFERENTIAL.md`.
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from compat.differential import clients
from compat.differential.case import Case, Ctx
from compat.differential.corpus import generic_cases, hand_cases
from compat.differential.deliberate import FIXED, reason_for
from compat.differential.normalise import differences
from compat.differential.sequences import sequence_cases
from compat.differential.target import Target
from protocol.api_keys import ApiKey
from protocol.messages import APIS

COMPAT = Path(__file__).resolve().parents[1]
JSON_PATH = COMPAT / "differential.json"
MD_PATH = COMPAT / "DIFFERENTIAL.md"


def advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    """The API key -> (min, max) versions a broker advertises (ApiVersions v0)."""
    target = Target("probe", bootstrap)
    try:
        answer = target.request(ApiKey.API_VERSIONS, 0, {})
    finally:
        target.close()
    return {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}


def _java_hash(text: str) -> int:
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _keys_on_every_partition(partitions: int) -> list[str]:
    """Group ids that land on each partition of an internal topic (Kafka's
    abs(hashCode) % partitions), so that every partition's loading is waited for."""
    keys: dict[int, str] = {}
    n = 0
    while len(keys) < partitions:
        key = f"dc-warm-up-{n}"
        keys.setdefault(abs(_java_hash(key)) % partitions, key)
        n += 1
    return [""] + list(keys.values())


def warm_up(bootstrap: str, limit: float = 90.0) -> None:
    """Until the broker's group and transaction coordinators answer (unobserved). A fresh
    Kafka creates `__consumer_offsets` and `__transaction_state` on the first
    FindCoordinator for each, then loads their partitions: until then it answers
    COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS, which a client
    retries through; the corpus compares the broker it then sees. Done on both brokers."""
    from compat.differential.config import SHARED
    partitions = int(SHARED["offsets.topic.num.partitions"])
    probes: list[tuple[int, int, dict[str, Any]]] = [
        (ApiKey.FIND_COORDINATOR, 3, {"key": "dc-warm-up", "key_type": kind}) for kind in (0, 1)]
    probes.append((ApiKey.LIST_GROUPS, 4, {"states_filter": []}))
    probes += [(ApiKey.OFFSET_FETCH, 7, {"group_id": g, "topics": None,
                                         "require_stable": False})
               for g in _keys_on_every_partition(partitions)]
    target = Target("warm-up", bootstrap, timeout=5.0)
    deadline = time.monotonic() + limit
    try:
        for api, version, body in probes:
            while True:
                answer = target.request(api, version, body)
                if not isinstance(answer, str) and answer.error_code == 0:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{bootstrap}: not ready after {limit} s: {answer}")
                time.sleep(0.1)
    finally:
        target.close()


def corpus(ours: dict[int, tuple[int, int]],
           theirs: dict[int, tuple[int, int]]) -> tuple[list[Case], list[dict[str, Any]]]:
    """The cases for every API version both serve; results (without running) for the
    versions pybroker serves and Kafka does not."""
    generic: list[Case] = []
    cases: list[Case] = []
    unserved: list[dict[str, Any]] = []
    for api in sorted(ours):
        low, high = ours[api]
        for version in range(low, high + 1):
            kafka = theirs.get(api)
            if kafka is None or not kafka[0] <= version <= kafka[1]:
                unserved.append(_unserved(api, version, kafka))
                continue
            generic.extend(generic_cases(api, version))
            cases.extend(hand_cases(api, version))
    cases.extend(sequence_cases())
    # The generic cases first, while the brokers hold no topics or groups but their own:
    # the ones that list everything (Metadata for all topics, ListGroups) then compare.
    return generic + cases, unserved


def _unserved(api: int, version: int, kafka: tuple[int, int] | None) -> dict[str, Any]:
    case_id = f"{APIS[api].name} v{version} served"
    theirs = "not served" if kafka is None else f"serves {kafka[0]}-{kafka[1]}"
    diff = {"path": "served", "kafka": theirs, "pybroker": "served"}
    return _result(case_id, api, version, [diff])


def _result(case_id: str, api: int, version: int, diffs: list[dict[str, Any]],
            error: str | None = None) -> dict[str, Any]:
    unexplained = []
    for d in diffs:
        reason = reason_for(case_id, d["path"])
        if reason is None:
            unexplained.append(d)
        else:
            d["reason"] = reason
    status = ("error" if error else "identical" if not diffs
              else "differs" if unexplained else "deliberate")
    out: dict[str, Any] = {"id": case_id, "api": APIS[api].name, "version": version,
                           "status": status, "differences": diffs}
    if error:
        out["error"] = error
    return out


def observe(case: Case, target: Target, t0: int) -> tuple[dict[str, Any], str | None]:
    ctx = Ctx(case, target, t0)
    try:
        case.run(ctx)
        return ctx.observed, None
    except Exception:
        return ctx.observed, traceback.format_exc(limit=3).splitlines()[-1]
    finally:
        target.close()


def run_corpus(kafka_bootstrap: str, pybroker_bootstrap: str,
               progress: bool = False) -> list[dict[str, Any]]:
    from compat.differential.share_scenarios import enable_share_groups
    for bootstrap in (kafka_bootstrap, pybroker_bootstrap):
        warm_up(bootstrap)
        # share.version 1 on both (kafka-features.sh upgrade): the share-group APIs are
        # advertised and served then, so the corpus compares them too
        enable_share_groups(bootstrap)
    ours, theirs = advertised(pybroker_bootstrap), advertised(kafka_bootstrap)
    cases, results = corpus(ours, theirs)
    t0 = int(time.time() * 1000) - 60_000

    def observe_all(name: str, bootstrap: str) -> list[tuple[dict[str, Any], str | None]]:
        target = Target(name, bootstrap, timeout=5.0)
        out = []
        for case in cases:
            began = time.monotonic()
            out.append(observe(case, target, t0))
            if progress:
                print(f"{name} {time.monotonic() - began:5.2f}s {case.id}", file=sys.stderr)
        return out
    # The two brokers answer side by side, each its own thread: half the time.
    with ThreadPoolExecutor(2) as pool:
        on_kafka = pool.submit(observe_all, "kafka", kafka_bootstrap)
        on_pybroker = pool.submit(observe_all, "pybroker", pybroker_bootstrap)
        observed = list(zip(cases, on_kafka.result(), on_pybroker.result()))
    for case, (k, k_err), (p, p_err) in observed:
        if case.api == ApiKey.API_VERSIONS:
            k, p = _api_versions(k), _api_versions(p)
        error = f"kafka: {k_err}" if k_err else f"pybroker: {p_err}" if p_err else None
        results.append(_result(case.id, case.api, case.version, differences(k, p), error))
    results.sort(key=lambda r: (list(APIS).index(_key(r["api"])), r["version"], r["id"]))
    return results


def _key(name: str) -> int:
    return next(k for k, a in APIS.items() if a.name == name)


def _api_versions(observed: dict[str, Any]) -> dict[str, Any]:
    """An ApiVersions answer restricted to the APIs pybroker declares: the APIs Kafka has
    and pybroker does not are listed once in the report, not in every ApiVersions case."""
    for answer in observed.values():
        if isinstance(answer, dict) and isinstance(answer.get("api_keys"), list):
            answer["api_keys"] = [k for k in answer["api_keys"] if k["api_key"] in APIS]
    return observed


def counts(results: list[dict[str, Any]]) -> dict[str, int]:
    out = {"identical": 0, "deliberate": 0, "differs": 0, "error": 0}
    for r in results:
        out[r["status"]] += 1
    out["fixed"] = sum(1 for r in results if r["id"] in FIXED and r["status"] == "identical")
    return out


# -- the report ---------------------------------------------------------------------------------

def write(results: list[dict[str, Any]], kafka_version: str,
          kafka_only: list[str], client_scenarios: list[dict[str, Any]],
          share: dict[str, Any] | None = None) -> None:
    data = {"kafka_version": kafka_version, "counts": counts(results),
            "apis_only_kafka_serves": kafka_only, "cases": results,
            "client_scenarios": client_scenarios, "share_scenarios": share or {}}
    JSON_PATH.write_text(json.dumps(data, indent=1, sort_keys=False, default=str) + "\n")
    MD_PATH.write_text(markdown(data))


def _v(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def markdown(data: dict[str, Any]) -> str:
    c = data["counts"]
    lines = [
        "# pybroker beside Apache Kafka: differential conformance",
        "",
        f"Generated by `python -m compat.differential` (do not edit): every case of "
        f"`compat/differential/` sent to Apache Kafka {data['kafka_version']} and to pybroker, "
        "each started fresh with the same settings (`compat/differential/config.py`), the "
        "answers decoded and compared field by field after masking what legitimately differs "
        "(`compat/differential/normalise.py` says what and why). "
        "`tests/reference/test_differential.py` reruns the corpus in the default test run "
        "and fails when an identical case starts to differ or a recorded difference changes.",
        "",
        f"**{len(data['cases'])} cases: {c['identical']} identical (of which {c['fixed']} "
        f"fixed in pybroker), {c['deliberate']} deliberately different, {c['differs']} "
        f"different and not yet explained, {c['error']} that could not run.**",
        "",
        "Both brokers run the corpus with share.version finalized at 1 (as "
        "`kafka-features.sh upgrade --feature share.version=1` does), so the share-group "
        "APIs (KIP-932) are compared with the rest. APIs Apache Kafka serves and pybroker "
        "does not (out of pybroker's scope, not compared): "
        + (", ".join(data["apis_only_kafka_serves"]) or "none") + ".",
        "",
    ]
    lines += clients.markdown(data.get("client_scenarios", []), data["kafka_version"])
    if FIXED:
        lines += ["## Fixed in pybroker", ""]
        lines += [f"- {case_id}: {what}" for case_id, what in FIXED.items()]
        lines.append("")
    by_api: dict[str, list[dict[str, Any]]] = {}
    for r in data["cases"]:
        by_api.setdefault(r["api"], []).append(r)
    lines += ["## Per API and version", ""]
    for api, rs in by_api.items():
        lines += [f"### {api}", "", "| version | case | result |", "|---|---|---|"]
        for r in rs:
            lines.append(f"| {r['version']} | {r['id'].split(' ', 2)[2]} | {r['status']} |")
        lines.append("")
        for r in rs:
            if not r["differences"] and not r.get("error"):
                continue
            lines.append(f"- **{r['id']}** ({r['status']})")
            if r.get("error"):
                lines.append(f"  - could not run: `{r['error']}`")
            for d in r["differences"]:
                why = f" — {d['reason']}" if d.get("reason") else ""
                lines.append(f"  - `{d['path']}`: Kafka `{_v(d['kafka'])}`, "
                             f"pybroker `{_v(d['pybroker'])}`{why}")
        lines.append("")
    return "\n".join(lines + _share_section(data.get("share_scenarios") or {}))


def _share_section(share: dict[str, Any]) -> list[str]:
    """The share-group client scenarios (share_scenarios.py), when they were run: a table per
    client ({client name: {scenario: result}})."""
    if not share:
        return []
    lines = [
        "## Share groups (KIP-932): client scenarios", "",
        "Issue #34's scenarios played unmodified by confluent-kafka's ShareConsumer and by the "
        "Java client's KafkaShareConsumer (driven call by call through compat/java's JVM), on "
        "a fresh Apache Kafka and a fresh pybroker (`compat/differential/share_scenarios.py`; "
        "`python -m compat.differential --share [confluent|java]` reruns only these, for one "
        "client or both). An observation holds who got which record and with which delivery "
        "count, never a timing or an offset. "
        "librdkafka 2.16 draws member ids in standard base64; Kafka 4.1.1 fails every "
        "ShareFetch of an id with '+' or '/' (UNKNOWN_SERVER_ERROR, \"Illegal base64 "
        "character\"), so such a consumer never gets a record there: the scenarios replace "
        "a consumer that gets no warm-up record (pybroker takes any member id; the Java "
        "client draws URL-safe ids).", ""]
    from compat.differential.share_scenarios import FIXED as SHARE_FIXED
    for client, results in share.items():
        lines += [f"### {client}", "", "| scenario | Kafka | pybroker | result |",
                  "|---|---|---|---|"]
        lines += [f"| {name} | `{json.dumps(r['kafka'])}` | `{json.dumps(r['pybroker'])}` "
                  f"| {r['status']} |" for name, r in results.items()]
        lines.append("")
        reasons = [f"- **{name}**: {r['reason']}" for name, r in results.items()
                   if r.get("reason")]
        lines += reasons + [""] * bool(reasons)
    if SHARE_FIXED:
        lines += ["Fixed in pybroker after these scenarios found them:", ""]
        lines += [f"- {name}: {what}" for name, what in SHARE_FIXED.items()]
        lines.append("")
    return lines


def _recorded_share(recorded: dict[str, Any]) -> dict[str, Any]:
    """The recorded share scenarios by client; a report of before the client axis held the
    confluent-kafka ShareConsumer's alone, keyed by scenario."""
    from compat.differential.share_scenarios import CONFLUENT, SCENARIOS
    share = recorded.get("share_scenarios", {})
    return {CONFLUENT.name: share} if set(share) & set(SCENARIOS) else share


# -- the one command ----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """`-v`: each case's time; `--clients-only`: rerun only the client scenarios, keeping the
    corpus's recorded results; `--no-clients`: the corpus only, keeping the recorded client
    scenarios (they take minutes: a killed member waits out a 45 s session);
    `--share [confluent|java]`: only the share-group scenarios (share_scenarios.py), with one
    client or both, keeping the rest. A full run plays the share scenarios too."""
    from compat.apache_kafka import ApacheKafka, kafka_version
    from compat.differential.config import SHARED
    from pybroker.testing import Broker

    args = argv if argv is not None else sys.argv[1:]
    progress = "-v" in args
    corpus_too, clients_too = "--clients-only" not in args, "--no-clients" not in args
    recorded = json.loads(JSON_PATH.read_text()) if JSON_PATH.exists() else {}
    results, only = recorded.get("cases", []), recorded.get("apis_only_kafka_serves", [])
    scenarios = recorded.get("client_scenarios", [])
    share = _recorded_share(recorded)
    from compat.differential.share_scenarios import CLIENTS, run_both
    if "--share" in args:  # only the share-group scenarios, into the recorded report
        after = args[args.index("--share") + 1:]
        players = [CLIENTS[after[0]]] if after and after[0] in CLIENTS \
            else list(CLIENTS.values())
        share = {**share, **run_both(players)}
        write(results, recorded["kafka_version"], only, scenarios, share)
        print(json.dumps({c: {name: r["status"] for name, r in rs.items()}
                          for c, rs in share.items()}))
        return 0
    with tempfile.TemporaryDirectory(prefix="differential-") as tmp:
        kafka = ApacheKafka(Path(tmp) / "kafka", overrides=SHARED)
        config = {k.replace(".", "_"): v for k, v in SHARED.items()}
        # Kafka's keys, `_` for `.`: none spells keep, log_dir or log_lines (a dict's keys are
        # beyond mypy, which holds its str values against those keywords' types).
        broker = Broker(**config)  # type: ignore[arg-type]
        try:
            kafka.start()
            broker.start()
            if corpus_too:
                results = run_corpus(kafka.bootstrap, broker.bootstrap, progress)
                ours = advertised(broker.bootstrap)
                only = [f"{ApiKey(k).name if k in ApiKey._value2member_map_ else k}"
                        for k in sorted(advertised(kafka.bootstrap)) if k not in ours]
            if clients_too:
                scenarios = clients.run_scenarios(kafka.bootstrap, broker.bootstrap)
        finally:
            broker.stop()
            kafka.stop()
    if clients_too and corpus_too:  # the share scenarios start brokers of their own
        share = run_both()
    write(results, kafka_version(), only, scenarios, share)
    print(json.dumps({**counts(results), "client_scenarios": clients.counts(scenarios)}))
    return 0
