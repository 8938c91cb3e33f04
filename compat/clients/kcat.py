"""kcat (librdkafka's command-line client), run as a child process.

Producing: one kcat run per stretch of consecutive records that share partition, headers and
null-value mode, since `-H` applies to a whole run and `-Z` (null values) to every empty value;
a record's key is what comes before the first ':' of its line (`-K:`), a line without ':' has a
null key. Consuming: `-f` with %K/%S (key/value lengths, -1 for null) to tell null from empty.
Groups: `-G`, which commits through librdkafka's auto-commit and on close. Isolation levels:
`-X isolation.level`, with `-e` and without `-q`, so that kcat reports the offset where it
reached each partition's end. Offsets for times: `-Q -t topic:partition:timestamp`. Members
with an assignor or a group.instance.id: `-G` with librdkafka's `-X` settings. kcat has no
admin API and cannot set a record's timestamp.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Any, NoReturn, Sequence

from compat.base import (
    TIMEOUT_S, Adapter, Got, Headers, Member, NotApplicable, ProcessMember, ProduceFailed, Rec,
    Settings,
)

KCAT = shutil.which("kcat") or "/usr/bin/kcat"
# %K and %S are the key and value lengths, -1 for null: how empty is told from null.
CONSUME_FORMAT = r"%p\t%o\t%K\t%S\t%T\t%h\t%k\t%s\n"
_AT_END = re.compile(r"Reached end of topic (\S+) \[(\d+)\] at offset (\d+)")
# One transaction per run (-X transactional.id): committed at the end of its input, aborted
# on a signal; -p is for the whole run, so one transaction cannot span chosen partitions.
NO_TRANSACTIONS = ("kcat's producer runs one transaction per run (-X transactional.id: "
                   "committed at the end of input, aborted on a signal) and cannot place one "
                   "transaction's records on chosen partitions")


def producer_runs(recs: Sequence[Any]) -> list[tuple[list[str], bytes]]:
    """The `kcat -P` runs that produce `recs` (anything with partition, key, value and
    headers): each run's arguments beyond -b/-t/-z and its standard input."""
    runs: list[list[Any]] = []
    for r in recs:
        mode = (r.partition, r.headers, r.value is None)
        if runs and (runs[-1][0].partition, runs[-1][0].headers,
                     runs[-1][0].value is None) == mode:
            runs[-1].append(r)
        else:
            runs.append([r])
    out = []
    for run in runs:
        null_value = run[0].value is None
        lines = []
        for r in run:
            value = b"" if r.value is None else r.value
            assert b"\n" not in value and b":" not in (r.key or b""), "kcat needs plain text"
            if r.key is None:
                assert b":" not in value, "a null key needs a value without ':'"
                lines.append(value)
            else:
                assert not (null_value and r.key == b""), "-Z turns an empty key null"
                lines.append(r.key + b":" + value)
        args = ["-K:"]
        if run[0].partition is not None:
            args += ["-p", str(run[0].partition)]
        for k, v in run[0].headers:
            args += ["-H", k if v is None else f"{k}={v.decode()}"]
        if null_value:
            args.append("-Z")
        out.append((args, b"\n".join(lines) + b"\n"))
    return out


def _headers(text: str) -> Headers:
    if not text:
        return ()
    out = []
    for item in text.split(","):
        name, _, value = item.partition("=")
        out.append((name, None if value == "NULL" else value.encode()))
    return tuple(out)


def parse_consumed(stdout: bytes) -> list[Got]:
    """The records `kcat -C -f CONSUME_FORMAT` printed."""
    got: list[Got] = []
    for line in stdout.decode().split("\n")[:-1]:
        part, offset, klen, vlen, ts, headers, key, value = line.split("\t")
        got.append(Got(int(part), int(offset), None if klen == "-1" else key.encode(),
                       None if vlen == "-1" else value.encode(), _headers(headers), int(ts)))
    return got


def _run(args: list[str], stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([KCAT, *args], input=stdin, capture_output=True, timeout=TIMEOUT_S + 10)


def _last_line(stderr: bytes) -> str:
    lines = [line for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


_QUERIED = re.compile(r"^(\S+) \[(\d+)\] offset (-?\d+)$", re.M)


NO_SHARE_CONSUMER = ("kcat 1.7.1 has no share consumer: its modes are -C, -P, -L, -Q and "
                     "-G (a classic group member), and the librdkafka it bundles (2.0.2) "
                     "predates librdkafka's share consumer")


class KcatMember(ProcessMember):
    """`kcat -G`; librdkafka's `-X` settings choose the assignor and static membership
    (librdkafka closes a static member without LeaveGroup, as the Java consumer)."""

    def __init__(self, bootstrap: str, topic: str, group: str,
                 extra: Sequence[str] = ()) -> None:
        super().__init__("kcat", [
            KCAT, "-G", group, "-b", bootstrap, "-X", "auto.offset.reset=earliest",
            "-X", "session.timeout.ms=10000", "-X", "heartbeat.interval.ms=500",
            "-X", "auto.commit.interval.ms=200", *extra, "-u", "-f", r"%s\n", topic])


class Kcat(Adapter):
    name = "kcat"
    order = 40
    no_admin = ("kcat has no admin API: it lists metadata (-L) and queries offsets (-Q), but "
                "cannot create, alter or delete topics, nor describe or alter configs, groups "
                "or log dirs (kcat 1.7.1's modes are -C, -P, -L, -Q and -G only)")

    def versions(self) -> dict[str, str]:
        out = subprocess.run([KCAT, "-V"], capture_output=True, text=True, timeout=10)
        text = out.stdout + out.stderr
        kcat = re.search(r"Version (\S+)", text)
        librdkafka = re.search(r"librdkafka (\S+)", text)
        versions = {"kcat": kcat.group(1) if kcat else "unknown",
                    "librdkafka (bundled)": librdkafka.group(1) if librdkafka else "unknown"}
        try:
            deb = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "kcat"],
                                 capture_output=True, text=True, timeout=10)
            if deb.returncode == 0 and deb.stdout:
                versions["Debian package"] = f"kcat {deb.stdout}"
        except OSError:
            pass
        return versions

    def missing(self) -> str | None:
        return None if os.access(KCAT, os.X_OK) else "kcat is not installed"

    def cannot(self, feature: str) -> str | None:
        if feature == "timestamp":
            return "kcat's producer cannot set a record's timestamp"
        if feature == "transactions":
            return NO_TRANSACTIONS
        return None

    # -- produce / consume ----------------------------------------------------------------------
    def produce(self, bootstrap: str, topic: str, recs: list[Rec], *, codec: str = "none",
                idempotent: bool = False, config: Settings = None) -> None:
        for args, stdin in producer_runs(recs):
            args = ["-P", "-b", bootstrap, "-t", topic, "-z", codec, *args]
            if idempotent:
                args += ["-X", "enable.idempotence=true"]
            for name, value in (config or {}).items():
                args += ["-X", f"{name}={value}"]
            proc = _run(args, stdin)
            if proc.returncode != 0 or b"Delivery failed" in proc.stderr:
                raise ProduceFailed(_last_line(proc.stderr))

    def _consume(self, bootstrap: str, topic: str, partition: int | None, start: str,
                 count: int) -> list[Got]:
        args = ["-C", "-b", bootstrap, "-t", topic, "-o", start, "-e", "-q", "-f", CONSUME_FORMAT]
        if partition is not None:
            args += ["-p", str(partition)]
        proc = _run(args)
        assert proc.returncode == 0, _last_line(proc.stderr)
        return parse_consumed(proc.stdout)

    def consume(self, bootstrap: str, topic: str, partitions: list[int],
                count: int) -> list[Got]:
        if len(partitions) == 1:
            return self._consume(bootstrap, topic, partitions[0], "beginning", count)
        got = self._consume(bootstrap, topic, None, "beginning", count)  # every partition
        return [g for g in got if g.partition in partitions]

    def consume_to_end(self, bootstrap: str, topic: str, partitions: list[int], count: int,
                       isolation: str) -> tuple[list[Got], dict[int, int]]:
        got: list[Got] = []
        ends: dict[int, int] = {}
        for p in partitions:  # -e ends a run at its partitions' end: the offset is reported
            proc = _run(["-C", "-b", bootstrap, "-t", topic, "-p", str(p), "-o", "beginning",
                         "-e", "-X", f"isolation.level={isolation}", "-f", CONSUME_FORMAT])
            assert proc.returncode == 0, _last_line(proc.stderr)
            got += parse_consumed(proc.stdout)
            for t, part, offset in _AT_END.findall(proc.stderr.decode(errors="replace")):
                if t == topic:
                    ends[int(part)] = int(offset)
        return got, ends

    def consume_from(self, bootstrap: str, topic: str, partition: int, offset: int,
                     count: int) -> list[Got]:
        return self._consume(bootstrap, topic, partition, str(offset), count)

    def consume_from_time(self, bootstrap: str, topic: str, partition: int, timestamp: int,
                          count: int) -> list[Got]:
        return self._consume(bootstrap, topic, partition, f"s@{timestamp}", count)

    def consume_group(self, bootstrap: str, topic: str, group: str, count: int) -> list[Got]:
        proc = _run(["-G", group, "-b", bootstrap, "-X", "auto.offset.reset=earliest",
                     "-c", str(count), "-q", "-f", CONSUME_FORMAT, topic])
        assert proc.returncode == 0, _last_line(proc.stderr)
        return parse_consumed(proc.stdout)

    def start_member(self, bootstrap: str, topic: str, group: str) -> Member:
        return KcatMember(bootstrap, topic, group)

    def start_member_as(self, bootstrap: str, topic: str, group: str, *,
                        cooperative: bool = False, instance_id: str | None = None) -> Member:
        extra = []
        if cooperative:
            extra += ["-X", "partition.assignment.strategy=cooperative-sticky"]
        if instance_id is not None:
            extra += ["-X", f"group.instance.id={instance_id}"]
        return KcatMember(bootstrap, topic, group, extra)

    def offsets_for_times(self, bootstrap: str, topic: str,
                          times: dict[int, int]) -> dict[int, tuple[int, int] | None]:
        proc = _run(["-Q", "-b", bootstrap,
                     *(arg for p, t in times.items() for arg in ("-t", f"{topic}:{p}:{t}"))])
        assert proc.returncode == 0, _last_line(proc.stderr)
        found = {int(p): int(o) for t, p, o in _QUERIED.findall(proc.stdout.decode())
                 if t == topic}
        assert set(found) == set(times), f"kcat -Q printed {proc.stdout.decode()!r}"
        # -Q prints the offset only (-1: none), not the record's timestamp: read it.
        out: dict[int, tuple[int, int] | None] = {
            p: None if o < 0 else (o, self.consume_from(bootstrap, topic, p, o, 1)[0].timestamp)
            for p, o in found.items()}
        if any(v is not None for v in out.values()):
            self.note("kcat -Q gives offsets only: timestamps read back")
        return out

    def share_client(self) -> NoReturn:
        raise NotApplicable(NO_SHARE_CONSUMER)


ADAPTER = Kcat()
