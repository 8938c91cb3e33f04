"""The client adapters: one module per client, each defining `ADAPTER` (a `compat.base.Adapter`).

Adding a client is adding a module here; `all_adapters()` finds it.
"""
from __future__ import annotations

import importlib
import pkgutil

from compat.base import Adapter


def all_adapters() -> dict[str, Adapter]:
    """Every adapter, by column name, in column order."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        adapter = getattr(module, "ADAPTER", None)
        if isinstance(adapter, Adapter):
            found.append(adapter)
    found.sort(key=lambda a: (a.order, a.name))
    return {a.name: a for a in found}
