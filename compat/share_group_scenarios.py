"""Share groups (KIP-932) in the matrix: issue #34's six scenarios, one row each, played by
every client whose adapter has a share consumer (`Adapter.share_client`).

The scenarios are compat/differential/share_scenarios.py's, played as the differential plays
them; a cell passes when what the client saw is what the same client saw on Apache Kafka
4.1.1, as compat/differential.json recorded it (compat/DIFFERENTIAL.md, "Share groups"): so a
cell fails when pybroker's behaviour changes, and follows Kafka's when the differential is
rerun. An observation holds no timing and no offset (share_scenarios' docstring), so it is
compared as it is.

The matrix's broker runs with the scenarios' share-group settings (short locks, a delivery
limit of 3: `compat.differential.config.SHARE_GROUPS`, which `compat.run` starts it with);
each cell finalizes share.version 1 there, as the differential does. The restart scenario
kills its broker -9, which the matrix's broker, a thread of the run's process, cannot be: it
starts a pybroker process of its own with the differential's settings.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from compat.base import Adapter
from compat.scenarios import scenario

DIFFERENTIAL_JSON = Path(__file__).resolve().parent / "differential.json"


def _expected(client: str, name: str) -> tuple[Any, str | None]:
    """What the recorded differential says `client` sees in scenario `name` on a broker that
    behaves as Kafka 4.1.1: Kafka's observation, or pybroker's where the two differ on
    purpose (the reason then qualifies the cell). An AssertionError when there is none to
    judge by (the scenario could not run there, or was never recorded)."""
    recorded = json.loads(DIFFERENTIAL_JSON.read_text()).get("share_scenarios", {})
    r = recorded.get(client, {}).get(name)
    assert r is not None, f"compat/differential.json records no {name!r} for {client}: " \
        "run `python -m compat.differential --share`"
    assert r["status"] != "error", f"compat/differential.json has no observation of " \
        f"{name!r} for {client} to judge by (kafka: {r['kafka']}, pybroker: {r['pybroker']})"
    if r["status"] == "deliberate":
        return r["pybroker"], r["reason"]
    return r["kafka"], None


def _on_the_matrix_broker() -> None:
    raise AssertionError("a scenario on the matrix's broker asked to restart it")


def play(a: Adapter, bootstrap: str, name: str) -> str | None:
    """Scenario `name` of share_scenarios with `a`'s share consumer on the matrix's broker;
    the restart scenario on a pybroker process of its own."""
    client = a.share_client()  # NotApplicable first: N/A cells import no share client
    from compat.differential import share_scenarios as share
    expected, why = _expected(client.name, name)
    if share.SCENARIOS[name] is share.restart_keeps_the_state:
        seen = _on_a_broker_of_its_own(client, name)
    else:
        share.enable_share_groups(bootstrap)
        seen = share._jsonable(share.SCENARIOS[name](client, bootstrap, _on_the_matrix_broker))
    assert seen == expected, \
        f"saw {json.dumps(seen)}, expected {json.dumps(expected)}: " + \
        (f"pybroker's deliberate difference ({why})" if why else
         f"what {client.name} saw on Apache Kafka 4.1.1") + " (compat/differential.json)"
    return why


def _on_a_broker_of_its_own(client: Any, name: str) -> Any:
    """Scenario `name` on a fresh pybroker process with the differential's settings and
    share.version 1, which its restart kills -9 and starts again on its data."""
    from compat.differential import share_scenarios as share
    from compat.differential.config import SHARED
    from pybroker.testing import Broker

    config = {k.replace(".", "_"): v for k, v in {**SHARED, **share.SETTINGS}.items()}
    # Kafka's keys, `_` for `.`: none spells keep, log_dir or log_lines (a dict's keys are
    # beyond mypy, which holds its str values against those keywords' types).
    broker = Broker(process=True, **config)  # type: ignore[arg-type]
    broker.start()
    try:
        share.enable_share_groups(broker.bootstrap)

        def restart() -> None:
            broker.kill()
            broker.restart()
        return share._jsonable(share.SCENARIOS[name](client, broker.bootstrap, restart))
    finally:
        broker.stop()


# The rows: id -> (share_scenarios' name of the scenario, the matrix's title, timeout in s).
ROWS: dict[str, tuple[str, str, float]] = {
    "share-three-consumers": (
        "three consumers share one partition and read each record once",
        "Share group (KIP-932): three consumers share one partition and together read each of "
        "300 records once", 150),
    "share-release": (
        "a released record is redelivered",
        "Share group: a released record is redelivered at once, its delivery count one "
        "higher; nothing else comes twice", 90),
    "share-killed-consumer": (
        "a killed consumer's records come back",
        "Share group: a consumer killed -9 holding acquired records; another gets them, with "
        "the delivery count that tells how they came back", 150),
    "share-reject": (
        "reject archives a record",
        "Share group: a rejected record is archived and never comes back, not even after a "
        "lock's time", 90),
    "share-delivery-limit": (
        "the delivery limit archives a poison record",
        "Share group: a record released at every delivery is archived at "
        "group.share.delivery.count.limit (3) deliveries", 90),
    "share-restart": (
        "a restart keeps the state",
        "Share group: kill -9 and restart of the broker (a pybroker process of the cell's "
        "own); what was accepted stays done, the released record comes again", 150),
}


def _row(name: str) -> Callable[[Adapter, str], str | None]:
    return lambda a, bootstrap: play(a, bootstrap, name)


for _id, (_name, _title, _timeout) in ROWS.items():
    scenario(_id, _title, timeout=_timeout)(_row(_name))
