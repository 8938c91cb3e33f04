"""A package's public names, imported on first use (PEP 562) instead of with the package.

pybroker.client and pybroker.testing do this, each for a reason of its own that it states:
the broker imports a submodule of the client, and a test suite loads the testing kit's
pytest plugin, and neither must pay for the rest of the package when it does.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any, Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(namespace: dict[str, Any], exports: Mapping[str, tuple[str, ...]]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module `__getattr__` and `__dir__` of the package whose globals are `namespace`,
    serving `exports` (module -> the names it holds): a name is imported on its first
    lookup and stored in `namespace`, so later lookups never come here again. A name not
    exported raises AttributeError, as for any module."""
    home = {name: module for module, names in exports.items() for name in names}
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(home))

    return __getattr__, __dir__
