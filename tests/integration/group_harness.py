"""The parent side of `group_member`: start members, follow what they report, stop or kill.

`Member.assignment` is rebuilt from the assigned/revoked events (eager protocols revoke all and
assign all; cooperative ones add and remove increments, and the same arithmetic serves both).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable

ROOT = Path(__file__).resolve().parents[2]


def wait_until(predicate: Callable[[], bool], timeout: float = 30, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")


class Member:
    def __init__(self, client: str, bootstrap: str, topic: str, group: str, *,
                 instance: str | None = None, strategy: str | None = None,
                 session_ms: int = 3000, heartbeat_ms: int = 300) -> None:
        self.client = client
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        args = [sys.executable, "-m", "tests.integration.group_member", "--client", client,
                "--bootstrap", bootstrap, "--topic", topic, "--group", group,
                "--session-ms", str(session_ms), "--heartbeat-ms", str(heartbeat_ms)]
        if instance:
            args += ["--instance", instance]
        if strategy:
            args += ["--strategy", strategy]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env, cwd=ROOT)
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                self.events.append(event)

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def of(self, kind: str) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if e["event"] == kind]

    @property
    def assignment(self) -> set[int]:
        current: set[int] = set()
        with self._lock:
            for e in self.events:
                if e["event"] == "assigned":
                    current |= set(e["partitions"])
                elif e["event"] == "revoked":
                    current -= set(e["partitions"])
        return current

    def committed_values(self) -> list[str]:
        return [e["v"] for e in self.of("ok")]

    def taken_values(self) -> list[str]:
        return [e["v"] for e in self.of("rec")]

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM: the member finishes its record, closes the consumer (leaving the group)."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup; the coordinator notices when the session times out."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def ensure_dead(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def debug(self) -> str:
        return f"{self.client} events={self.events[-20:]} stderr={''.join(self.stderr[-20:])}"


def committed_exactly_once(members: Iterable[Member], expected: Iterable[str],
                           killed: Iterable[Member] = ()) -> None:
    """Every expected value committed by exactly one member, once.

    A killed member may have committed its last record without living to say so: what it
    had taken counts as covering a record then, but never as a second copy.
    """
    counts = Counter(v for m in members for v in m.committed_values())
    duplicates = {v: n for v, n in counts.items() if n > 1}
    assert not duplicates, f"committed more than once: {sorted(duplicates)[:20]}"
    covered = set(counts) | {v for m in killed for v in m.taken_values()}
    missing = set(expected) - covered
    assert not missing, f"never consumed: {sorted(missing)[:20]}"
