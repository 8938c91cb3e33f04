"""Apache Kafka's own command-line tools, run from their jars against pybroker (issue #14).

What `bin/kafka-topics.sh` and its siblings do: `kafka-run-class.sh` with a main class, every
jar of Kafka's `libs/` on one classpath, a 256 MB heap and the tools' log4j configuration
(warnings to stderr). Here the jars are the reference broker's (`compat/apache_kafka.py`,
which has `kafka.admin.ConfigCommand`) plus `org.apache.kafka:kafka-tools` (where 4.x moved
the other tools), fetched by Maven from `compat/kafka-tools/pom.xml` into
`~/.cache/pybroker/kafka-tools-<version>/` on first use. Where both bring an artifact the
broker's copy wins (the tools' pom pulls slf4j 1.7, the broker's classpath log4j behind
slf4j 2).

`run("kafka-topics", ["--list", "--bootstrap-server", b])` is one JVM, as the script is.
"""
from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path
from typing import Sequence

from compat import apache_kafka
from compat.apache_kafka import java

POM = Path(__file__).resolve().parent / "kafka-tools" / "pom.xml"

# The script names of Kafka's bin/ and the main classes they run in Kafka 4.1.
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
}

# Kafka's config/tools-log4j2.yaml: warnings and worse to stderr, so stdout is the tool's own.
TOOLS_LOG4J2 = """\
status = warn
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
"""


def cache_dir() -> Path:
    return apache_kafka.cache_root() / f"kafka-tools-{apache_kafka.kafka_version()}"


def fetch() -> Path:
    """The directory of kafka-tools and its dependencies, fetched with Maven when incomplete."""
    root = cache_dir()
    lib = root / "lib"

    def install(staging: Path) -> None:
        shutil.rmtree(lib, ignore_errors=True)
        staging.rename(lib)
        (root / "tools-log4j2.properties").write_text(TOOLS_LOG4J2)
    apache_kafka.maven_cached(
        root, hashlib.sha256(POM.read_bytes()).hexdigest(), "kafka-tools",
        lambda staging: ["-f", str(POM), "dependency:copy-dependencies",
                         f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
        lambda staging: any(staging.glob("kafka-tools-*.jar")), install)
    return lib


def _artifact(jar: Path) -> str:
    """A jar's artifact name without its version: slf4j-api-2.0.17.jar -> slf4j-api."""
    return re.sub(r"-\d[^-]*(-[A-Za-z0-9]+)*\.jar$", "", jar.name)


def classpath() -> str:
    """The broker's jars, then kafka-tools' jars of artifacts the broker lacks."""
    jars = {_artifact(j): j for j in sorted(apache_kafka.fetch().glob("*.jar"))}
    for j in sorted(fetch().glob("*.jar")):
        jars.setdefault(_artifact(j), j)
    return ":".join(str(j) for j in jars.values())


# Flags for a short command-line run: a small heap and the C1 JIT start the JVM soonest. A
# load generator (tests/bench/kafka_perf.py) passes the scripts' performance flags instead.
CLI_JVM = ("-Xmx256M", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
           "-Djava.awt.headless=true")


def command(tool: str, args: Sequence[str], *, jvm: Sequence[str] = CLI_JVM) -> list[str]:
    """The java command line `bin/<tool>.sh args` runs, with the JVM flags `jvm`."""
    cp = classpath()
    return [java(), *jvm,
            f"-Dlog4j2.configurationFile={cache_dir() / 'tools-log4j2.properties'}",
            "-cp", cp, TOOLS[tool], *args]


def run(tool: str, args: Sequence[str], *, input: str | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's tools to its end: its exit status, stdout and stderr."""
    return subprocess.run(command(tool, args), input=input, capture_output=True, text=True,
                          timeout=timeout, stdin=None if input is not None else subprocess.DEVNULL)
