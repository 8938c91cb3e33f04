"""The mixed-group questions of test_kafka_group_migration.py under
`group.consumer.migration.policy=downgrade`, asked of Apache Kafka 4.1.1 and of pybroker alike:
the upgrade is refused (GROUP_ID_NOT_FOUND; the classic group carries on), the
classic JoinGroup into a consumer group still served."""
from __future__ import annotations

from pathlib import Path

from compat.apache_kafka import ApacheKafka
from pybroker.testing.broker import broker_in_thread
from tests.reference.test_kafka_group_migration import _answers

APACHE_KAFKA_OVERRIDES = {"group.consumer.migration.policy": "downgrade"}


def test_mixed_groups_as_kafka_answers_under_policy_downgrade(apache_kafka: ApacheKafka,
                                                           tmp_path: Path) -> None:
    kafka = _answers(apache_kafka.bootstrap)
    with broker_in_thread(tmp_path / "logs", **APACHE_KAFKA_OVERRIDES) as info:
        ours = _answers(info.bootstrap)
    assert ours == kafka
