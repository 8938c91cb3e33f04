"""Feature levels (KIP-584): the rules of UpdateFeatures, where the levels are kept, and what
ApiVersions says of them, on a broker in process."""
from __future__ import annotations

from pathlib import Path

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.cluster.features import (
    FEATURES_FILE, GROUP_VERSION, METADATA_LEVEL, METADATA_VERSION, SHARE_VERSION,
    FeatureStore, Finalized, UpdateError, UpgradeType, defaults, plan_updates,
)

UP, SAFE = UpgradeType.UPGRADE, UpgradeType.SAFE_DOWNGRADE


def test_defaults_are_kafka_41s() -> None:
    d = defaults()
    assert (d.level(GROUP_VERSION), d.level(SHARE_VERSION), d.level(METADATA_VERSION)) == \
        (1, 0, METADATA_LEVEL)
    assert d.epoch == 0
    assert SHARE_VERSION not in dict(d.listed())  # a level 0 is not finalized


def test_upgrade_bumps_the_epoch_once() -> None:
    plan = plan_updates(defaults(), [(SHARE_VERSION, 1, UP), (GROUP_VERSION, 1, UP)])
    assert isinstance(plan, Finalized)
    assert plan.level(SHARE_VERSION) == 1 and plan.epoch == 1


def test_no_change_keeps_the_epoch() -> None:
    assert plan_updates(defaults(), [(GROUP_VERSION, 1, UP)]) == defaults()


def _refused(updates: list[tuple[str, int, UpgradeType]],
             current: Finalized | None = None) -> ErrorCode:
    plan = plan_updates(current or defaults(), updates)
    assert isinstance(plan, UpdateError), plan
    return plan.code


def test_refusals() -> None:
    assert _refused([("no.such.feature", 1, UP)]) == ErrorCode.INVALID_UPDATE_VERSION
    assert _refused([(SHARE_VERSION, 2, UP)]) == ErrorCode.INVALID_UPDATE_VERSION
    assert _refused([(METADATA_VERSION, METADATA_LEVEL - 1, SAFE)]) == \
        ErrorCode.INVALID_UPDATE_VERSION
    # a downgrade must say so
    assert _refused([(GROUP_VERSION, 0, UP)]) == ErrorCode.INVALID_UPDATE_VERSION
    assert _refused([(SHARE_VERSION, 1, UP), (SHARE_VERSION, 1, UP)]) == \
        ErrorCode.INVALID_REQUEST


def test_all_or_nothing() -> None:
    assert _refused([(SHARE_VERSION, 1, UP), ("no.such.feature", 1, UP)]) == \
        ErrorCode.INVALID_UPDATE_VERSION


def test_downgrade_to_zero_disables() -> None:
    plan = plan_updates(defaults(), [(GROUP_VERSION, 0, SAFE)])
    assert isinstance(plan, Finalized) and plan.level(GROUP_VERSION) == 0
    assert GROUP_VERSION not in dict(plan.listed())


def test_store_keeps_levels_across_a_restart(tmp_path: Path) -> None:
    store = FeatureStore(tmp_path)
    assert store.level(SHARE_VERSION) == 0 and not (tmp_path / FEATURES_FILE).exists()
    plan = plan_updates(store.current, [(SHARE_VERSION, 1, UP)])
    assert isinstance(plan, Finalized)
    store.save(plan)
    again = FeatureStore(tmp_path)
    assert again.level(SHARE_VERSION) == 1 and again.current.epoch == 1
    assert again.level(METADATA_VERSION) == METADATA_LEVEL


# -- on a broker -----------------------------------------------------------------------------

def _api_versions(bootstrap: str, version: int = 3):  # type: ignore[no-untyped-def]
    from tests.integration.raw import send_request
    return send_request(bootstrap, ApiKey.API_VERSIONS, version,
                        {"client_software_name": "raw", "client_software_version": "1"})


def _update(bootstrap: str, name: str, level: int, version: int = 1, *,
            upgrade_type: int = 1, validate_only: bool = False):  # type: ignore[no-untyped-def]
    from tests.integration.raw import send_request
    return send_request(bootstrap, ApiKey.UPDATE_FEATURES, version, {
        "timeout_ms": 60000, "validate_only": validate_only,
        "feature_updates": [{"feature": name, "max_version_level": level,
                             "allow_downgrade": False, "upgrade_type": upgrade_type}]})


def _finalized(resp) -> dict[str, int]:  # type: ignore[no-untyped-def]
    return {f.name: f.max_version_level for f in resp.finalized_features}


def test_api_versions_advertises_the_features(broker) -> None:  # type: ignore[no-untyped-def]
    v3, v4 = _api_versions(broker.bootstrap, 3), _api_versions(broker.bootstrap, 4)
    assert _finalized(v4) == {GROUP_VERSION: 1, METADATA_VERSION: METADATA_LEVEL}
    assert v4.finalized_features_epoch == 0
    supported = {f.name: (f.min_version, f.max_version) for f in v4.supported_features}
    assert supported[SHARE_VERSION] == (0, 1) and supported[GROUP_VERSION] == (0, 1)
    # v3 leaves out a supported feature whose minimum is 0, as Kafka does
    assert {f.name for f in v3.supported_features} == {METADATA_VERSION}


def test_update_features_upgrade_then_restart(tmp_path: Path) -> None:
    from tests.helpers import broker_in_thread

    logs = tmp_path / "logs"
    with broker_in_thread(logs) as info:
        dry = _update(info.bootstrap, SHARE_VERSION, 1, validate_only=True)
        assert dry.error_code == 0 and _finalized(_api_versions(info.bootstrap)).get(
            SHARE_VERSION) is None
        resp = _update(info.bootstrap, SHARE_VERSION, 1)
        assert resp.error_code == 0 and [r.error_code for r in resp.results] == [0]
        bad = _update(info.bootstrap, SHARE_VERSION, 0, version=2)
        assert bad.error_code == ErrorCode.INVALID_UPDATE_VERSION and bad.error_message
    with broker_in_thread(logs) as info:
        after = _api_versions(info.bootstrap)
        assert _finalized(after)[SHARE_VERSION] == 1 and after.finalized_features_epoch == 1


def test_a_gated_api_is_advertised_only_when_its_feature_is_on() -> None:
    from pybroker.handlers import Handler
    from pybroker.handlers.api_versions import advertised

    async def handle(ctx, request):  # type: ignore[no-untyped-def]
        return {}

    gated = Handler(76, 1, 1, handle, feature=(SHARE_VERSION, 1))
    store = FeatureStore()
    assert not gated.enabled(store) and advertised({76: gated}, store) == []
    plan = plan_updates(store.current, [(SHARE_VERSION, 1, UP)])
    assert isinstance(plan, Finalized)
    store.save(plan)
    assert gated.enabled(store)
    assert advertised({76: gated}, store) == [{"api_key": 76, "min_version": 1, "max_version": 1}]
