"""The cluster's feature levels (KIP-584): what this broker supports and what is finalized.

Theory of operation. A feature is a name with a level: the broker supports a range of levels
(`SUPPORTED`), and one level is finalized, which switches behaviour on: `group.version` 1
serves the KIP-848 consumer group protocol, `share.version` 1 the KIP-932 share groups.
ApiVersions v3+ advertises both (SupportedFeatures, FinalizedFeatures and their epoch), and an
API gated by a feature is advertised and served only while its level is finalized
(`Handler.feature`). `kafka-features.sh upgrade --feature share.version=1` changes a level
through UpdateFeatures (API 57), validated here by `plan_updates` as Kafka 4.1's
FeatureControlManager does: all or nothing.

The defaults are Kafka 4.1's for a new cluster: group.version 1, share.version 0 (share groups
are a preview there). `metadata.version` is fixed at 4.1-IV1: this broker has one metadata
format, so it is advertised (clients and tools read it) and never changes.

Where the levels are kept: a single broker's `FeatureStore` writes the finalized levels,
with the epoch, to `pybroker-features.json` in the first log dir. A cluster (ZooKeeper, or a
node's metadata service) keeps them once, as Kafka does, in the /feature znode
(`encode_znode`, Kafka's FeatureZNode JSON; the znode's version is the epoch): the broker that
takes an UpdateFeatures writes it with a compare-and-set on the version it planned from, and
plans again on the other broker's levels when it lost the race (`FeatureStore.update`), so no
update is lost; every broker watches /feature (zk_cache), so one upgrade is every broker's.
A broker's own file from before it joined is handed to the cluster at its start
(`ZkMetadataStore.adopt_features`).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Protocol

from protocol.errors import ErrorCode
from pybroker.storage.files import write_atomically

METADATA_VERSION = "metadata.version"
GROUP_VERSION = "group.version"
SHARE_VERSION = "share.version"

# 4.1-IV1, the newest production metadata.version of Kafka 4.1; 7 is 3.3-IV3, the oldest 4.x
# brokers accept.
METADATA_LEVEL = 27


@dataclass(frozen=True)
class Supported:
    min_level: int
    max_level: int
    default: int
    # Changed by UpdateFeatures; metadata.version is not.
    updatable: bool = True


SUPPORTED: Mapping[str, Supported] = {
    METADATA_VERSION: Supported(7, METADATA_LEVEL, METADATA_LEVEL, updatable=False),
    GROUP_VERSION: Supported(0, 1, 1),
    SHARE_VERSION: Supported(0, 1, 0),
}

FEATURES_FILE = "pybroker-features.json"


class UpgradeType(IntEnum):
    """UpdateFeatures v1+ `UpgradeType` (v0's AllowDowngrade maps to SAFE_DOWNGRADE)."""
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


@dataclass(frozen=True)
class Finalized:
    """The finalized levels and their epoch (FinalizedFeaturesEpoch): a level of 0 means the
    feature is off and is not listed, as Kafka lists none at 0."""

    levels: Mapping[str, int]
    epoch: int

    def level(self, name: str) -> int:
        return self.levels.get(name, 0)

    def listed(self) -> list[tuple[str, int]]:
        return sorted((n, v) for n, v in self.levels.items() if v > 0)


def defaults() -> Finalized:
    return Finalized({n: s.default for n, s in SUPPORTED.items()}, 0)


@dataclass(frozen=True)
class UpdateError:
    """Why an update was refused: Kafka's code and message (top level in v2, per feature
    in v0-1)."""

    code: ErrorCode
    message: str


def plan_updates(current: Finalized, updates: Iterable[tuple[str, int, UpgradeType]]
                 ) -> Finalized | UpdateError:
    """The levels after `updates` (name, level, type), or why none of them applies.

    Kafka's rules: an unknown feature, a level outside the supported range, a lower level
    asked as an UPGRADE, a change of metadata.version and a feature named twice are
    INVALID_UPDATE_VERSION; a level below 1 removes (disables) the feature. The epoch
    advances once per applied request that changes something."""
    levels = dict(current.levels)
    seen: set[str] = set()
    for name, level, kind in updates:
        if name in seen:
            return UpdateError(ErrorCode.INVALID_REQUEST,
                               f"Feature {name} was specified more than once.")
        seen.add(name)
        supported = SUPPORTED.get(name)
        if supported is None:
            return UpdateError(ErrorCode.INVALID_UPDATE_VERSION,
                               f"Invalid update version {level} for feature {name}. The "
                               "controller does not support the given feature.")
        level = max(level, 0)
        old = levels.get(name, 0)
        if not supported.updatable and level != old:
            return UpdateError(ErrorCode.INVALID_UPDATE_VERSION,
                               f"Invalid update version {level} for feature {name}. This "
                               f"broker serves only {name} {old}.")
        if not supported.min_level <= level <= supported.max_level:
            return UpdateError(ErrorCode.INVALID_UPDATE_VERSION,
                               f"Invalid update version {level} for feature {name}. This "
                               "broker only supports versions "
                               f"{supported.min_level}-{supported.max_level}")
        if level < old and kind is UpgradeType.UPGRADE:
            return UpdateError(ErrorCode.INVALID_UPDATE_VERSION,
                               f"Invalid update version {level} for feature {name}. Can't "
                               "downgrade the version of this feature without setting the "
                               "upgrade type to either safe or unsafe downgrade.")
        levels[name] = level
    if levels == dict(current.levels):
        return current
    return Finalized(levels, current.epoch + 1)


# Kafka's FeatureZNode: version 2 (KIP-778) and its status Enabled.
ZNODE_VERSION = 2
ZNODE_ENABLED = 1


def encode_znode(finalized: Finalized) -> bytes:
    """Kafka's /feature JSON: each feature above 0 with its max_version_level (version 2
    dropped version 1's min_version_level), as ZooKeeper-mode Kafka writes them
    (metadata.version is KRaft's, never written there)."""
    return json.dumps({
        "version": ZNODE_VERSION, "status": ZNODE_ENABLED,
        "features": {n: {"max_version_level": v}
                     for n, v in finalized.listed() if SUPPORTED[n].updatable},
    }, separators=(",", ":")).encode()


def decode_znode(data: bytes, version: int) -> Finalized:
    """The levels /feature holds, at its znode version as epoch (Kafka's
    FinalizedFeatureCache takes the version so). A feature it does not list is at 0, one
    this broker does not know is ignored."""
    doc = json.loads(data)
    levels = {n: (0 if s.updatable else s.default) for n, s in SUPPORTED.items()}
    if doc.get("status", ZNODE_ENABLED) == ZNODE_ENABLED:
        for name, entry in (doc.get("features") or {}).items():
            if name in SUPPORTED and SUPPORTED[name].updatable:
                levels[name] = int(entry["max_version_level"])
    return Finalized(levels, version)


class ClusterFeatures(Protocol):
    """Where a cluster keeps its finalized levels (zk_store's /feature): one place all
    brokers read, written with a compare-and-set on its version."""

    def finalized_features(self) -> Finalized | None: ...

    def adopt_features(self, local: Finalized) -> None: ...

    async def write_features(self, finalized: Finalized, expected_epoch: int) -> bool: ...


class FeatureStore:
    """The finalized levels this broker serves: a cluster's (`cluster`), or this broker's own,
    kept in `log_dir` (None: in memory only, for a `Services` built by a test)."""

    def __init__(self, log_dir: Path | None = None, *,
                 enabled: frozenset[str] = frozenset(),
                 cluster: ClusterFeatures | None = None) -> None:
        """`enabled`: features whose APIs are served whatever their level (share.version
        with group.share.enable, as Kafka's KafkaApis.isShareGroupProtocolEnabled); their
        finalized level is not changed by it. With `cluster`, a level this broker kept in its
        own file before it joined is handed to the cluster (`adopt_features`), so an
        upgrade taken then is not lost."""
        self.path = None if log_dir is None else log_dir / FEATURES_FILE
        self._local = self._load()
        self.cluster = cluster
        if cluster is not None:
            cluster.adopt_features(self._local)
        self.enabled = enabled

    @property
    def current(self) -> Finalized:
        if self.cluster is None:
            return self._local
        return self.cluster.finalized_features() or defaults()

    def enables(self, name: str, level: int) -> bool:
        """Whether the APIs gated on feature `name` at `level` are served."""
        return name in self.enabled or self.level(name) >= level

    def _load(self) -> Finalized:
        base = defaults()
        if self.path is None or not self.path.exists():
            return base
        data = json.loads(self.path.read_text())
        levels = dict(base.levels)
        for name, level in data.get("levels", {}).items():
            if name in SUPPORTED and SUPPORTED[name].updatable:
                levels[name] = int(level)
        return Finalized(levels, int(data.get("epoch", 0)))

    def level(self, name: str) -> int:
        return self.current.level(name)

    async def update(self, plan: Callable[[Finalized], Finalized | UpdateError]
                     ) -> Finalized | UpdateError:
        """Apply `plan` to the current levels and keep the result: on a cluster, written only
        if no other broker wrote meanwhile, else planned again on what that one wrote (as
        Kafka's controller applies one request after the other, so an update is never
        lost, nor validated against levels that are no longer the cluster's). Each failed
        write means another broker's succeeded, so the loop ends."""
        while True:
            current = self.current
            result = plan(current)
            if isinstance(result, UpdateError) or result is current:
                return result
            if self.cluster is None:
                self.save(result)
                return result
            if await self.cluster.write_features(result, current.epoch):
                return result

    def save(self, finalized: Finalized) -> None:
        """Make `finalized` this broker's own, on disk first (a crash keeps the old levels or
        the new)."""
        if self.path is not None:
            write_atomically(self.path, json.dumps(
                {"epoch": finalized.epoch,
                 "levels": {n: v for n, v in sorted(finalized.levels.items())
                            if SUPPORTED[n].updatable}}, indent=1))
        self._local = finalized
