"""The one registry of request handlers; ApiVersions is computed from it.

A module of this package serves one API (or a close family) and is named for it; a module
whose name starts with `_` is a helper the handlers share (`_base`, `_authz`, ...) and never
a handler. The builder holds the line: it refuses a helper's name and anything registered
that is not a `Handler`, and tests/test_handler_registry.py checks that every module without
the underscore is registered.

The helpers are private to this package (an import-linter `private_modules` contract): what
the rest of the broker needs of them, the composition root's `Services` and dispatch's
`RequestContext` and `Handler`, it imports from here."""
from __future__ import annotations

import importlib
from collections.abc import Iterable

from pybroker.handlers._base import Handler, RequestContext, Services

__all__ = ["REGISTRY", "Handler", "RequestContext", "Services", "build_registry"]

# Modules under pybroker.handlers, each exposing HANDLER (or HANDLERS for a family).
_MODULES = (
    "api_versions", "metadata", "produce", "fetch", "list_offsets", "init_producer_id",
    "create_topics", "delete_topics", "create_partitions", "delete_records",
    "describe_configs", "alter_configs", "incremental_alter_configs",
    "list_config_resources", "describe_cluster",
    "describe_log_dirs", "describe_producers", "elect_leaders", "offset_for_leader_epoch",
    "find_coordinator", "join_group", "sync_group", "heartbeat", "leave_group",
    "offset_commit", "offset_fetch", "offset_delete", "describe_groups", "list_groups",
    "delete_groups", "alter_partition_reassignments", "list_partition_reassignments",
    "add_partitions_to_txn", "add_offsets_to_txn", "end_txn", "write_txn_markers",
    "describe_transactions", "list_transactions", "txn_offset_commit", "acls",
    "sasl_handshake", "sasl_authenticate", "scram_credentials",
    "describe_client_quotas", "alter_client_quotas", "update_features",
    "consumer_group_heartbeat", "consumer_group_describe",
    "share_group_heartbeat", "share_group_describe", "share_fetch", "share_acknowledge",
    "describe_share_group_offsets", "alter_share_group_offsets", "delete_share_group_offsets",
    "share_group_state",
)


def build_registry(modules: Iterable[str] = _MODULES) -> dict[int, Handler]:
    """The handlers of `modules` by API key. Fails at import, naming the module, on a helper
    (`_name`), on a module that registers something other than a `Handler`, and on a key
    registered twice."""
    registry: dict[int, Handler] = {}
    for name in modules:
        if name.startswith("_"):
            raise RuntimeError(f"pybroker.handlers.{name} is a helper (a leading underscore), "
                               "not a handler")
        module = importlib.import_module(f"pybroker.handlers.{name}")
        handlers = getattr(module, "HANDLERS", None) or (module.HANDLER,)
        for handler in handlers:
            if not isinstance(handler, Handler):
                raise TypeError(f"pybroker.handlers.{name} registers {handler!r}, "
                                "which is not a Handler")
            if handler.api_key in registry:
                raise RuntimeError(f"API key {handler.api_key} registered twice ({name})")
            registry[handler.api_key] = handler
    return dict(sorted(registry.items()))


REGISTRY: dict[int, Handler] = {}
REGISTRY.update(build_registry())
