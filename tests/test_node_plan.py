"""num.cores and what worker K of a node is (pybroker.node.worker): ids, ports, log dirs, rack;
the refusals that need no process. The processes themselves: tests/integration/
test_node_supervisor.py (standalone) and tests/cluster/test_node_cluster.py (ZooKeeper)."""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Callable, Iterator

import pytest

from pybroker.__main__ import main
from pybroker.config import ConfigError, load_broker_config
from pybroker.node.supervisor import NODE_FILE, Supervisor, check_core_count, recorded_cores
from pybroker.node.worker import WorkerPlan, cores_to_use, plan_workers, worker_command
from pybroker.testing.broker import num_cores_default


@pytest.fixture
def own_logging() -> Iterator[None]:
    """main() installs its stderr handler on the root logger (configure_logging), here on
    capsys's stream, which is closed after the test: later tests' logging would write to it.
    The root logger's handlers and level are put back."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)


def test_num_cores_is_every_cpu_it_may_use_by_default_and_1_is_one_process() -> None:
    every = len(os.sched_getaffinity(0))
    assert load_broker_config(None, {}).num_cores == -1
    assert cores_to_use(load_broker_config(None, {})) == every
    assert cores_to_use(load_broker_config(None, {"num.cores": "-1"})) == every
    assert cores_to_use(load_broker_config(None, {"num.cores": "1"})) == 1
    assert cores_to_use(load_broker_config(None, {"num.cores": "3"})) == 3


@pytest.mark.parametrize("value, reason", [
    ("0", "Invalid value 0 for configuration num.cores: Value must be -1 (all) or at least 1"),
    ("-2", "Invalid value -2 for configuration num.cores: Value must be -1 (all) or at least 1"),
    ("two", "Invalid value two for configuration num.cores: Not a number of type INT"),
])
def test_bad_num_cores_is_refused_at_start_in_one_line(
        value: str, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        own_logging: None) -> None:
    with pytest.raises(ConfigError, match="num.cores"):
        load_broker_config(None, {"num.cores": value})
    assert main(["--defaults", "--override", f"num.cores={value}", "--override",
                 f"log.dirs={tmp_path}"]) == 1
    err = capsys.readouterr().err
    assert err == f"pybroker-server: {reason}\n"
    assert not list(tmp_path.iterdir())  # refused before anything was written


def test_worker_k_gets_id_plus_1000k_ports_plus_k_dirs_suffixed() -> None:
    config = load_broker_config(None, {
        "node.id": "7", "listeners": "PLAINTEXT://127.0.0.1:9092,SSL://:9192",
        "log.dirs": "/data/a,/data/b/", "http.listeners": "http://127.0.0.1:8080",
        "ssl.keystore.location": "/dev/null", "ssl.key.password": "x",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:PLAINTEXT"})
    plans = plan_workers(config, 3, host_name="host-a")
    assert [p.node_id for p in plans] == [7, 1007, 2007]
    assert [p.overrides()["listeners"] for p in plans] == [
        "PLAINTEXT://127.0.0.1:9092,SSL://:9192", "PLAINTEXT://127.0.0.1:9093,SSL://:9193",
        "PLAINTEXT://127.0.0.1:9094,SSL://:9194"]
    assert [p.overrides()["log.dirs"] for p in plans] == [
        "/data/a,/data/b/", "/data/a-1,/data/b-1", "/data/a-2,/data/b-2"]
    assert [p.overrides()["http.listeners"] for p in plans] == [
        "http://127.0.0.1:8080", "http://127.0.0.1:8081", "http://127.0.0.1:8082"]
    assert {p.overrides()["broker.rack"] for p in plans} == {"host-a"}
    assert all(p.overrides()["num.cores"] == "1" for p in plans)
    assert all(p.overrides()["broker.id"] == str(p.node_id) for p in plans)
    assert "advertised.listeners" not in plans[1].overrides()  # each advertises its own


def test_port_zero_stays_zero_and_a_set_rack_and_advertised_listeners_are_kept() -> None:
    config = load_broker_config(None, {
        "listeners": "PLAINTEXT://0.0.0.0:0", "broker.rack": "r1",
        "advertised.listeners": "PLAINTEXT://node-a.example:19092"})
    plans = plan_workers(config, 2)
    assert [p.overrides()["listeners"] for p in plans] == ["PLAINTEXT://0.0.0.0:0"] * 2
    assert [p.overrides()["advertised.listeners"] for p in plans] == [
        "PLAINTEXT://node-a.example:19092", "PLAINTEXT://node-a.example:19093"]
    assert {p.rack for p in plans} == {"r1"}


def test_worker_ports_that_collide_are_refused_naming_both() -> None:
    config = load_broker_config(None, {
        "listeners": "PLAINTEXT://127.0.0.1:9092,OTHER://127.0.0.1:9093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"})
    with pytest.raises(ConfigError) as caught:
        plan_workers(config, 2)
    assert str(caught.value) == (
        "num.cores=2: worker 1's PLAINTEXT://127.0.0.1:9093 takes the port of worker 0's "
        "OTHER://127.0.0.1:9093 (worker K listens on every port + K): space the listeners' "
        "ports at least num.cores apart")
    plan_workers(config, 1)  # one worker: nothing to collide


def test_worker_port_past_65535_is_refused() -> None:
    config = load_broker_config(None, {"listeners": "PLAINTEXT://127.0.0.1:65535"})
    with pytest.raises(ConfigError, match="past 65535"):
        plan_workers(config, 2)


def test_worker_command_keeps_the_node_file_and_overrides_and_puts_its_own_last() -> None:
    config = load_broker_config(None, {"num.cores": "2"})
    plan = plan_workers(config, 2)[1]
    args = worker_command("server.properties", ["num.cores=2", "num.partitions=3"], plan)
    assert args[1:4] == ["-m", "pybroker", "server.properties"]
    overrides = [args[i + 1] for i, a in enumerate(args) if a == "--override"]
    assert overrides[:2] == ["num.cores=2", "num.partitions=3"]
    assert overrides.index("num.cores=1") > overrides.index("num.cores=2")  # the worker's wins
    assert worker_command(None, [], plan)[3] == "--defaults"


def test_fewer_cores_than_the_node_ran_is_refused_more_is_recorded(tmp_path: Path) -> None:
    config = load_broker_config(None, {"log.dirs": str(tmp_path), "node.id": "3"})
    check_core_count(config, 4)
    assert recorded_cores(tmp_path) == 4
    with pytest.raises(ConfigError) as caught:
        check_core_count(config, 2)
    message = str(caught.value)
    assert "ran 4 brokers; num.cores=2 would leave brokers 2003, 3003 out" in message
    assert "set num.cores=4" in message and "\n" not in message
    check_core_count(config, 6)
    assert recorded_cores(tmp_path) == 6


def test_a_node_dir_is_refused_by_a_single_broker_start(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], own_logging: None) -> None:
    (tmp_path / NODE_FILE).write_text("num.cores=2\n")
    assert main(["--defaults", "--override", "num.cores=1", "--override",
                 f"log.dirs={tmp_path}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pybroker-server: ") and err.count("\n") == 1
    assert "set num.cores=2" in err


def test_a_node_whose_first_log_dir_is_a_file_fails_with_the_brokers_reason(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], own_logging: None) -> None:
    """The node's metadata store goes in its first log dir: a regular file there stops the
    start as it stops a single broker's, one line naming the file, and no worker is started
    (before, the supervisor's mkdir of its store failed with a bare `[Errno 17] File
    exists`)."""
    plain = tmp_path / "plain-file"
    plain.write_text("not a directory")
    assert main(["--defaults", "--override", "num.cores=2", "--override",
                 "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={plain}"]) == 1
    err = capsys.readouterr().err
    reason = err.strip().splitlines()[-1]
    assert str(plain) in reason and "not a directory" in reason, err
    assert "worker 0" not in err and plain.read_text() == "not a directory"


@pytest.mark.parametrize("raw, expected", [("", 1), ("2", 2), ("-1", -1)])
def test_the_kits_core_count_follows_pybroker_num_cores(
        raw: str, expected: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYBROKER_NUM_CORES", raw)
    assert num_cores_default() == expected


@pytest.mark.parametrize("raw", ["0", "x", "-3"])
def test_a_bad_pybroker_num_cores_is_named(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYBROKER_NUM_CORES", raw)
    with pytest.raises(ValueError, match="PYBROKER_NUM_CORES"):
        num_cores_default()


def _two_workers(tmp_path: Path) -> list[WorkerPlan]:
    """The plans of a node of 2 workers on ephemeral ports, for stand-in worker processes."""
    config = load_broker_config(None, {"node.id": "0", "log.dirs": str(tmp_path / "logs"),
                                       "listeners": "PLAINTEXT://127.0.0.1:0"})
    return plan_workers(config, 2, host_name="h")


def _listening(plan: WorkerPlan, host: str = "127.0.0.1") -> str:
    """A broker's "listening" line, as a worker of `plan` on port 40000 + its index logs it."""
    return f"pybroker node {plan.node_id} listening on {host}:{40000 + plan.index}"


def _stand_in_commands(plans: list[WorkerPlan], lines: Callable[[WorkerPlan], list[str]]
                       ) -> list[list[str]]:
    """Commands of stand-in workers: each writes `lines(plan)` to stderr, as a worker logs
    them, then waits until SIGTERM, which it takes as a clean stop."""
    import sys

    program = ("import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(0));"
               " sys.stderr.write({!r}); sys.stderr.flush(); time.sleep(120)")
    return [[sys.executable, "-c", program.format("".join(f"{line}\n" for line in lines(p)))]
            for p in plans]


def _sigterm_once(sup: Supervisor, ready: Callable[[], bool]) -> None:
    """From a thread: SIGTERM to the supervisor (as its handler records it) once `ready()`
    holds, or after 30 s."""
    import signal
    import threading
    import time

    def stop() -> None:
        deadline = time.monotonic() + 30
        while not ready() and time.monotonic() < deadline:
            time.sleep(0.05)
        sup._on_signal(signal.SIGTERM, None)
    threading.Thread(target=stop, daemon=True).start()


def test_a_node_whose_metadata_service_stops_stops_loudly(tmp_path: Path) -> None:
    """The workers of a node whose store stopped serving could only reconnect to nothing: the
    node stops (exit 1, the reason logged) instead of limping on. Stand-in workers (a process
    that logs a broker's "listening" line and waits) and a real MetadataService, closed once
    both workers serve."""
    import threading
    import time

    from pybroker.node.metadata_service import MetadataService
    from pybroker.node.supervisor import Supervisor

    service = MetadataService(tmp_path / "md.sock", tmp_path / "md", 6000)
    service.start()
    plans = _two_workers(tmp_path)
    commands = _stand_in_commands(plans, lambda p: [_listening(p)])
    sup = Supervisor(plans, commands, on_stopped=service.close, store=service)

    def close_once_serving() -> None:
        deadline = time.monotonic() + 60
        while any(w.port is None for w in sup.workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        service.close()

    threading.Thread(target=close_once_serving, daemon=True).start()
    t0 = time.monotonic()
    assert sup.run() == 1
    assert time.monotonic() - t0 < 60
    assert all(w.proc is not None and w.proc.poll() is not None for w in sup.workers)


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]"])
def test_a_node_whose_listener_names_a_host_is_ready(
        host: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A worker's listening line names its listener's host as configured (the README's secure
    broker listens on `localhost:9093`): the supervisor reads its port from it and logs the
    node ready. Stand-in workers log the line and wait; a SIGTERM stops them once both serve."""
    from pybroker.node.supervisor import Supervisor

    plans = _two_workers(tmp_path)
    commands = _stand_in_commands(plans, lambda p: [
        f"{_listening(p, host)} (cluster id c)",
        f"broker {p.node_id} is in sync with its node: ..."])
    sup = Supervisor(plans, commands)

    _sigterm_once(sup, lambda: sup.serving)
    with caplog.at_level(logging.INFO, logger="pybroker.node"):
        assert sup.run() == 0
    assert [w.port for w in sup.workers] == [40000, 40001]
    assert any("pybroker node of 2 brokers ready" in r.getMessage() for r in caplog.records)


def test_an_idle_nodes_supervisor_sleeps_until_something_happens(tmp_path: Path) -> None:
    """The supervisor's loop waits for its workers' lines and exits, a signal or its store,
    with no tick: once the node is ready and quiet, its main thread does not wake (it polled
    every 0.2 s: 5 wakeups a second), and a signal still stops it at once. Stand-in workers
    log the "listening" line and wait; the loop runs on this (the main) thread."""
    import signal
    import threading
    import time

    from pybroker.node.supervisor import Supervisor

    plans = _two_workers(tmp_path)
    commands = _stand_in_commands(plans, lambda p: [_listening(p)])
    sup = Supervisor(plans, commands)
    main_tid = threading.get_native_id()
    woke: list[int] = []
    stopped_after: list[float] = []

    def switches() -> int:
        status = Path(f"/proc/self/task/{main_tid}/status").read_text()
        return int(status.split("voluntary_ctxt_switches:")[1].split()[0])

    def measure_then_stop() -> None:
        deadline = time.monotonic() + 30
        while any(w.port is None for w in sup.workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # both "listening" lines taken, the loop back in its wait
        before = switches()
        time.sleep(1.0)
        woke.append(switches() - before)
        stopped_after.append(time.monotonic())
        if not returned.is_set():  # run()'s handler is in place: the signal is the node's
            os.kill(os.getpid(), signal.SIGTERM)

    returned = threading.Event()
    threading.Thread(target=measure_then_stop, daemon=True).start()
    try:
        assert sup.run() == 0
    finally:
        returned.set()
    assert time.monotonic() - stopped_after[0] < 10  # the signal woke it
    assert woke == [0]


def test_a_worker_that_cannot_start_is_named_in_one_line_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    """A node whose worker fails before it served ends as a single broker's failed start: its
    output's one line that is not a log line is the reason, the last (test_cli's contract).
    The reason is said once: the supervisor's own log lines name the worker and how it ended
    (its ERROR, then "node stopped"), not the reason again.
    Stand-in workers: worker 0 says why it cannot start and exits 1, worker 1 waits."""
    import sys

    from pybroker.node.supervisor import Supervisor

    plans = _two_workers(tmp_path)
    failing = ("import sys; sys.stderr.write('[2026-01-01 00:00:00,000] INFO a log line\\n');"
               " sys.stderr.write('pybroker-server: listener taken\\n'); sys.exit(1)")
    waiting = ("import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(0));"
               " time.sleep(120)")
    sup = Supervisor(plans, [[sys.executable, "-c", failing], [sys.executable, "-c", waiting]])
    caplog.set_level(logging.INFO, logger="pybroker.node")
    assert sup.run() == 1
    err = capsys.readouterr().err
    reasons = [line for line in err.splitlines() if not line.startswith("[")]
    assert reasons == ["pybroker-server: listener taken"], err
    assert err.rstrip().splitlines()[-1] == "pybroker-server: listener taken"
    said = [m for m in caplog.messages if "failed to start" in m]
    assert said == ["stopping the node: worker 0 (broker 0) failed to start (exit code 1)",
                    "node stopped (worker 0 (broker 0) failed to start (exit code 1))"]
    assert not any("listener taken" in m for m in caplog.messages)


def test_a_node_is_not_ready_before_every_worker_is_in_sync_with_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Serving is not enough: worker 1 listens but never says it sees its node with leaders
    elected (pybroker.node.readiness), so the node never logs "ready", and a SIGTERM sent
    once both listen stops it cleanly. Each stand-in is told the node's broker ids."""
    import signal
    import sys
    import time

    from pybroker.node.supervisor import Supervisor

    plans = _two_workers(tmp_path)
    listening = ("import os, signal, sys, time;"
                 " signal.signal(signal.SIGTERM, lambda *a: sys.exit(0));"
                 " sys.stderr.write('pybroker node {0} listening on 127.0.0.1:{1}\\n');"
                 " sys.stderr.write('brokers ' + os.environ['PYBROKER_NODE_BROKERS'] + '\\n');")
    in_sync = " sys.stderr.write('broker {0} is in sync with its node: ...\\n');"
    waits = " sys.stderr.flush(); time.sleep(120)"
    commands = [[sys.executable, "-c", (listening + in_sync + waits).format(
                     plans[0].node_id, 40000)],
                [sys.executable, "-c", (listening + waits).format(plans[1].node_id, 40001)]]
    sup = Supervisor(plans, commands)

    _sigterm_once(sup, lambda: all(w.port is not None for w in sup.workers)
                  and sup.workers[0].in_sync)
    with caplog.at_level(logging.INFO, logger="pybroker.node"):
        assert sup.run() == 0
    assert [w.port for w in sup.workers] == [40000, 40001]
    assert [w.in_sync for w in sup.workers] == [True, False]
    assert not sup.serving
    assert not any("brokers ready" in r.getMessage() for r in caplog.records)
    assert all("brokers 0,1000" in "\n".join(w.last_lines) for w in sup.workers)


def test_a_worker_is_in_sync_once_it_sees_the_node_a_controller_and_every_electable_leader(
        ) -> None:
    """The worker's side (pybroker.node.readiness.in_sync), on images: the node's brokers and
    a live controller, and no partition the controller would still elect. A partition whose
    in-sync replicas are all down stays offline (Kafka's rule) and is not waited for, unless
    unclean election would elect a live replica."""
    from dataclasses import replace

    from pybroker.cluster.image import BrokerInfo
    from pybroker.node.readiness import in_sync
    from tests.controller.helpers import image, ps

    def with_brokers(img, *ids: int, controller: int = 0):  # type: ignore[no-untyped-def]
        return replace(img, controller_id=controller,
                       brokers={i: BrokerInfo(i, "127.0.0.1", 9092 + i) for i in ids})

    led = image({"t": [ps(0, [0], [0]), ps(1000, [1000], [1000])]})
    node = {0, 1000}
    assert in_sync(with_brokers(led, 0, 1000), node, False, frozenset())
    assert not in_sync(with_brokers(led, 0), node, False, frozenset())  # 1000 unseen
    assert not in_sync(with_brokers(led, 0, 1000, controller=7), node, False, frozenset())
    # After a restart: 1000 registered again, its partition not yet led again.
    leaderless = image({"t": [ps(0, [0], [0]), ps(-1, [1000], [1000])]})
    assert not in_sync(with_brokers(leaderless, 0, 1000), node, False, frozenset())
    assert in_sync(with_brokers(leaderless, 0, 1000), node, False, frozenset({"t"}))  # deleting
    # Led by broker 5 of another node, which is down: in sync only once re-elected.
    elsewhere = image({"u": [ps(5, [5, 0], [5, 0])]})
    assert not in_sync(with_brokers(elsewhere, 0, 1000), node, False, frozenset())
    # In-sync replicas all down: offline, not waited for; unless unclean election applies.
    offline = image({"v": [ps(-1, [5, 0], [5])]})
    assert in_sync(with_brokers(offline, 0, 1000), node, False, frozenset())
    assert not in_sync(with_brokers(offline, 0, 1000), node, True, frozenset())
    per_topic = image({"v": [ps(-1, [5, 0], [5])]},
                      {"v": {"unclean.leader.election.enable": "true"}})
    assert not in_sync(with_brokers(per_topic, 0, 1000), node, False, frozenset())


def test_a_sigterm_while_a_worker_is_still_starting_stops_the_node_with_exit_0(
        tmp_path: Path) -> None:
    """The node's SIGTERM reaches a worker that has not yet installed its signal handler
    (still importing, before any log dir is opened): it dies of the SIGTERM, which is the stop
    asked for, not a failure. Stand-ins: worker 0 serves and stops cleanly; worker 1 has
    Python's default SIGTERM action, as a worker still starting has."""
    import signal
    import sys
    import time

    from pybroker.node.supervisor import Supervisor

    plans = _two_workers(tmp_path)
    serving = ("import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(0));"
               " sys.stderr.write('pybroker node 0 listening on 127.0.0.1:40000\\n');"
               " sys.stderr.flush(); time.sleep(120)")
    starting = ("import sys, time; sys.stderr.write('starting\\n'); sys.stderr.flush();"
                " time.sleep(120)")
    sup = Supervisor(plans, [[sys.executable, "-c", serving], [sys.executable, "-c", starting]])

    _sigterm_once(sup, lambda: sup.workers[0].port is not None
                  and bool(sup.workers[1].last_lines))
    assert sup.run() == 0
    assert [w.proc.returncode for w in sup.workers if w.proc is not None] == [
        0, -signal.SIGTERM]


def test_the_kit_gives_a_node_a_block_of_free_ports_below_the_ephemeral_range() -> None:
    """BrokerProcess puts a node of N brokers on ports P .. P + N - 1 (worker K: P + K) that
    the kernel never hands out on its own, so a restart on P finds worker 1's port free."""
    import socket

    from pybroker.testing.broker import free_port_block

    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    base = free_port_block("127.0.0.1", 3)
    assert 10000 <= base and base + 2 < low
    for port in range(base, base + 3):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_node_on_a_taken_port_fails_naming_it_before_it_touches_its_log_dir(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], own_logging: None) -> None:
    """As a single broker binds its ports before it opens a log dir: worker 1's port taken,
    the node's start is one line naming that listener, and the log dir was not created (no
    metadata service, no core count recorded)."""
    import socket

    from pybroker.testing.broker import free_port_block

    # Both ports below the kernel's ephemeral range: worker 0's must stay free, and a port
    # next to an ephemeral one could be handed to any other process meanwhile (it was, once).
    first = free_port_block("127.0.0.1", 2)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", first + 1))
        taken.listen()
        port = taken.getsockname()[1]
        log_dir = tmp_path / "logs"
        assert main(["--defaults", "--override", "num.cores=2",
                     "--override", f"listeners=PLAINTEXT://127.0.0.1:{port - 1}",
                     "--override", f"log.dirs={log_dir}"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    # A single broker's words: "pybroker-server: [Errno 98] listener ... cannot be bound: ..."
    assert err[-1].startswith("pybroker-server: ") and err[-1].endswith(
        f"listener PLAINTEXT://127.0.0.1:{port} cannot be bound: Address already in use"), err
    assert not log_dir.exists()


# A stand-in worker that stops as a real one does: on SIGTERM its controlled shutdown (here
# 0.2 s), then HANDED_OVER_LINE, then the closing of its logs, which here lasts until the
# next worker down was signalled (at most 20 s, then exit 3: a stop that was not pipelined).
_PIPELINED_WORKER = """
import os, signal, sys, time
index, node_id, events = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def note(what):
    with open(events, "a") as f:
        f.write(what + "\\n")
def noted():
    with open(events) as f:
        return f.read().split("\\n")
def stop(*_):
    note(f"term {index}")
    time.sleep(0.2)
    note(f"handed {index}")
    sys.stderr.write(f"broker {node_id} {HANDED_OVER_LINE}\\n")
    sys.stderr.flush()
    deadline = time.monotonic() + 20
    while index > 0 and f"term {index - 1}" not in noted():
        if time.monotonic() > deadline:
            sys.exit(3)
        time.sleep(0.02)
    note(f"exit {index}")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
sys.stderr.write(f"pybroker node {node_id} listening on 127.0.0.1:{40000 + index}\\n")
sys.stderr.flush()
time.sleep(120)
"""


def test_the_next_worker_stops_once_the_last_has_handed_over_not_once_it_has_exited(
        tmp_path: Path) -> None:
    """A node's clean stop hands leaderships over one worker at a time, the last first, but
    a worker closing its logs holds nothing the next one's handover needs: the next worker's
    SIGTERM comes on the last one's HANDED_OVER_LINE, not on its exit. Stand-ins of a node of
    3 that exit only once the next worker down was signalled (exit 3 after 20 s if it never
    is, which waiting for their exit would give)."""
    import sys

    from pybroker.node.supervisor import Supervisor
    from pybroker.node.worker import HANDED_OVER_LINE

    config = load_broker_config(None, {"node.id": "0", "log.dirs": str(tmp_path / "logs"),
                                       "listeners": "PLAINTEXT://127.0.0.1:0"})
    plans = plan_workers(config, 3, host_name="h")
    events = tmp_path / "events"
    events.write_text("")
    program = f"HANDED_OVER_LINE = {HANDED_OVER_LINE!r}\n" + _PIPELINED_WORKER
    sup = Supervisor(plans, [[sys.executable, "-c", program, str(p.index), str(p.node_id),
                              str(events)] for p in plans])
    _sigterm_once(sup, lambda: all(w.port is not None for w in sup.workers))
    assert sup.run() == 0
    assert [w.proc.returncode for w in sup.workers if w.proc is not None] == [0, 0, 0]
    order = events.read_text().split()
    seen = [" ".join(order[i:i + 2]) for i in range(0, len(order), 2)]
    # One handover at a time, from the last: worker K-1 is signalled after K handed over.
    assert [e for e in seen if not e.startswith("exit")] == [
        "term 2", "handed 2", "term 1", "handed 1", "term 0", "handed 0"]
    # ... and before K exited: K-1's handover overlaps K's closing.
    assert seen.index("term 1") < seen.index("exit 2")
    assert seen.index("term 0") < seen.index("exit 1")


# A stand-in worker that serves (its "listening" and in-sync lines, a clean stop on SIGTERM)
# and, once the file `go` exists, logs a CRITICAL line and exits with `code`: worker 1 of the
# test below, started again on each restart (`go` then exists from the start).
_DYING_WORKER = """
import os, signal, sys, time
node_id, index, go, code = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
sys.stderr.write(f"pybroker node {node_id} listening on 127.0.0.1:{40000 + index}\\n")
sys.stderr.write(f"broker {node_id} is in sync with its node: ...\\n")
sys.stderr.flush()
while code and not os.path.exists(go):
    time.sleep(0.02)
if not code:
    time.sleep(120)
sys.stderr.write("CRITICAL Shutdown broker because all log dirs in /d have failed\\n")
sys.stderr.flush()
os._exit(code)
"""


@pytest.mark.parametrize("dirs_failed", [True, False], ids=["log-dirs-failed", "crash"])
def test_a_worker_whose_every_log_dir_failed_stops_the_node_where_a_crash_is_restarted(
        dirs_failed: bool, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """After the node served: worker 1 exits with LOG_DIRS_FAILED_EXIT (every one of its log
    dirs failed, pybroker.runtime.halt). Restarting it would meet the same failed disks, so
    the node stops at once (exit 1), saying so in one line naming the worker and its dirs;
    worker 0 gets the SIGTERM of a clean stop. The same death with exit code 1 (a crash) is
    restarted, 3 times in a minute, before the node stops."""
    import sys

    from pybroker.node.supervisor import Supervisor
    from pybroker.node.worker import LOG_DIRS_FAILED_EXIT

    exit_code = LOG_DIRS_FAILED_EXIT if dirs_failed else 1
    plans = _two_workers(tmp_path)
    go = tmp_path / "go"
    sup = Supervisor(plans, [[sys.executable, "-c", _DYING_WORKER, str(p.node_id),
                              str(p.index), str(go), str(exit_code if p.index == 1 else 0)]
                             for p in plans])

    def go_once_serving() -> None:
        import time
        deadline = time.monotonic() + 30
        while not sup.serving and time.monotonic() < deadline:
            time.sleep(0.05)
        go.touch()

    import threading
    threading.Thread(target=go_once_serving, daemon=True).start()
    with caplog.at_level(logging.INFO, logger="pybroker.node"):
        assert sup.run() == 1
    logged = [r.getMessage() for r in caplog.records]
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert sup.workers[0].proc is not None and sup.workers[0].proc.returncode == 0
    if dirs_failed:
        assert sup.workers[1].generation == 1  # never restarted
        assert errors == [
            f"stopping the node: worker 1 (broker 1000) stopped because every one of its log "
            f"dirs failed ({tmp_path / 'logs'}-1); a restart would meet the same failed disks"]
    else:
        assert sup.workers[1].generation == 4  # the first start and 3 restarts
        assert len([m for m in logged if "restarting it" in m]) == 3
        assert errors[-1].startswith("stopping the node: worker 1 (broker 1000) died (exit "
                                     "code 1) after 3 restarts in a minute")


def test_a_worker_waiting_for_its_coordinators_wakes_when_listeners_ran_not_on_a_tick(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """pybroker.node.readiness.announce_in_sync, its image in sync, its coordinators not yet
    loaded: it looks again when a change's listeners (where the loads run) have run, and not
    in between (it polled every 50 ms: 10 looks in the half second below). The production
    store on the in-memory ZooKeeper; `in_sync` itself is tested above, on images."""
    import trio

    from pybroker.cluster import zk_data as zd
    from pybroker.cluster.image import MetadataDelta, MetadataImage
    from pybroker.cluster.memory_zk import MemoryZooKeeper
    from pybroker.cluster.zk_store import ZkMetadataStore
    from pybroker.node import readiness
    from tests.controller.helpers import seed_partition

    server = MemoryZooKeeper()
    zk = server.client()
    zk.start()
    seed_partition(zk, "t", (0,), zd.LeaderAndIsr(0, 0, (0,), 0))
    store = ZkMetadataStore("memory", 0, rack=None, session_timeout_ms=6000,
                            connection_timeout_ms=6000, client_class=server.client)
    store.attach(tmp_path, None)
    monkeypatch.setattr(readiness, "in_sync", lambda *args: True)
    caplog.set_level(logging.INFO, logger="pybroker.node")
    looks: list[bool] = []
    coordinators = {"loaded": False}

    def loaded(image: MetadataImage) -> bool:
        looks.append(coordinators["loaded"])
        return coordinators["loaded"]

    async def load(image: MetadataImage, delta: MetadataDelta) -> None:
        await trio.sleep(0)  # a load reads its partition in a thread: the loop runs meanwhile
        coordinators["loaded"] = True

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(readiness.announce_in_sync, store, 0, {0}, False, loaded)
            await trio.sleep(0.5)
            assert looks == [False]  # asleep until a change's listeners have run
            store.listeners.append(load)
            await store.refresh_now(("state", "t", 0))
    try:
        trio.run(run)
    finally:
        store.close()
        zk.stop()
    assert looks == [False, True]
    assert [m for m in caplog.messages if readiness.IN_SYNC_LINE in m]
