"""Kafka Streams (4.1.1) runs Kafka's WordCount topology against pybroker (issue #14).

The topology is Kafka's WordCountDemo (compat/streams/src/.../WordCount.java): lines in,
`groupBy` word (a repartition topic), `count` into a store (a changelog topic), counts out.
Streams creates its internal topics itself through CreateTopics, with the configs it wants:
a compacted changelog, a repartition topic with `cleanup.policy=delete` and as many
partitions as the input. Each test starts its own application (a JVM of its own: about 5 s
of start-up on a loaded machine); the broker is one pybroker process for the module.
"""
from __future__ import annotations

import collections
import re
from pathlib import Path
from typing import Iterator

import pytest

from compat.streams import Jvm
from pybroker.testing import Broker
from tests.compat.eco_helpers import (consume_until, counts_of, partition_count, produce,
                                      require_classpath, topic_config, wait_for_topics)

WORDCOUNT = "pybroker.compat.streams.WordCount"

FIRST = ["all streams lead to kafka", "hello kafka streams", "join kafka summit"]
SECOND = ["kafka streams counts words", "streams of words lead to counts", "hello again"]


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    require_classpath()
    # A process, so that the suite's PYBROKER_NUM_CORES=2 runs this against a node of two
    # brokers, as the default of all cores will (issue #29 item 3); one broker otherwise.
    with Broker(process=True, num_partitions=1, group_initial_rebalance_delay_ms=0,
                offsets_topic_num_partitions=3, transaction_state_log_num_partitions=3) as b:
        yield b


def expected(lines: list[str]) -> dict[str, int]:
    return dict(collections.Counter(w for line in lines for w in re.split(r"\W+", line.lower())
                                    if w))


def wordcount(work: Path, name: str, broker: Broker, app: str, guarantee: str,
              state_dir: Path) -> Jvm:
    """A killed instance leaves its group after the session timeout and its open
    transaction is aborted after the transaction timeout: both shortened from Streams'
    45 s and 10 s, so a restart resumes in seconds."""
    return Jvm(work, name, WORDCOUNT, [broker.bootstrap, app, f"{app}-in", f"{app}-out",
                                       guarantee, state_dir, "session.timeout.ms=6000",
                                       "heartbeat.interval.ms=1000",
                                       "producer.transaction.timeout.ms=5000"]).start()


def test_wordcount_at_least_once_with_its_own_internal_topics(broker: Broker,
                                                               tmp_path: Path) -> None:
    app = "wc-alos"
    broker.create_topic(f"{app}-in", partitions=2)
    broker.create_topic(f"{app}-out")
    produce(broker.bootstrap, f"{app}-in", FIRST, keys=[str(i) for i in range(len(FIRST))])
    want = expected(FIRST)
    streams = wordcount(tmp_path, "wordcount", broker, app, "at_least_once", tmp_path / "state")
    try:
        streams.wait_for(r"STATE RUNNING", 60)
        records = consume_until(broker.bootstrap, f"{app}-out",
                                lambda rs: counts_of(rs) == want)
        assert counts_of(records) == want
    finally:
        streams.stop()
    assert streams.proc is None

    changelog, repartition = f"{app}-counts-changelog", f"{app}-counts-repartition"
    assert {changelog, repartition} <= wait_for_topics(broker.bootstrap, set())
    assert topic_config(broker.bootstrap, changelog)["cleanup.policy"] == "compact"
    assert topic_config(broker.bootstrap, repartition)["cleanup.policy"] == "delete"
    # Streams sizes both from the input: one task per input partition.
    assert partition_count(broker.bootstrap, repartition) == 2
    assert partition_count(broker.bootstrap, changelog) == 2
    # Its application id is its consumer group: offsets were committed there.
    assert "Exception" not in streams.output(), streams.tail()


def test_wordcount_exactly_once_v2_resumes_after_a_kill(broker: Broker, tmp_path: Path) -> None:
    """Killed (SIGKILL, nothing committed or closed) midway through the second lines, as soon
    as a read_uncommitted reader sees one of their counts (its transaction may still be open),
    then restarted on a fresh state directory: the store is restored from its changelog and
    the counts continue from the committed ones. Under exactly_once_v2 a read_committed reader
    never sees a count above the final one (nothing counted twice)."""
    app = "wc-eos"
    broker.create_topic(f"{app}-in", partitions=2)
    broker.create_topic(f"{app}-out")
    produce(broker.bootstrap, f"{app}-in", FIRST, keys=[str(i) for i in range(len(FIRST))])
    first = wordcount(tmp_path, "wordcount-1", broker, app, "exactly_once_v2",
                      tmp_path / "state-1")
    try:
        first.wait_for(r"STATE RUNNING", 60)
        records = consume_until(broker.bootstrap, f"{app}-out",
                                lambda rs: counts_of(rs) == expected(FIRST), read_committed=True)
        assert counts_of(records) == expected(FIRST)
        produce(broker.bootstrap, f"{app}-in", SECOND, keys=[str(i) for i in range(len(SECOND))])
        seen = len(records)
        consume_until(broker.bootstrap, f"{app}-out", lambda rs: len(rs) > seen, timeout=30)
    finally:
        first.kill()

    want = expected(FIRST + SECOND)
    second = wordcount(tmp_path, "wordcount-2", broker, app, "exactly_once_v2",
                       tmp_path / "state-2")
    try:
        second.wait_for(r"STATE RUNNING", 90)
        records = consume_until(broker.bootstrap, f"{app}-out",
                                lambda rs: counts_of(rs) == want, read_committed=True)
    finally:
        second.stop()
    assert counts_of(records) == want
    over = [(k, v) for k, v in ((k.decode(), int.from_bytes(v, "big")) for k, v in records)
            if v > want[k]]
    assert not over, f"counted twice: {over}"
