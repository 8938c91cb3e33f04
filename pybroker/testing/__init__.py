"""Real brokers for test suites, and the pytest plugin: `Broker` (in-process on a thread, or
a subprocess), `BrokerProcess`, `broker_in_thread`, `Cluster` (brokers and a ZooKeeper),
`ExternalBroker` (a broker someone else runs), `Network` (namespaces a subprocess cluster
runs in, to partition it), and what request hooks answer with (`DELAY`,
`DROP`, `HookRequest`, `RequestHooks`): the hooks live beside dispatch, in
`pybroker.network`, which a test suite has no reason to name.

`from pybroker.testing import Broker` is the kit's import path. The names are imported on
first use (PEP 562), not here: the pytest plugin (`pybroker.testing.pytest_plugin`, entry
point `pytest11`) lives in this package, and a suite that loads it without using a fixture
must not pay for trio and the broker (tests/integration/test_start_cost.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pybroker.runtime.lazy_exports import lazy_exports

_EXPORTS = {
    "pybroker.testing.broker": ("Broker", "BrokerProcess", "ExternalBroker", "broker_config",
                                "broker_in_thread", "create_topic_over_wire"),
    "pybroker.testing.cluster": ("Cluster",),
    "pybroker.testing.network": ("Network",),
    "pybroker.network.request_hooks": ("DELAY", "DROP", "HookRequest", "RequestHooks"),
}
__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:  # what type checkers and readers see; not run
    from pybroker.testing.broker import (
        Broker, BrokerProcess, ExternalBroker, broker_config, broker_in_thread,
        create_topic_over_wire,
    )
    from pybroker.testing.cluster import Cluster
    from pybroker.testing.network import Network
    from pybroker.network.request_hooks import DELAY, DROP, HookRequest, RequestHooks

__all__ = ["broker_config", "broker_in_thread", "BrokerProcess", "Broker", "Cluster",
           "Network", "ExternalBroker", "DELAY", "DROP", "HookRequest", "RequestHooks"]
