"""sarama (IBM/sarama: SyncProducer, Consumer, ConsumerGroup, ClusterAdmin), driven through
compat/go (the same Go program as franz-go, in its sarama mode: `compat.helper_process`).
"""
from __future__ import annotations

from compat.helper_process import Helper, HelperAdapter, go_binary


class Sarama(HelperAdapter):
    name = "sarama"
    order = 55
    tool = "go"
    helper = Helper("sarama", lambda: [str(go_binary()), "sarama"])


ADAPTER = Sarama()
