"""The mixed-group questions (mixed_group_answers.py) under
`group.consumer.migration.policy=upgrade`, asked of Apache Kafka 4.1.1 and of pybroker alike:
the upgrade is served, the downgrade refused (the group stays a consumer group of its
classic member)."""
from __future__ import annotations

from pathlib import Path

from compat.apache_kafka import ApacheKafka
from tests.reference.mixed_group_answers import compare

APACHE_KAFKA_OVERRIDES = {"group.consumer.migration.policy": "upgrade"}


def test_mixed_groups_as_kafka_answers_under_policy_upgrade(apache_kafka: ApacheKafka,
                                                           tmp_path: Path) -> None:
    assert compare(apache_kafka, tmp_path, APACHE_KAFKA_OVERRIDES) == ("consumer", "consumer")
