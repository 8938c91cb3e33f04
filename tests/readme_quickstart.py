"""The README's quickstart as its steps: each command line and the lines typed into it, read
from between the README's quickstart markers; run as written by tests/test_quickstart.py and
with Kafka's own tools by tests/reference/test_kafka_tools.py."""
from __future__ import annotations

from tests.helpers import ROOT

README = ROOT / "README.md"


def quickstart_steps() -> list[tuple[str, list[str]]]:
    """(command line, lines typed into it) in README order."""
    text = README.read_text()
    block = text.split("<!-- quickstart:begin -->", 1)[1].split("<!-- quickstart:end -->", 1)[0]
    steps: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("bin/"):
            steps.append((line, []))
        elif line.startswith("> "):
            steps[-1][1].append(line[2:])
    return steps
