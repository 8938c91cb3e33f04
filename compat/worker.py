"""Run one (client, scenario) cell against a running broker, in its own process.

    python -m compat.worker CLIENT SCENARIO BOOTSTRAP

Its last stdout line is `COMPAT-RESULT {"status": "PASS"|"FAIL"|"N/A", "reason": ..., "note":
...}`; the traceback of a failure goes to stderr. `compat.run` starts one of these per cell so
that a scenario that hangs (a client stuck in C code) can be killed at its timeout without
taking the run down.
"""
from __future__ import annotations

import json
import sys
import time
import traceback
import warnings

MARKER = "COMPAT-RESULT "


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    line = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return line if len(line) <= 240 else line[:237] + "..."


def run_cell(client: str, scenario: str, bootstrap: str) -> dict:
    from compat.base import NotApplicable
    from compat.clients import all_adapters
    from compat.all_scenarios import SCENARIOS

    adapter = all_adapters()[client]
    started = time.monotonic()
    result: dict = {"status": "PASS", "reason": None, "note": None}
    try:
        missing = adapter.missing()
        if missing:
            raise NotApplicable(missing)
        note = SCENARIOS[scenario].run(adapter, bootstrap)
        result["note"] = "; ".join(([note] if note else []) + adapter.notes) or None
    except NotApplicable as exc:
        result.update(status="N/A", reason=str(exc))
    except Exception as exc:  # noqa: BLE001 - every failure becomes one line in the matrix
        traceback.print_exc()
        result.update(status="FAIL", reason=one_line(exc))
    result["seconds"] = round(time.monotonic() - started, 2)
    return result


def main(argv: list[str]) -> int:
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python's importlib calls
    client, scenario, bootstrap = argv
    result = run_cell(client, scenario, bootstrap)
    sys.stdout.flush()
    print(MARKER + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
