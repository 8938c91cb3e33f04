"""Where a broker's CPU goes, step by step on the request path, from py-spy's raw profiles.

    .venv/bin/python tests/bench/profile_steps.py DIR/produce-1.txt [OTHER.txt ...]

Reads the collapsed stacks `bin/pybroker-bench --profile DIR` (or `py-spy record --format
raw`) wrote and gives each sample to one step of the path: the innermost frame that belongs to
a step names it (a frame in storage/ called from a handler is "append", not "handler").
Prints each step's share of the samples, one column per file, so a profile of this build
and one of an older build (tests/bench/ab.py builds it) read side by side. A share times the
run's broker CPU per million records (the bench prints it) is that step's CPU per million.
"""
from __future__ import annotations

import collections
import sys
from pathlib import Path

# (step, substrings of a frame "function (file:line)"); the first step to match wins, so the
# narrow ones come before the packages they live in.
STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("metrics", ("pybroker/stats/", "pybroker/ops/metrics", "request_log")),
    ("authorize", ("handlers/_authz", "handlers/authz", "pybroker/security/acl")),
    ("quota", ("pybroker/quota/",)),
    ("validate", ("storage/validator.py", "protocol/records/", "producer_state",
                  "txn_verifier", "_has_transactional_batch")),
    ("append", ("pybroker/storage/",)),
    ("replicate", ("pybroker/replica/",)),
    ("decode", ("decode_request", "Message.decode", "protocol/headers.py",
                "read_tag_section", "protocol/primitives.py")),
    ("respond", ("encode_response", "encode_parts", "send_parts", "_send_buffers",
                 "_send_region")),
    ("framing", ("protocol/framing.py", "_Requests.receive", "_serve ")),
    ("handler", ("pybroker/handlers/", "network/dispatch.py", "network/request_hooks")),
    ("threads", ("_thread_cache.py",)),
    ("trio loop", ("trio/",)),
)
NAMES = tuple(name for name, _ in STEPS) + ("other",)


def step_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        for name, marks in STEPS:
            if any(mark in frame for mark in marks):
                return name
    return "other"


def shares(path: Path) -> tuple[dict[str, float], int]:
    """Each step's share of the samples in one raw profile, and the sample count."""
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        counts[step_of(stack.split(";"))] += int(n)
        total += int(n)
    return {name: counts[name] / total if total else 0.0 for name in NAMES}, total


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    columns = [(Path(a).name, *shares(Path(a))) for a in argv]
    print("step".ljust(12) + "".join(name[:22].rjust(24) for name, _, _ in columns))
    for step in NAMES:
        print(step.ljust(12) + "".join(f"{s[step]:23.1%} " for _, s, _ in columns))
    print("samples".ljust(12) + "".join(f"{n:23d} " for _, _, n in columns))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
