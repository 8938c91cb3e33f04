"""Three Apache Kafka nodes in one KRaft quorum (compat/apache_kafka.py ApacheKafkaCluster),
the peer of the bench's `cluster` workload (issue #15 §3): here so that the cluster keeps
starting, replicating and stopping, whether or not anyone runs the bench."""
from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from compat.apache_kafka import ApacheKafkaCluster


def test_three_kafka_nodes_replicate_an_rf3_topic(tmp_path: Path) -> None:
    cluster = ApacheKafkaCluster(tmp_path / "kafka", nodes=3, heap="512m")
    assert len({n.work_dir for n in cluster.nodes}) == 3
    try:
        cluster.start()
        assert cluster.running and len(cluster.pids) == 3
        voters = {n.properties()["controller.quorum.voters"] for n in cluster.nodes}
        assert len(voters) == 1 and voters.pop().count("@") == 3  # one quorum of all three

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        assert sorted(b.id for b in admin.list_topics(timeout=30).brokers.values()) == [1, 2, 3]
        admin.create_topics([NewTopic("rf3", 2, 3, config={"min.insync.replicas": "2"})]
                            )["rf3"].result(60)
        deadline = time.monotonic() + 30
        while True:  # every node learns of the topic, then the followers join the ISR
            parts = admin.list_topics("rf3", timeout=30).topics["rf3"].partitions
            if (len(parts) == 2 and all(len(p.isrs) == 3 for p in parts.values())) \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert [sorted(parts[i].replicas) for i in sorted(parts)] == [[1, 2, 3], [1, 2, 3]]
        assert all(sorted(p.isrs) == [1, 2, 3] for p in parts.values())

        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        reports: list = []
        for i in range(10):
            producer.produce("rf3", b"r%d" % i, partition=i % 2,
                             on_delivery=lambda err, msg: reports.append(err))
        assert producer.flush(30) == 0 and reports == [None] * 10

        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "rf3",
                             "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition("rf3", p, 0) for p in (0, 1)])
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(got) < 10 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    got.append(msg.value())
        finally:
            consumer.close()
        assert sorted(got) == sorted(b"r%d" % i for i in range(10))
    finally:
        procs = [n.proc for n in cluster.nodes]
        cluster.stop()
    assert all(p is not None and p.returncode is not None for p in procs), \
        "a Kafka JVM outlived stop()"
