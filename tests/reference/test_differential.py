"""The differential corpus against Apache Kafka, rerun (issue #15 §2): pybroker's answers
must not drift from what compat/differential.json recorded.

A case recorded identical must stay identical (a regression otherwise); a recorded
difference must keep pybroker's side as recorded (pybroker changed how it answers: if on
purpose, regenerate with `python -m compat.differential` and review the diff of
compat/DIFFERENTIAL.md). Kafka's own side of a recorded difference is not held to the
recording: a JVM broker's answers in its first seconds (a coordinator still loading) vary
from run to run, and what is being guarded is pybroker.
"""
from __future__ import annotations

import json

from compat.apache_kafka import ApacheKafka
from compat.differential.config import SHARED
from compat.differential.runner import JSON_PATH, run_corpus
from pybroker.testing import Broker

APACHE_KAFKA_OVERRIDES = SHARED


def test_the_corpus_answers_as_recorded(apache_kafka: ApacheKafka) -> None:
    recorded = {c["id"]: c for c in json.loads(JSON_PATH.read_text())["cases"]}
    broker = Broker(**{k.replace(".", "_"): v for k, v in SHARED.items()}).start()
    try:
        # As recorded: through JSON (tuples become lists, odd values strings).
        results = json.loads(json.dumps(run_corpus(apache_kafka.bootstrap, broker.bootstrap),
                                        default=str))
    finally:
        broker.stop()
    problems = []
    for r in results:
        was = recorded.get(r["id"])
        if was is None:
            problems.append(f"{r['id']}: a case the recording lacks (regenerate it)")
        elif was["status"] == "identical" and r["status"] != "identical":
            problems.append(f"{r['id']}: was identical, now {r['status']}: "
                            f"{r['differences'][:3]} {r.get('error', '')}")
        elif was["status"] != "identical":
            ours = {d["path"]: d["pybroker"] for d in r["differences"]}
            for d in was["differences"]:
                if d["path"] in ours and ours[d["path"]] != d["pybroker"]:
                    problems.append(f"{r['id']}: pybroker's {d['path']} was "
                                    f"{d['pybroker']!r}, now {ours[d['path']]!r}")
    missing = set(recorded) - {r["id"] for r in results}
    problems += [f"{case_id}: recorded, no longer run" for case_id in sorted(missing)]
    assert not problems, "\n".join(problems[:40])
