"""The README's commands as steps: each command line and the lines typed into it. The
quickstart's, from between its markers, run as written by tests/test_quickstart.py and with
Kafka's own tools by tests/reference/test_kafka_tools.py; any block's, for the README's other
tours (tests/integration/test_readme_security.py)."""
from __future__ import annotations

from tests.helpers import ROOT

README = ROOT / "README.md"


def quickstart_steps() -> list[tuple[str, list[str]]]:
    """(command line, lines typed into it) in README order."""
    text = README.read_text()
    return typed_steps(
        text.split("<!-- quickstart:begin -->", 1)[1].split("<!-- quickstart:end -->", 1)[0])


def typed_steps(block: str) -> list[tuple[str, list[str]]]:
    """Each `bin/` line of `block`, with the lines after it that start with `> ` (typed into
    it, the `> ` cut off)."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("bin/"):
            steps.append((line, []))
        elif line.startswith("> "):
            steps[-1][1].append(line[2:])
    return steps
