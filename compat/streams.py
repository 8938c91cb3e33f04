"""Kafka Streams, Kafka Connect and MirrorMaker 2 as programs run against pybroker (issue #14).

Not part of the product. `compat/streams/pom.xml` pins Apache Kafka's kafka-streams,
connect-runtime, connect-file and connect-mirror and holds our WordCount (Kafka's demo
topology, its parameters ours). On first use Maven compiles it and copies every runtime jar
into `~/.cache/pybroker/streams-connect-mirror-<version>/` (`fetch()`); as for the reference
broker (compat/apache_kafka.py) a marker holding the hash of the pom and sources says the copy
is complete, and a file lock keeps two processes from building into it at once. The build
never writes into the source tree.

`Jvm` runs one main class of that classpath with its output in a file, and is never left
running (stop(), atexit, and the kernel's parent-death signal, as for ApacheKafka).
"""
from __future__ import annotations

import atexit
import hashlib
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Sequence

from compat.apache_kafka import (
    _die_with_parent, cache_root, java, maven_cached, pom_version, terminate,
)

PROJECT = Path(__file__).resolve().parent / "streams"
POM = PROJECT / "pom.xml"

LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = OUT
"""


def kafka_version() -> str:
    return pom_version(POM)


def cache_dir() -> Path:
    return cache_root() / f"streams-connect-mirror-{kafka_version()}"


def _sources_hash() -> str:
    digest = hashlib.sha256(POM.read_bytes())
    for path in sorted((PROJECT / "src").rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(PROJECT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def fetch() -> Path:
    """The directory of jars (ours first as `classes/`, then Kafka's), built when missing."""
    root = cache_dir()

    def install(staging: Path) -> None:
        for name in ("lib", "classes"):
            shutil.rmtree(root / name, ignore_errors=True)
        (staging / "target" / "classes").rename(root / "classes")
        (staging / "lib").rename(root / "lib")
    maven_cached(
        root, _sources_hash(), f"Kafka Streams/Connect/MirrorMaker ({POM})",
        lambda staging: ["-f", str(POM), f"-Deco.build.dir={staging / 'target'}", "compile",
                         "dependency:copy-dependencies", f"-DoutputDirectory={staging / 'lib'}",
                         "-DincludeScope=runtime"],
        lambda staging: any((staging / "lib").glob("kafka-streams-*.jar")), install)
    return root


def classpath() -> str:
    root = fetch()
    jars = sorted(str(p) for p in (root / "lib").glob("*.jar"))
    return os.pathsep.join([str(root / "classes"), *jars])


class Jvm:
    """One Java program of the classpath above, its stdout and stderr in `work_dir/NAME.out`.

    `log_level` is the root level of the program's log4j2 (INFO to see what Connect or
    MirrorMaker did, WARN to keep Streams quiet)."""

    def __init__(self, work_dir: Path | str, name: str, main: str, args: Sequence[str], *,
                 heap: str = "256m", log_level: str = "WARN") -> None:
        self.work_dir = Path(work_dir)
        self.name = name
        self.main = main
        self.args = [str(a) for a in args]
        self.heap = heap
        self.log_level = log_level
        self.proc: subprocess.Popen | None = None

    @property
    def log_path(self) -> Path:
        return self.work_dir / f"{self.name}.out"

    def start(self) -> "Jvm":
        cp = classpath()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        log4j = self.work_dir / f"{self.name}-log4j2.properties"
        log4j.write_text(LOG4J2.format(level=self.log_level))
        with open(self.log_path, "a") as out:
            self.proc = subprocess.Popen(
                [java(), f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                 "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={log4j}",
                 "-cp", cp, self.main, *self.args],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=self.work_dir, preexec_fn=_die_with_parent)
        atexit.register(self.stop)
        return self

    def wait_for(self, pattern: str, timeout: float, *, after: int = 0) -> re.Match:
        """The first match of `pattern` in the output past character `after`; fails with
        the output's tail if the program exits or `timeout` passes first."""
        deadline = time.monotonic() + timeout
        while True:
            m = re.compile(pattern).search(self.output(), after)
            if m:
                return m
            if self.proc is None or self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited before {pattern!r}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: no {pattern!r} in {timeout:.0f} s:\n"
                                     f"{self.tail()}")
            time.sleep(0.2)

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 60) -> str:
        return "".join(self.output().splitlines(True)[-lines:])

    def errors(self, context: int = 6) -> str:
        """Every ERROR record the program logged, its shutdown's included, each with the lines
        that follow it ("" when none). A shutdown ERROR is no less a failure: the tests once
        cut the output at stop() to hide one (docs/TESTING.md, "Flaky tests fixed")."""
        lines = self.output().splitlines()
        found = [i for i, line in enumerate(lines) if " ERROR " in line]
        return "\n---\n".join("\n".join(lines[i:i + context]) for i in found)

    def kill(self) -> None:
        """SIGKILL: the program gets no chance to commit or close anything."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.stop()

    def stop(self, timeout: float = 20) -> None:
        """SIGTERM (the program's shutdown hooks run), then SIGKILL after `timeout`."""
        atexit.unregister(self.stop)
        proc, self.proc = self.proc, None
        terminate(proc, timeout)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None
