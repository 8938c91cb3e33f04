"""kafkajs (Node): producer, consumer (always a group member), admin, driven through compat/js
(a Node program shared by every cell of a run: `compat.helper_process`).

kafkajs ships gzip only; snappy comes from the pure-JavaScript kafkajs-snappy plug-in. Its
LZ4 and zstd plug-ins (kafkajs-lz4, @kafkajs/zstd) wrap native addons (node-gyp or downloaded
prebuilt binaries), so compat/js/codecs.js registers its own: LZ4 frames around lz4js's block
decoder (the frame reader and block writer are ours: lz4js misreads block checksums and
writes blocks the reference decoder refuses) and zstd from @bokuweb/zstd-wasm (WebAssembly).

kafkajs reads without a group only by joining a throw-away one, so reading to the end reports
what that group committed on stopping. It reads with eachBatch: kafkajs then resolves each
batch's last offset, transaction markers included; with eachMessage it resolves only the
records it hands out, so a marker fetched together with data stayed uncommitted (11 of 12 in
`transactions`).
The position reported is the larger of that commit and the offset after the last one fetched;
a cell notes it when the two differ.

What kafkajs 2.2.4 lacks (checked in its sources, `node_modules/kafkajs/src`): static
membership, cooperative rebalancing and DescribeLogDirs; those cells are N/A with the reason.
"""
from __future__ import annotations

from typing import NoReturn

from compat.base import Got, Member, NotApplicable
from compat.helper_process import Helper, HelperAdapter, got_from, node_program

NO_STATIC = ("kafkajs 2.2.4 has no group.instance.id: no consumer option sets one and "
             "Broker.joinGroup sends none (only its JoinGroup v5 encoder knows the field)")

NO_COOPERATIVE = ("kafkajs 2.2.4 has no cooperative rebalancing: its consumer rejoins eagerly "
                  "(every partition reassigned), its subscription carries no owned partitions "
                  "(MemberMetadata: version, topics, userData) and it ships the roundRobin "
                  "assigner only")

NO_LOG_DIRS = ("kafkajs 2.2.4 has no DescribeLogDirs: its admin has no such call and its "
               "protocol table maps API key 35 to noImplementedRequestDefinitions")

TIMESTAMPS_READ_BACK = ("kafkajs's fetchTopicOffsetsByTimestamp gives offsets only (the high "
                        "watermark when no record is at or after the time, reported as none): "
                        "timestamps read back")


NO_SHARE_CONSUMER = ("kafkajs 2.2.4 has no share consumer: its consumer joins classic "
                     "groups only, and its protocol table stops at API key 46 "
                     "(ListPartitionReassignments)")


class KafkaJS(HelperAdapter):
    name = "kafkajs"
    order = 70
    tool = "node"
    helper = Helper("kafkajs", lambda: ["node", str(node_program())])

    def cannot(self, feature: str) -> str | None:
        if feature == "null-header-value":
            return "kafkajs's headers are an object of Buffer or string values: no null"
        return None

    def consume_to_end(self, bootstrap: str, topic: str, partitions: list[int], count: int,
                       isolation: str) -> tuple[list[Got], dict[int, int]]:
        out = self._call("consume", bootstrap=bootstrap, topic=topic, partitions=partitions,
                         start="beginning", count=count, isolation=isolation, to_end=True)
        positions = {int(p): int(o) for p, o in out["positions"].items()}
        committed = {int(p): int(o) for p, o in out["committed"].items()}
        if committed != positions:
            self.note(f"kafkajs fetched past the transaction markers (to {positions}) but "
                      f"committed only {committed}: it commits the offsets of records it hands "
                      "out, and skips a marker only when a fetch holds nothing else")
        return [got_from(d) for d in out["records"]], positions

    def start_member_as(self, bootstrap: str, topic: str, group: str, *,
                        cooperative: bool = False, instance_id: str | None = None) -> Member:
        raise NotApplicable(NO_COOPERATIVE if cooperative else NO_STATIC)

    def offsets_for_times(self, bootstrap: str, topic: str,
                          times: dict[int, int]) -> dict[int, tuple[int, int] | None]:
        found = self._call("offsets_for_times", bootstrap=bootstrap, topic=topic,
                           times={str(p): t for p, t in times.items()})
        out: dict[int, tuple[int, int] | None] = {}
        for p, offset in found.items():
            if offset is None:
                out[int(p)] = None
            else:
                (at,) = self.consume_from(bootstrap, topic, int(p), int(offset), 1)
                out[int(p)] = (int(offset), at.timestamp)
        self.note(TIMESTAMPS_READ_BACK)
        return out

    def log_dir_sizes(self, bootstrap: str, topic: str) -> dict[int, int]:
        raise NotApplicable(NO_LOG_DIRS)

    def share_client(self) -> NoReturn:
        raise NotApplicable(NO_SHARE_CONSUMER)


ADAPTER = KafkaJS()
