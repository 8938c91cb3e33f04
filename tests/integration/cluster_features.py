"""One UpdateFeatures is the whole cluster's (KIP-584): the scenario a 3-broker ZooKeeper
cluster (tests/cluster/test_features_cluster.py) and a node of two brokers
(tests/integration/test_features_node.py) both run, with raw requests to each broker."""
from __future__ import annotations

import time

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from tests.integration.raw import coordinator_address, create_topic, send_request
from tests.integration.share_member import Member

UPGRADE, SAFE_DOWNGRADE = 1, 2


def broker_addresses(bootstrap: str) -> list[str]:
    """host:port of every broker Metadata names."""
    answer = send_request(bootstrap, ApiKey.METADATA, 12, {
        "topics": [], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})
    return sorted(f"{b.host}:{b.port}" for b in answer.brokers)


def advertised(address: str) -> tuple[int, int]:
    """(share.version finalized, FinalizedFeaturesEpoch) in the broker's ApiVersions v3."""
    r = send_request(address, ApiKey.API_VERSIONS, 3, {
        "client_software_name": "t", "client_software_version": "1"})
    levels = {f.name: f.max_version_level for f in r.finalized_features}
    return levels.get("share.version", 0), r.finalized_features_epoch


def update_share_version(address: str, level: int, upgrade_type: int) -> None:
    r = send_request(address, ApiKey.UPDATE_FEATURES, 1, {
        "timeout_ms": 60000, "validate_only": False,
        "feature_updates": [{"feature": "share.version", "max_version_level": level,
                             "upgrade_type": upgrade_type}]})
    assert (r.error_code, [x.error_code for x in r.results]) == (0, [0]), r


def wait_all_advertise(addresses: list[str], expected: tuple[int, int],
                       timeout_s: float = 15) -> None:
    """Every broker advertises `expected` within a watch's delay (no request is sent to the
    others to make them)."""
    deadline = time.monotonic() + timeout_s
    while True:
        seen = {a: advertised(a) for a in addresses}
        if all(v == expected for v in seen.values()):
            return
        assert time.monotonic() < deadline, f"expected {expected} everywhere: {seen}"
        time.sleep(0.1)


def group_coordinated_by_another(bootstrap: str, avoid: str) -> str:
    """A share group whose coordinator is not the broker at `avoid`."""
    for i in range(1000):
        group = f"sg-{i}"
        if coordinator_address(bootstrap, group) != avoid:
            return group
    raise AssertionError(f"every group is coordinated by {avoid}")


def one_upgrade_is_every_brokers(bootstrap: str, taker: str, epoch: int) -> None:
    """share.version 1 sent once, to `taker`: every broker advertises it, and a share group
    coordinated by another broker is served; then downgraded through another broker, and
    every broker stops serving it. `epoch`: the cluster's FinalizedFeaturesEpoch before."""
    addresses = broker_addresses(bootstrap)
    assert taker in addresses and len(addresses) > 1
    create_topic(bootstrap, "q")
    wait_all_advertise(addresses, (0, epoch))
    update_share_version(taker, 1, UPGRADE)
    wait_all_advertise(addresses, (1, epoch + 1))
    group = group_coordinated_by_another(bootstrap, taker)
    member = Member(bootstrap, group)
    try:
        member.join()
        other = next(a for a in addresses if a != taker)
        update_share_version(other, 0, SAFE_DOWNGRADE)
        wait_all_advertise(addresses, (0, epoch + 2))
        assert member.heartbeat(0, ["q"]).error_code == ErrorCode.UNSUPPORTED_VERSION
    finally:
        member.close()
