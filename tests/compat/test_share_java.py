"""Share groups (KIP-932) with Apache Kafka's own Java client 4.1.1, unmodified: issue #34's six
scenarios (compat/differential/share_scenarios.py) played by its KafkaShareConsumer, through
the compat adapter's JVM, against a pybroker process (the restart scenario kills it -9, the
killed-consumer one kills a JVM holding records). Each expectation is what Apache Kafka 4.1.1
gives the same client (compat/DIFFERENTIAL.md, "Java KafkaShareConsumer")."""
from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from compat.clients.java_client import JavaClient
from compat.differential import share_scenarios as share
from compat.differential.config import SHARED
from pybroker.testing import Broker

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def broker() -> Iterator[tuple[str, Callable[[], None]]]:
    """A pybroker process with the differential's share settings (2 s locks, a delivery
    limit of 3), share.version finalized, and its kill -9 and restart."""
    missing = JavaClient().missing()
    if missing:
        pytest.skip(missing)
    b = Broker(process=True, **{k.replace(".", "_"): v
                                for k, v in {**SHARED, **share.SETTINGS}.items()})
    b.start()
    try:
        share.enable_share_groups(b.bootstrap)

        def restart() -> None:
            b.kill()
            b.restart()
        yield b.bootstrap, restart
    finally:
        b.stop()


def play(name: str, broker: tuple[str, Callable[[], None]]) -> Any:
    bootstrap, restart = broker
    return share._jsonable(share.SCENARIOS[name](share.JAVA, bootstrap, restart))


def test_three_java_consumers_share_one_partition_and_read_each_record_once(
        broker: tuple[str, Callable[[], None]]) -> None:
    assert play("three consumers share one partition and read each record once", broker) == {
        "records produced": 300, "deliveries": 300, "every record once": True}


def test_a_record_the_java_consumer_releases_is_redelivered_once(
        broker: tuple[str, Callable[[], None]]) -> None:
    assert play("a released record is redelivered", broker) == {
        "deliveries (value, delivery count)": [["accept-me", 1], ["release-me", 1],
                                               ["release-me", 2]]}


def test_the_records_of_a_java_consumer_killed_holding_them_come_back_uncounted(
        broker: tuple[str, Callable[[], None]]) -> None:
    """The JVM is killed -9 holding a, b and c: its connections close, and the records come
    back at once with the delivery taken back (count 1), as Kafka 4.1.1 does."""
    assert play("a killed consumer's records come back", broker) == {
        "held by the killed consumer": ["a", "b", "c"],
        "then delivered (value, delivery count)": [["a", 1], ["b", 1], ["c", 1]]}


def test_a_record_the_java_consumer_rejects_never_comes_back(
        broker: tuple[str, Callable[[], None]]) -> None:
    assert play("reject archives a record", broker) == {
        "deliveries (value, delivery count)": [["accept-me", 1], ["reject-me", 1]]}


def test_the_delivery_limit_archives_a_record_the_java_consumer_keeps_releasing(
        broker: tuple[str, Callable[[], None]]) -> None:
    assert play("the delivery limit archives a poison record", broker) == {
        "deliveries (value, delivery count)": [["fine", 1], ["poison", 1], ["poison", 2],
                                               ["poison", 3]]}


def test_a_broker_restart_keeps_what_the_java_consumer_acknowledged(
        broker: tuple[str, Callable[[], None]]) -> None:
    """Accepted records stay done across the broker's kill -9 and restart; the released one
    comes again, its delivery count one higher."""
    assert play("a restart keeps the state", broker) == {
        "before the restart (value, delivery count)": [["done-1", 1], ["done-2", 1],
                                                       ["pending", 1]],
        "after it": [["pending", 2]]}
