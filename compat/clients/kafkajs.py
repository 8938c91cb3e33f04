"""kafkajs (Node): producer, consumer (always a group member), admin, driven through compat/js
(a Node program shared by every cell of a run: `compat.helper_process`).

kafkajs ships gzip only; snappy comes from the pure-JavaScript kafkajs-snappy plug-in. Its
LZ4 and zstd plug-ins (kafkajs-lz4, @kafkajs/zstd) wrap native addons that build with
node-gyp or download prebuilt binaries, which a machine here cannot: N/A. kafkajs reads
without a group only by joining a throw-away one, so reading to the end reports what that
group committed on stopping.
"""
from __future__ import annotations

from compat.helper_process import Helper, HelperAdapter, node_program

NATIVE_CODEC = ("kafkajs ships gzip only and its {codec} plug-in wraps a native addon "
                "(node-gyp build or a downloaded prebuilt binary), not installable here")


class KafkaJS(HelperAdapter):
    name = "kafkajs"
    order = 60
    tool = "node"
    helper = Helper("kafkajs", lambda: ["node", str(node_program())])

    def cannot(self, feature: str) -> str | None:
        if feature == "null-header-value":
            return "kafkajs's headers are an object of Buffer or string values: no null"
        if feature in ("codec:lz4", "codec:zstd"):
            return NATIVE_CODEC.format(codec=feature.split(":")[1])
        return None


ADAPTER = KafkaJS()
