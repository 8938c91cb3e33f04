"""sarama (IBM/sarama: SyncProducer, Consumer, ConsumerGroup, ClusterAdmin), driven through
compat/go (the same Go program as franz-go, in its sarama mode: `compat.helper_process`).
"""
from __future__ import annotations

from typing import NoReturn

from compat.base import Got, NotApplicable, Rec, Settings
from compat.helper_process import Helper, HelperAdapter, go_binary

NO_POSITION = ("sarama exposes no consumer position: the end reached is the high watermark of "
               "its last fetch, once no more records come")

REFERENCE_HASH = ("keys placed by sarama's NewReferenceHashPartitioner (FNV-1a as Kafka's "
                  "reference client signs it): the default NewHashPartitioner's abs() of the "
                  "signed hash puts key-000..key-399 on only 67 of 100 partitions")


NO_SHARE_CONSUMER = ("sarama v1.61.1 has no share consumer: it defines none of the "
                     "share-group requests (its request table ends at "
                     "ConsumerGroupDescribe, API key 69)")


class Sarama(HelperAdapter):
    name = "sarama"
    order = 65
    tool = "go"
    helper = Helper("sarama", lambda: [str(go_binary()), "sarama"])

    def produce(self, bootstrap: str, topic: str, recs: list[Rec], *, codec: str = "none",
                idempotent: bool = False, config: Settings = None) -> None:
        if all(r.partition is None for r in recs):
            self.note(REFERENCE_HASH)
        super().produce(bootstrap, topic, recs, codec=codec, idempotent=idempotent,
                        config=config)

    def consume_to_end(self, bootstrap: str, topic: str, partitions: list[int], count: int,
                       isolation: str) -> tuple[list[Got], dict[int, int]]:
        self.note(NO_POSITION)
        return super().consume_to_end(bootstrap, topic, partitions, count, isolation)

    def share_client(self) -> NoReturn:
        raise NotApplicable(NO_SHARE_CONSUMER)


ADAPTER = Sarama()
