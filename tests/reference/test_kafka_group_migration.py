"""Online migration between classic and consumer groups on Apache Kafka 4.1.1 and on pybroker
side by side, under Kafka's default `group.consumer.migration.policy=bidirectional` (issue #33
item 2): the same raw requests to both, the answers compared (the questions:
tests/reference/mixed_group_answers.py).
"""
from __future__ import annotations

from pathlib import Path

from compat.apache_kafka import ApacheKafka
from tests.reference.mixed_group_answers import compare


def test_mixed_groups_as_kafka_answers_under_policy_bidirectional(
        apache_kafka: ApacheKafka, tmp_path: Path) -> None:
    assert compare(apache_kafka, tmp_path, {}) == ("consumer", "classic")
