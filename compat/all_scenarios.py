"""Every matrix scenario, registered: the classic ones (`compat/scenarios.py`), the consumer
group protocol's (`compat/consumer_scenarios.py`, which builds on the first module's helpers)
and the share groups' (`compat/share_group_scenarios.py`).

Why a module of its own: the consumer and share scenarios import `compat.scenarios`, so that
module cannot import them back to register them without a cycle; whoever runs scenarios
imports `SCENARIOS` from here and gets every set.
"""
from __future__ import annotations

import compat.consumer_scenarios  # noqa: F401  (registers its scenarios in SCENARIOS)
import compat.share_group_scenarios  # noqa: F401  (registers its scenarios in SCENARIOS)
from compat.scenarios import SCENARIOS, Scenario

__all__ = ["SCENARIOS", "Scenario"]
