"""One broker per log dir (issue #18): a second broker on a locked dir, or one that cannot bind
its port, exits at once and leaves every log dir exactly as it found it.

Both used to lose data: a second broker on the same `log.dirs` served the same partitions
(records it acknowledged were never readable again), and a second start that failed on its
port had already recovered the live broker's logs and, on its way out, written the
clean-shutdown marker into the live broker's dir, so that broker's next crash would have
skipped recovery.
"""
from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pybroker.storage.log_dir_lock import LOCK_FILE, LogDirInUse, LogDirLocks
from pybroker.testing.broker import num_cores_default
from tests.helpers import ROOT, BrokerProcess, serving_broker
from tests.integration.cli_runs import _env, _run_failing
from tests.integration.durability_kit import CLEAN_SHUTDOWN_MARKER, consume, numbered, produce

# The live broker writes its checkpoints on timers: the recovery points, the log start offsets
# and the high watermarks (replication-offset-checkpoint, first written 5 s after the start by
# Kafka's default). A snapshot on each side of that first write differs by the new file, which
# a loaded machine stretching the test past 5 s once showed; a broker with all three timers
# quiet makes "not one byte changed" a statement about the second broker alone.
QUIET = {"log.flush.offset.checkpoint.interval.ms": "3600000",
         "log.flush.start.offset.checkpoint.interval.ms": "3600000",
         "replica.high.watermark.checkpoint.interval.ms": "3600000"}


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under `directory`, by relative path, with its bytes."""
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def _second_start(log_dir: Path, port: int) -> subprocess.CompletedProcess:
    """The first broker's start again (as many brokers as the kit's: a node of N when
    PYBROKER_NUM_CORES says so), on `port`."""
    return _run_failing([sys.executable, "-m", "pybroker", "--defaults",
                         "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                         "--override", f"log.dirs={log_dir}",
                         "--override", f"num.cores={num_cores_default()}"])


def _restart_recovers(brokers, log_dir: Path, first: BrokerProcess,  # type: ignore[no-untyped-def]
                      expected: list[bytes], topic: str) -> None:
    """kill -9 the first broker: its next start must still recover (no marker was planted),
    and every acknowledged record is there."""
    first.kill()
    assert not (log_dir / CLEAN_SHUTDOWN_MARKER).exists()
    again = brokers(log_dir)
    assert any("no clean shutdown marker" in line for line in again.stderr_lines), \
        "".join(again.stderr_lines)
    assert [v for _, v in consume(again.bootstrap, topic)] == expected


def test_second_broker_on_a_locked_dir_exits_and_touches_nothing(  # type: ignore[no-untyped-def]
        brokers, log_dir: Path) -> None:
    first = brokers(log_dir, **QUIET)
    produce(first.bootstrap, "shared", numbered("a", 5))
    before = snapshot(log_dir)

    result = _second_start(log_dir, 0)  # another port, the same log dir
    reason = result.stderr.strip().splitlines()[-1]
    assert str(log_dir) in reason and "in use" in reason, reason
    assert f"pid {first.proc.pid}" in reason, reason
    assert snapshot(log_dir) == before
    assert not (log_dir / CLEAN_SHUTDOWN_MARKER).exists()

    # The first broker is unharmed: its offsets stay consecutive.
    assert produce(first.bootstrap, "shared", numbered("a", 5, 5)) == [5, 6, 7, 8, 9]
    assert consume(first.bootstrap, "shared") == list(enumerate(numbered("a", 10)))
    _restart_recovers(brokers, log_dir, first, numbered("a", 10), "shared")


def test_second_start_on_a_taken_port_leaves_the_live_dir_alone(  # type: ignore[no-untyped-def]
        brokers, log_dir: Path) -> None:
    first = brokers(log_dir, **QUIET)
    produce(first.bootstrap, "shared", numbered("b", 5))
    before = snapshot(log_dir)

    result = _second_start(log_dir, first.port)  # the same config started twice
    reason = result.stderr.strip().splitlines()[-1]
    assert f"127.0.0.1:{first.port}" in reason and "in use" in reason.lower(), reason
    assert "shut down cleanly" not in result.stderr, result.stderr
    assert "recovered" not in result.stderr, result.stderr
    assert snapshot(log_dir) == before
    _restart_recovers(brokers, log_dir, first, numbered("b", 5), "shared")


def test_a_failed_start_leaves_a_crashed_dir_to_be_recovered(  # type: ignore[no-untyped-def]
        brokers, log_dir: Path) -> None:
    crashed = brokers(log_dir)
    produce(crashed.bootstrap, "t", numbered("c", 3))
    crashed.kill()
    before = snapshot(log_dir)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        result = _second_start(log_dir, taken.getsockname()[1])
    assert "cannot be bound" in result.stderr, result.stderr
    assert snapshot(log_dir) == before  # not recovered, not marked: as it was found
    again = brokers(log_dir)
    assert any("no clean shutdown marker" in line for line in again.stderr_lines)
    assert [v for _, v in consume(again.bootstrap, "t")] == numbered("c", 3)


def test_a_regular_file_as_log_dir_is_named(tmp_path: Path) -> None:
    plain = tmp_path / "plain-file"
    plain.write_text("not a directory")
    result = subprocess.run([sys.executable, "-m", "pybroker", "--defaults",
                             "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                             "--override", f"log.dirs={plain}"],
                            capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=30)
    assert result.returncode != 0
    reason = result.stderr.strip().splitlines()[-1]
    assert str(plain) in reason and "not a directory" in reason, reason
    assert plain.read_text() == "not a directory"


def test_an_unusable_second_dir_starts_offline_and_the_first_serves(  # type: ignore[no-untyped-def]
        brokers, tmp_path: Path, tool) -> None:
    """A log dir that cannot be used at start (here a regular file) is offline and the broker
    serves the others, as Kafka's LogManager does with a dir it cannot create or validate;
    DescribeLogDirs and kafka-log-dirs show it with KAFKA_STORAGE_ERROR."""
    from compat import wire
    from protocol.api_keys import ApiKey
    from protocol.errors import ErrorCode
    from pybroker.tools import log_dirs

    healthy, plain = tmp_path / "healthy", tmp_path / "plain-file"
    plain.write_text("not a directory")
    # One broker process (num.cores=1): a node's worker K uses `<dir>-K`, so the unusable
    # file would be worker 0's second dir alone, and the partition may be worker 1's.
    broker = brokers(healthy, **{"log.dirs": f"{healthy},{plain}", "num.cores": "1"})
    assert any("Failed to create or validate data directory" in ln and str(plain) in ln
               for ln in broker.stderr_lines), "".join(broker.stderr_lines)
    assert produce(broker.bootstrap, "served", numbered("d", 3)) == [0, 1, 2]
    assert consume(broker.bootstrap, "served") == list(enumerate(numbered("d", 3)))
    assert (healthy / "served-0").is_dir()
    answer = wire.request(broker.bootstrap, ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})
    described = {r.log_dir: r for r in answer.results}
    assert described[str(plain)].error_code == int(ErrorCode.KAFKA_STORAGE_ERROR)
    assert described[str(plain)].total_bytes == -1 and described[str(plain)].topics == []
    assert described[str(healthy)].error_code == 0
    printed = tool(log_dirs.main, "--bootstrap-server", broker.bootstrap, "--describe")
    assert printed.rc == 0, printed.err
    shown = {d["logDir"]: d for d in
             json.loads(printed.out.splitlines()[2])["brokers"][0]["logDirs"]}
    assert shown[str(plain)] == {"logDir": str(plain), "error": "KAFKA_STORAGE_ERROR",
                                 "partitions": []}
    assert shown[str(healthy)]["error"] is None
    assert plain.read_text() == "not a directory"


def test_an_unusable_first_dir_stops_the_start_naming_it(tmp_path: Path) -> None:
    """The first of log.dirs holds meta.properties (and a single broker's metadata), as
    Kafka's metadata.log.dir defaults to it: Kafka 4.1 does not start without it."""
    healthy, plain = tmp_path / "healthy", tmp_path / "plain-file"
    plain.write_text("not a directory")
    result = _run_failing([sys.executable, "-m", "pybroker", "--defaults",
                           "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                           "--override", f"log.dirs={plain},{healthy}"])
    reason = result.stderr.strip().splitlines()[-1]
    assert f"Encountered I/O error in metadata log directory {plain}. Cannot continue" in \
        reason, reason
    assert not (healthy / "meta.properties").exists()  # nothing was loaded or written


def test_no_usable_dir_stops_the_start_naming_each(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_text("x")
    second.write_text("y")
    result = _run_failing([sys.executable, "-m", "pybroker", "--defaults",
                           "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                           "--override", f"log.dirs={first},{second}"])
    reason = result.stderr.strip().splitlines()[-1]
    assert "none of the specified log dirs can be created or validated" in reason, reason
    assert str(first) in reason and str(second) in reason, reason


def test_two_embedded_brokers_exclude_each_other(tmp_path: Path) -> None:
    """flock belongs to the open file, so brokers in one process are kept apart too."""
    with serving_broker(tmp_path):
        with pytest.raises(LogDirInUse, match="in use"):
            LogDirLocks([tmp_path])
    held = LogDirLocks([tmp_path])  # released by the clean stop
    try:
        assert (tmp_path / LOCK_FILE).read_text().strip().isdigit()
    finally:
        held.release()


def test_all_locks_or_none(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    held_b = LogDirLocks([b])
    with pytest.raises(LogDirInUse):
        LogDirLocks([a, b])
    held_b.release()
    LogDirLocks([a, b]).release()  # `a` was released when `b` failed


@pytest.mark.parametrize("cores, reason", [
    # A node refuses it before any worker starts (pybroker.node.metadata_import), naming the
    # node's node.id, which its worker 0 keeps.
    ("1", "meta.properties belongs to node 7"),
    ("2", "meta.properties belongs to node 7, but node.id is 0"),
])
def test_a_log_dir_of_another_node_is_one_line(tmp_path: Path, cores: str, reason: str) -> None:
    (tmp_path / "meta.properties").write_text("version=1\ncluster.id=abc\nnode.id=7\n")
    result = _run_failing([sys.executable, "-m", "pybroker", "--defaults",
                           "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                           "--override", f"log.dirs={tmp_path}",
                           "--override", f"num.cores={cores}"])
    assert reason in result.stderr.strip().splitlines()[-1], result.stderr


@pytest.mark.parametrize("cores", ["1", "2"])
def test_a_log_dir_of_another_cluster_is_one_line(tmp_path: Path, cores: str) -> None:
    (tmp_path / "meta.properties").write_text("version=1\ncluster.id=abc\nnode.id=0\n")
    result = _run_failing([sys.executable, "-m", "pybroker", "--defaults",
                           "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                           "--override", f"log.dirs={tmp_path}", "--override", "cluster.id=xyz",
                           "--override", f"num.cores={cores}"])
    # A node refuses it before any worker starts, in the single broker's words.
    reason = result.stderr.strip().splitlines()[-1]
    assert "The Cluster ID xyz doesn't match stored clusterId abc in meta.properties" \
        in reason, reason
