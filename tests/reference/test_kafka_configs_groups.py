"""Kafka 4.1.1's kafka-configs against a group's configs on pybroker (the GROUP config
resource): --alter --add-config through IncrementalAlterConfigs, --describe --all through
DescribeConfigs, --describe through ListConfigResources first, and a value outside the
broker's bounds refused in Kafka's words. A broker process, so that the suite's
PYBROKER_NUM_CORES=2 runs the tool against a node of two brokers (issue #29 item 3)."""
from __future__ import annotations

from pathlib import Path

import pytest

from compat import kafka_tools
from pybroker.testing import Broker


def test_kafka_configs_alters_and_describes_a_group(tools: None, tmp_path: Path) -> None:
    with Broker(process=True, log_dir=tmp_path / "logs") as broker:
        group = ["--bootstrap-server", broker.bootstrap, "--entity-type", "groups",
                 "--entity-name", "sg"]
        done = kafka_tools.run("kafka-configs", [*group, "--alter", "--add-config",
                                                 "share.auto.offset.reset=earliest"])
        assert (done.returncode, done.stdout) == (0, "Completed updating config for group sg.\n")
        # without --all the tool asks ListConfigResources whether the group has configs
        dynamic = kafka_tools.run("kafka-configs", [*group, "--describe"])
        assert (dynamic.returncode, dynamic.stdout) == (0, (
            "Dynamic configs for group sg are:\n  share.auto.offset.reset=earliest "
            "sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:share.auto.offset.reset=earliest, "
            "DEFAULT_CONFIG:share.auto.offset.reset=latest}\n")), dynamic.stderr
        described = kafka_tools.run("kafka-configs", [*group, "--describe", "--all"])
        assert described.returncode == 0, described.stderr
        lines = described.stdout.splitlines()
        assert lines[0] == "All configs for group sg are:"
        assert "  share.auto.offset.reset=earliest sensitive=false synonyms={" \
            "DYNAMIC_GROUP_CONFIG:share.auto.offset.reset=earliest, " \
            "DEFAULT_CONFIG:share.auto.offset.reset=latest}" in lines
        assert "  consumer.session.timeout.ms=45000 sensitive=false synonyms={" \
            "DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}" in lines
        refused = kafka_tools.run("kafka-configs", [*group, "--alter", "--add-config",
                                                    "consumer.session.timeout.ms=1000"])
        assert refused.returncode == 1
        assert "InvalidConfigurationException: consumer.session.timeout.ms must be greater " \
            "than or equal to group.consumer.min.session.timeout.ms" in refused.stderr
