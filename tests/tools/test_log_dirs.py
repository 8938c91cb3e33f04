"""kafka-log-dirs: each replica's size per log dir, in Kafka's JSON."""
from __future__ import annotations

import json

from compat import wire
from pybroker.tools import console_producer, log_dirs, topics


def test_describe_prints_each_partitions_size_as_kafka_does(tool, bootstrap, name) -> None:
    t, other = name("logdirs"), name("logdirs")
    for topic in (t, other):
        assert tool(topics.main, "--bootstrap-server", bootstrap, "--create", "--topic", topic,
                    "--partitions", "2").rc == 0
    assert tool(console_producer.main, "--bootstrap-server", bootstrap, "--topic", t,
                "--property", "parse.key=true", stdin=b"k\tsome value\nk\tanother\n").rc == 0
    r = tool(log_dirs.main, "--bootstrap-server", bootstrap, "--describe", "--topic-list", t)
    assert r.rc == 0, r.err
    lines = r.out.splitlines()
    assert lines[:2] == ["Querying brokers for log directories information",
                         "Received log directory information from brokers 0"]
    described = json.loads(lines[2])
    assert described["version"] == 1 and [b["broker"] for b in described["brokers"]] == [0]
    (log_dir,) = described["brokers"][0]["logDirs"]
    assert log_dir["error"] is None and log_dir["logDir"]
    sizes = {p["partition"]: p["size"] for p in log_dir["partitions"]}
    want = {f"{t}-{p}": sum(h.size for h, _ in wire.batches(bootstrap, t, p)) for p in (0, 1)}
    assert sizes == want and sorted(want.values())[1] > 0, (sizes, want)
    assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in log_dir["partitions"])
    everything = tool(log_dirs.main, "--bootstrap-server", bootstrap, "--describe")
    parts = {p["partition"] for p in json.loads(everything.out.splitlines()[2])
             ["brokers"][0]["logDirs"][0]["partitions"]}
    assert {f"{other}-0", f"{other}-1", f"{t}-0"} <= parts


def test_unknown_broker_and_missing_describe(tool, bootstrap) -> None:
    r = tool(log_dirs.main, "--bootstrap-server", bootstrap, "--describe", "--broker-list", "0,7")
    assert r.rc == 1 and r.out == ""
    assert r.err == ("ERROR: The given brokers do not exist from --broker-list: 7. Current "
                     "existent brokers: 0\n")
    r = tool(log_dirs.main, "--bootstrap-server", bootstrap)
    assert r.rc == 1 and "describe" in r.err
