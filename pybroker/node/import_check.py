"""Whether a node's start has a single broker's metadata to import (metadata_import.py), told
from the first log dir's names alone.

The importer reads those files with the readers of the modules that write them (the cluster's
metadata, ACLs, SCRAM credentials, producer ids), which bring in the storage layer and trio;
a node's supervisor serves nothing with either, and most starts (a fresh dir, a node's
restart) have nothing to import. So the supervisor asks here first and imports the importer
only when this says yes. The names are spelled out rather than imported from their writers,
which is the cost this module avoids; tests/node/test_metadata_import.py holds them equal to
the writers' (`SOURCES`, `META_PROPERTIES`)."""
from __future__ import annotations

from pathlib import Path

# The node's metadata store, in its first log dir (a name no partition dir can have: the log
# manager skips it).
METADATA_DIR = "__node-metadata"
# A single broker's files of metadata in its first log dir, and its meta.properties.
SINGLE_BROKER_FILES = frozenset({"pybroker-metadata.json", "pybroker-acls.json",
                                 "pybroker-scram-credentials.json", "producer-ids"})
META_PROPERTIES = "meta.properties"


def import_pending(log_dir: Path) -> bool:
    """Whether `metadata_import.import_single_broker` has anything to do in `log_dir`: with
    the node's store there, a file an interrupted import left in place; without it, a single
    broker's files or its meta.properties (its cluster id alone must be imported too)."""
    try:
        names = {entry.name for entry in log_dir.iterdir()}
    except FileNotFoundError:
        return False
    if METADATA_DIR in names:
        return bool(names & SINGLE_BROKER_FILES)
    return bool(names & (SINGLE_BROKER_FILES | {META_PROPERTIES}))
