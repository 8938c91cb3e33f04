"""The suite's tiers (issue #31): every test belongs to exactly one, by where it lives.

- fast: protocol, records, storage, coordinators, the controller's decisions, ACLs, SASL,
  replicas, the tools, and single brokers in-process; no JVM, no ZooKeeper, no browser, no
  client but the Python ones. The developer's loop: `bin/test --fast`, a few minutes.
- integration: stock clients against real brokers, TLS/SASL, broker subprocesses, the README's
  commands, a wheel in a fresh venv.
- cluster: ZooKeeper and three brokers, fault rounds, the cluster quickstarts.
- ecosystem: the JVM (Apache Kafka, its tools, Streams, Connect, MirrorMaker 2), the Go and JS
  clients of the compatibility matrix, chromium.
- bench: the performance guards, which compare against peer brokers.

The tier comes from the test file's path (`TIER_OF_PATH`, the longest matching prefix wins),
so a new test lands in its directory's tier without a marker; a file whose needs differ from
its directory's is named there. `-m fast` (what `bin/test --fast` passes) selects a tier.

`PYBROKER_NUM_CORES=2 bin/test --tier integration` runs a tier with every process broker of
the test kit (pybroker.testing.BrokerProcess) a node of two brokers (num.cores), and with it
every integration test's broker but those that say why they hold it in process
(tests/in_process.py); unset, they are one process each, and those thread brokers
(issue #29 item 3).
"""
from __future__ import annotations

from pathlib import PurePosixPath

TIERS = ("fast", "integration", "cluster", "ecosystem", "bench")

# Paths relative to tests/, directories ending in "/".
TIER_OF_PATH: dict[str, str] = {
    "": "fast",
    "integration/": "integration",
    "integration/test_status_page.py": "ecosystem",  # chromium renders the page
    "cluster/": "cluster",
    "cluster/test_memory_zk.py": "fast",  # in-memory trees, in-process: no ZooKeeper
    "compat/": "ecosystem",
    "reference/": "ecosystem",
    "bench/": "bench",
    "test_perf_guard.py": "bench",
    "test_bench_scaling.py": "bench",
    "test_packaging.py": "integration",  # pip builds a wheel and a venv
    "test_quickstart.py": "integration",  # a broker subprocess and the tools' processes
    "test_readme.py": "integration",
    "node/test_metadata_durability.py": "integration",  # kill -9 of a service process
    "node/test_metadata_import_crash.py": "integration",  # kill -9 of an import process
    "node/test_node_over_a_bare_dir.py": "integration",  # bin/pybroker-server processes
}


def tier_of(relative: str) -> str:
    """The tier of a test file, from its path relative to tests/."""
    path = PurePosixPath(relative).as_posix()
    best = max((prefix for prefix in TIER_OF_PATH
                if path == prefix or (prefix.endswith("/") or not prefix)
                and path.startswith(prefix)), key=len)
    return TIER_OF_PATH[best]
