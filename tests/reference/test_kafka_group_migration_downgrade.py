"""The mixed-group questions (mixed_group_answers.py) under
`group.consumer.migration.policy=downgrade`, asked of Apache Kafka 4.1.1 and of pybroker alike:
the upgrade is refused (GROUP_ID_NOT_FOUND; the classic group carries on), the
classic JoinGroup into a consumer group still served."""
from __future__ import annotations

from pathlib import Path

from compat.apache_kafka import ApacheKafka
from tests.reference.mixed_group_answers import compare

APACHE_KAFKA_OVERRIDES = {"group.consumer.migration.policy": "downgrade"}


def test_mixed_groups_as_kafka_answers_under_policy_downgrade(apache_kafka: ApacheKafka,
                                                             tmp_path: Path) -> None:
    assert compare(apache_kafka, tmp_path, APACHE_KAFKA_OVERRIDES) == ("classic", "classic")
