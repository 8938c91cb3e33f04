"""The pytest plugin of pybroker (entry point `pytest11`): a real Kafka broker for a test
suite, with no Docker and no JVM.

Fixtures: `kafka_broker` (one `pybroker.testing.Broker` per session), `kafka_bootstrap`
(its "127.0.0.1:PORT"), `kafka_topic` (a fresh topic per test on that broker, so tests stay
independent without a broker each) and `kafka_cluster` (a `pybroker.testing.Cluster` per
module, where this pybroker has one). `--kafka-broker-config key=value` sets broker config.
A failing test that used the broker gets a "pybroker broker log" section with its last lines.

`--kafka-bootstrap HOST:PORT` (or the environment's PYBROKER_TEST_BOOTSTRAP) points
`kafka_broker`, `kafka_bootstrap` and `kafka_topic` at a broker already running, Apache Kafka
or another pybroker, instead of starting one: the same tests, run against the real thing.

Nothing is imported from pybroker until a fixture is used: a suite that never asks for a
broker pays nothing, and runs where trio is absent.
"""
from __future__ import annotations

import os
import re
import uuid
from typing import TYPE_CHECKING, Any, Generator, Iterator

import pytest

if TYPE_CHECKING:
    import pluggy

_BROKER = pytest.StashKey[Any]()
LOG_LINES = 50
BOOTSTRAP_ENV = "PYBROKER_TEST_BOOTSTRAP"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pybroker", "a real Kafka broker for tests (pybroker)")
    group.addoption("--kafka-broker-config", action="append", default=[],
                    metavar="KEY=VALUE",
                    help="broker config of the kafka_broker and kafka_cluster fixtures, "
                         "Kafka's key names (num.partitions=3); repeatable")
    group.addoption("--kafka-bootstrap", default=None, metavar="HOST:PORT",
                    help="use the Kafka broker already running at HOST:PORT (Apache Kafka, "
                         "another pybroker) for kafka_broker, kafka_bootstrap and kafka_topic "
                         f"instead of starting one; default: ${BOOTSTRAP_ENV}")


def pytest_configure(config: pytest.Config) -> None:
    # A malformed option stops the run before any test.
    broker_config, external = _broker_config(config), _external_bootstrap(config)
    if external and broker_config:
        raise pytest.UsageError("--kafka-broker-config configures a broker the plugin starts; "
                                "with --kafka-bootstrap it starts none")


def _external_bootstrap(config: pytest.Config) -> str | None:
    value = config.getoption("kafka_bootstrap") or os.environ.get(BOOTSTRAP_ENV, "")
    value = value.strip()
    address = r"(\[[0-9a-fA-F:.]+\]|[^\s,:\[\]]+):\d+"  # host:port or [v6]:port
    if value and not re.fullmatch(rf"{address}(,{address})*", value):
        raise pytest.UsageError(f"--kafka-bootstrap wants HOST:PORT[,HOST:PORT...], "
                                f"not {value!r}")
    return value or None


def _broker_config(config: pytest.Config) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in config.getoption("kafka_broker_config"):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise pytest.UsageError(f"--kafka-broker-config wants key=value, not {item!r}")
        # Broker() takes keywords with `_` for `.`; Kafka's keys have no `_` of their own.
        pairs[key.strip().replace(".", "_")] = value.strip()
    return pairs


@pytest.fixture(scope="session")
def kafka_broker(pytestconfig: pytest.Config) -> Iterator[Any]:
    """A real broker in a background thread of the test process, for the whole session; or
    the external broker of --kafka-bootstrap (`pybroker.testing.ExternalBroker`)."""
    external = _external_bootstrap(pytestconfig)
    if external:
        from pybroker.testing import ExternalBroker
        yield ExternalBroker(external)
        return

    from pybroker.testing import Broker

    # Broker's keywords are Kafka's keys with `_` for `.`; --kafka-broker-config log.dir=D
    # lands on its log_dir (the same directory), and no key of Kafka's spells process, keep
    # or log_lines, the keywords that take no str.
    with Broker(**_broker_config(pytestconfig)) as broker:  # type: ignore[arg-type]
        pytestconfig.stash[_BROKER] = broker
        yield broker
    del pytestconfig.stash[_BROKER]


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker: Any) -> str:
    """The session broker's bootstrap servers: "127.0.0.1:PORT"."""
    return kafka_broker.bootstrap


@pytest.fixture
def kafka_topic(kafka_broker: Any, request: pytest.FixtureRequest) -> str:
    """A topic of one partition made for this test alone (named after it), on the session
    broker. For more partitions or configs, call `kafka_broker.create_topic` directly."""
    name = _topic_name(request.node.name)
    kafka_broker.create_topic(name)
    return name


def _topic_name(test_name: str) -> str:
    """Legal (Kafka allows [a-zA-Z0-9._-], 249 characters), readable in the broker's log,
    and unique even for reruns of the same test."""
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", test_name).strip("-.")[:200] or "test"
    return f"{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def kafka_cluster(pytestconfig: pytest.Config) -> Iterator[Any]:
    """Three brokers in this process (`pybroker.testing.Cluster`), for the module."""
    import pybroker.testing

    cluster_type = getattr(pybroker.testing, "Cluster", None)
    if cluster_type is None:
        pytest.skip("kafka_cluster needs pybroker.testing.Cluster, which this pybroker "
                    "does not have yet")
    with cluster_type(**_broker_config(pytestconfig)) as cluster:
        yield cluster


@pytest.hookimpl(hookwrapper=True)  # the old style: pytest 7 has no wrapper=True
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed and "kafka_broker" in getattr(item, "fixturenames", ()):
        broker = item.config.stash.get(_BROKER, None)
        if broker is not None:
            lines = broker.recent_log(LOG_LINES)
            if lines:
                report.sections.append(
                    ("pybroker broker log", "\n".join(line.rstrip("\n") for line in lines)))
