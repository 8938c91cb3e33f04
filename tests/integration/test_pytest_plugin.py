"""The pytest plugin (pybroker/testing/pytest_plugin.py) in a user's test run: fixtures, the config
option, the broker log on failure. Run in-process by pytester with plugin autoloading off, so
the result is the same whether or not this environment has the `pytest11` entry point
installed (tests/test_packaging.py checks the entry point itself, from a built wheel)."""
from __future__ import annotations

import os
import re

import pytest

from tests.helpers import ROOT
from tests.python_envs import quixstreams_dir

pytestmark = pytest.mark.in_process(
    "tests the pytest plugin, whose kafka_broker is a thread broker")

pytest_plugins = ["pytester"]

USER_TESTS = '''
import uuid
from confluent_kafka import Consumer, Producer

seen = []

def test_topic_round_trip(kafka_bootstrap, kafka_topic):
    seen.append(kafka_topic)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(kafka_topic, b"hello")
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "g",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([kafka_topic])
    message = None
    for _ in range(30):
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            break
    consumer.close()
    assert message.value() == b"hello"

def test_each_test_has_its_own_topic(kafka_broker, kafka_topic):
    assert kafka_topic not in seen
    assert kafka_topic.startswith("test_each_test_has_its_own_topic-")
    topics = kafka_broker.server_info.broker.services.metadata.image.topics
    assert kafka_topic in topics

def test_config_option_reaches_the_broker(kafka_broker):
    assert kafka_broker.server_info.broker.services.config.num_partitions == 4

def test_fails_with_the_broker_log(kafka_broker, kafka_topic):
    assert False, "deliberate"
'''


@pytest.fixture
def user_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")

    def run(source: str, *args: str) -> pytest.RunResult:
        pytester.makepyfile(test_user=source)
        return pytester.runpytest_inprocess("-p", "pybroker.testing.pytest_plugin",
                                            "-p", "no:cacheprovider", *args)
    return run


def test_fixtures_option_and_log_on_failure(user_run) -> None:
    result = user_run(USER_TESTS, "--kafka-broker-config", "num.partitions=4")
    result.assert_outcomes(passed=3, failed=1)
    out = result.stdout.str()
    # Only the failing test gets the section, with what the broker did for it.
    assert out.count("pybroker broker log") == 1
    assert "created topic test_fails_with_the_broker_log-" in out


def test_bad_config_option_is_a_usage_error(user_run) -> None:
    result = user_run("def test_x(kafka_broker): pass", "--kafka-broker-config", "nokey")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--kafka-broker-config wants key=value" in result.stderr.str()


def test_kafka_cluster_runs_or_skips_with_a_reason(user_run) -> None:
    import pybroker.testing
    result = user_run("def test_c(kafka_cluster): assert kafka_cluster is not None", "-rs")
    if getattr(pybroker.testing, "Cluster", None) is None:
        result.assert_outcomes(skipped=1)
        assert "needs pybroker.testing.Cluster" in result.stdout.str()
    else:
        result.assert_outcomes(passed=1)


def docs_examples() -> dict[str, str]:
    """docs/TESTING.md's `# test_*.py` blocks by module name, as printed."""
    text = (ROOT / "docs" / "TESTING.md").read_text()
    return {m.group(1): block for block in re.findall(r"```python\n(.*?)```", text, re.S)
            if (m := re.match(r"# (test_\w+)\.py\n", block))}


def test_the_client_examples_of_docs_testing_run(user_run, pytester: pytest.Pytester) -> None:
    """docs/TESTING.md's `# test_*.py` blocks, as printed: the page says they were checked.
    Quix Streams' block runs in the next test, in an environment of its own."""
    examples = docs_examples()
    assert set(examples) == {"test_confluent", "test_kafka_python", "test_aiokafka",
                             "test_quixstreams", "test_faust"}
    del examples["test_quixstreams"]
    pytester.makepyfile(**examples)
    result = user_run("", "-W", "ignore::DeprecationWarning")
    result.assert_outcomes(passed=4)


def test_the_quix_streams_example_of_docs_testing_runs(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/TESTING.md's Quix Streams block, with what `pip install quixstreams` brings (its own
    confluent-kafka among them) first on the path of a pytest subprocess. Like
    tests/test_packaging.py it needs the package registry the first time, and fails, saying
    so, without it."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(quixstreams_dir()), str(ROOT)]))
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(test_quixstreams=docs_examples()["test_quixstreams"])
    result = pytester.runpytest_subprocess("-p", "pybroker.testing.pytest_plugin",
                                           "-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=1)


EXTERNAL_TESTS = '''
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

def test_external_broker(kafka_broker, kafka_bootstrap, kafka_topic):
    assert type(kafka_broker).__name__ == "ExternalBroker"
    assert kafka_bootstrap == kafka_broker.bootstrap
    # kafka_topic was created over the wire on the external broker, with a leader already:
    # one of its brokers (a node of num.cores > 1, or a cluster, has several).
    metadata = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(
        kafka_topic, timeout=10)
    partitions = metadata.topics[kafka_topic].partitions
    assert [p.leader in metadata.brokers for p in partitions.values()] == [True]
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(kafka_topic, b"over there")
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "g"})
    consumer.assign([TopicPartition(kafka_topic, 0, 0)])
    message = None
    for _ in range(30):
        message = consumer.poll(0.5)
        if message is not None:
            break
    consumer.close()
    assert message is not None and message.value() == b"over there"
    kafka_broker.create_topic(kafka_topic + "-3", partitions=3,
                              config={"cleanup.policy": "compact"})
    with pytest.raises(RuntimeError, match="needs a pybroker broker that this test run started"):
        kafka_broker.control("Produce", lambda request: None)
'''


def test_kafka_bootstrap_points_the_fixtures_at_an_external_broker(
        user_run, monkeypatch: pytest.MonkeyPatch) -> None:
    """--kafka-bootstrap and PYBROKER_TEST_BOOTSTRAP: the fixtures use a broker this run did
    not start (here a pybroker subprocess, standing in for Apache Kafka) and start none."""
    from confluent_kafka.admin import AdminClient

    from pybroker.testing import Broker

    with Broker(process=True) as external:
        result = user_run(EXTERNAL_TESTS, "--kafka-bootstrap", external.bootstrap)
        result.assert_outcomes(passed=1)
        monkeypatch.setenv("PYBROKER_TEST_BOOTSTRAP", external.bootstrap)
        result = user_run(EXTERNAL_TESTS)
        result.assert_outcomes(passed=1)
        topics = AdminClient({"bootstrap.servers": external.bootstrap}).list_topics(
            timeout=10).topics
    made = [t for t in topics if t.startswith("test_external_broker-")]
    assert len(made) == 4  # two runs, each its kafka_topic and a three-partition one
    assert sorted(len(topics[t].partitions) for t in made) == [1, 1, 3, 3]


@pytest.mark.parametrize("args, message", [
    (["--kafka-bootstrap", "localhost"], "--kafka-bootstrap wants HOST:PORT"),
    (["--kafka-bootstrap", "localhost:9092", "--kafka-broker-config", "num.partitions=2"],
     "with --kafka-bootstrap it starts none"),
])
def test_bad_kafka_bootstrap_is_a_usage_error(user_run, args: list[str], message: str) -> None:
    result = user_run("def test_x(kafka_broker): pass", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()
