"""Kafka 4.1.1's kafka-topics --describe against a standalone node of num.cores=2 brokers
(pybroker/node): the tool, bootstrapped on the node's first port, shows the topic's leaders
spread over the node's two brokers, 0 and 1000."""
from __future__ import annotations

import re
from pathlib import Path

from compat import kafka_tools
from tests.integration.node_process import node


def test_kafka_topics_describe_shows_leaders_spread_over_the_nodes_brokers(
        tools: None, tmp_path: Path) -> None:
    broker = node(tmp_path / "logs")
    try:
        b = broker.bootstrap
        created = kafka_tools.run("kafka-topics", ["--bootstrap-server", b, "--create",
                                                   "--topic", "spread", "--partitions", "4"])
        assert created.returncode == 0, created.stderr
        described = kafka_tools.run("kafka-topics", ["--bootstrap-server", b, "--describe",
                                                     "--topic", "spread"])
        assert described.returncode == 0, described.stderr
        leaders = {int(p): int(lead) for p, lead in re.findall(
            r"Partition: (\d+)\s+Leader: (\d+)", described.stdout)}
        assert sorted(leaders) == [0, 1, 2, 3], described.stdout
        assert set(leaders.values()) == {0, 1000}, described.stdout
    finally:
        broker.stop()
