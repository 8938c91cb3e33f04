"""The README's secure broker (TLS, SCRAM and ACLs), run as written: its openssl lines, its
three properties files, the server started from the first, and each tool line through bin/
(lines starting with `>` typed into the console producer).

Only two things change, so the test cannot collide with a real broker or earlier files:
/tmp/pybroker-secure becomes a temporary directory, and port 9093 a free port (with the ports
after it free too: at the default num.cores the server is a node of a broker a CPU, broker K
on the port + K).
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

from pybroker.testing.broker import StartWatch, free_port_block
from tests.helpers import ROOT
from tests.readme_quickstart import typed_steps

README = ROOT / "README.md"
PLACE = "/tmp/pybroker-secure"


def _blocks() -> tuple[list[str], list[str]]:
    """The sh blocks and the properties blocks between the markers, in order."""
    text = README.read_text()
    part = text.split("<!-- secure:begin -->", 1)[1].split("<!-- secure:end -->", 1)[0]
    found = re.findall(r"^```(\w+)\n(.*?)^```$", part, flags=re.M | re.S)
    return ([body for kind, body in found if kind == "sh"],
            [body for kind, body in found if kind == "properties"])


def test_readme_secure_broker_runs_as_written(tmp_path: Path) -> None:
    (certificates, commands), (server, admin, alice) = _blocks()
    place = str(tmp_path / "secure")
    port = free_port_block("127.0.0.1", len(os.sched_getaffinity(0)))

    def local(text: str) -> str:
        return text.replace(PLACE, place).replace("localhost:9093", f"localhost:{port}")

    made = subprocess.run(["bash", "-e", "-c", local(certificates)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    files = {"server.properties": server, "admin.properties": admin,
             "alice.properties": alice}
    for name, body in files.items():
        (Path(place) / name).write_text(local(body))
    assert "sasl.mechanism=PLAIN" in admin and "username=\"alice\"" in alice

    broker = subprocess.Popen([sys.executable, "-m", "pybroker",
                               str(Path(place) / "server.properties")], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        watch = StartWatch()
        while time.monotonic() < deadline:
            line = broker.stderr.readline()  # type: ignore[union-attr]
            assert line, "the broker exited before listening"
            if watch.feed(line) is not None:
                break
        else:
            raise AssertionError("the broker did not start listening")
        # Keep reading its log, so a chatty broker never blocks on a full pipe.
        threading.Thread(target=broker.stderr.read, daemon=True).start()  # type: ignore[union-attr]
        results = []
        for command, typed in typed_steps(commands):
            result = subprocess.run(shlex.split(local(command)), cwd=ROOT,
                                    input="\n".join(typed) + "\n", capture_output=True,
                                    text=True, timeout=60)
            results.append(result)
        *allowed, refused = results
        for (command, _), result in zip(typed_steps(commands), allowed):
            assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
        scram, create, acls, produce, consume = allowed
        assert "Completed updating config for user alice." in scram.stdout
        assert "Created topic orders." in create.stdout
        assert "principal=User:alice, host=*, operation=WRITE" in acls.stdout
        assert consume.stdout.splitlines() == ["hello from alice"]
        assert refused.returncode == 1
        assert "Authorization failed" in refused.stderr + refused.stdout
    finally:
        broker.terminate()
        broker.wait(timeout=30)
