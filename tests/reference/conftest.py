"""Apache Kafka itself beside pybroker (issue #15): the `apache_kafka` fixture.

One node per test module: a JVM start costs seconds, so a module shares its broker and its
tests use topics of their own. Where Maven or Java is missing the fixture fails with what to
install rather than skipping: the reference is part of the default run, and a skip would
hide that it never ran (bin/test installs both).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from compat import kafka_tools
from compat.apache_kafka import ApacheKafka, ApacheKafkaUnavailable


@pytest.fixture
def tools() -> None:
    """Kafka's command-line tools (compat/kafka_tools.py) are at hand, or the test fails
    saying why."""
    try:
        kafka_tools.classpath()
    except ApacheKafkaUnavailable as exc:
        pytest.fail(f"Kafka's tools are unavailable: {exc}", pytrace=False)


@pytest.fixture(scope="module")
def apache_kafka(request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    """A module may set APACHE_KAFKA_OVERRIDES (server.properties entries) for its node."""
    work_dir: Path = tmp_path_factory.mktemp("apache-kafka")
    node = ApacheKafka(work_dir, overrides=getattr(request.module, "APACHE_KAFKA_OVERRIDES",
                                                   None))
    try:
        node.start()
    except ApacheKafkaUnavailable as exc:
        pytest.fail(f"Apache Kafka (the reference broker) is unavailable: {exc}",
                    pytrace=False)
    proc = node.proc
    try:
        yield node
    finally:
        node.stop()
    # Never left running: stop() ended the JVM (an error of this fixture otherwise).
    assert proc is not None and proc.returncode is not None, "the Kafka JVM outlived stop()"
