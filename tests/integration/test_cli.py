"""The command line: `python -m pybroker` / `bin/pybroker-server` with a server.properties.

Issue #3: the broker starts from a copy of config/standalone/server.properties, logs with timestamps and
levels to stderr, serves stock clients, exits 0 on SIGTERM and SIGINT within a few seconds, and
refuses bad configuration with a non-zero exit and a one-line reason (no traceback).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import pybroker
from pybroker.config import BROKER_CONFIG_DEFS, load_broker_config, load_properties
from pybroker.node.worker import cores_to_use, worker_log_dir
from pybroker.testing.broker import StartWatch
from tests.helpers import ROOT
from tests.integration.cli_runs import LOG_LINE, _env, _run_failing

SERVER_PROPERTIES = ROOT / "config" / "standalone" / "server.properties"


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    target = tmp_path / "server.properties"
    shutil.copy(SERVER_PROPERTIES, target)
    return target


class Server:
    """A broker started from the command line; stderr collected in a thread."""

    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     text=True, env=_env(), cwd=ROOT)
        self.lines: list[str] = []
        self.port: int | None = None
        self._started = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        # At the default num.cores (every CPU) the server is a node of several brokers here.
        watch = StartWatch()
        for line in self.proc.stderr:
            self.lines.append(line)
            port = watch.feed(line)
            if port is not None and self.port is None:
                self.port = port
                self._started.set()
        self._started.set()

    def wait_started(self, timeout: float = 30) -> str:
        self._started.wait(timeout)
        assert self.port is not None, "broker did not start:\n" + self.stderr
        return f"127.0.0.1:{self.port}"

    def signal_and_wait(self, signum: int, timeout: float = 10) -> tuple[int, float]:
        start = time.monotonic()
        self.proc.send_signal(signum)
        rc = self.proc.wait(timeout)
        self._reader.join(5)
        return rc, time.monotonic() - start

    @property
    def stderr(self) -> str:
        return "".join(self.lines)

    def stop_once_started(self) -> int:
        """Wait for "listening", then SIGTERM; the exit code (the process is gone after)."""
        try:
            self.wait_started()
            rc, _ = self.signal_and_wait(signal.SIGTERM)
        finally:
            self.kill()
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


# config/standalone/server.properties advertises 127.0.0.1:9092; with the listener moved to an ephemeral
# port the advertised one must follow (port 0 there means "the bound port"), as in Kafka.
# Its HTTP side door (127.0.0.1:9644) moves to an ephemeral port too.
LISTENER_OVERRIDES = ["--override", "listeners=PLAINTEXT://127.0.0.1:0",
                      "--override", "advertised.listeners=PLAINTEXT://127.0.0.1:0",
                      "--override", "http.listeners=http://127.0.0.1:0"]


def _module_args(config: Path, log_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pybroker", str(config), *LISTENER_OVERRIDES,
            "--override", f"log.dirs={log_dir}", *extra]


def _produce_consume(bootstrap: str, topic: str, count: int = 10) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=f"cli-{i}".encode())
    assert producer.flush(20) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cli-test",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            got.append(msg.value())
        assert got == [f"cli-{i}".encode() for i in range(count)]
    finally:
        consumer.close()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_starts_serves_and_exits_cleanly(config_file: Path, tmp_path: Path, signum: int) -> None:
    log_dir = tmp_path / "logs"
    server = Server(_module_args(config_file, log_dir))
    try:
        bootstrap = server.wait_started()
        _produce_consume(bootstrap, "cli-topic")
        rc, took = server.signal_and_wait(signum)
    finally:
        server.kill()
    assert rc == 0, server.stderr
    assert took < 5, f"shutdown took {took:.1f}s"
    assert "Traceback" not in server.stderr, server.stderr
    log_lines = [ln for ln in server.lines if ln.strip() and not ln.startswith("%")]
    assert log_lines, "nothing logged"
    for line in log_lines:
        assert LOG_LINE.match(line), f"log line without timestamp and level: {line!r}"
    assert any("shut down cleanly" in ln for ln in log_lines), server.stderr
    # The file leaves num.cores at its default, every CPU: broker K of the node has `<dir>-K`.
    cores = cores_to_use(load_broker_config(config_file))
    dirs = [log_dir] + [Path(worker_log_dir(str(log_dir), k)) for k in range(1, cores)]
    assert [d for d in dirs if not (d / ".kafka_cleanshutdown").exists()] == []


def test_bin_script(config_file: Path, tmp_path: Path) -> None:
    script = ROOT / "bin" / "pybroker-server"
    server = Server([str(script), str(config_file), *LISTENER_OVERRIDES,
                     "--override", f"log.dirs={tmp_path / 'logs'}"])
    try:
        # Generous: on a fresh checkout the script first sets up .venv (bin/_bootstrap).
        bootstrap = server.wait_started(timeout=300)
        _produce_consume(bootstrap, "bin-topic", count=3)
        rc, took = server.signal_and_wait(signal.SIGTERM)
    finally:
        server.kill()
    assert rc == 0, server.stderr
    assert took < 5


def test_invalid_value_exits_with_one_line(config_file: Path, tmp_path: Path) -> None:
    result = _run_failing(_module_args(config_file, tmp_path / "logs",
                                       "--override", "num.partitions=abc"))
    assert "num.partitions" in result.stderr
    assert "abc" in result.stderr


@pytest.mark.parametrize(("listeners", "missing"), [
    ("SSL://127.0.0.1:0", "ssl.keystore.location"),
    ("SASL_SSL://127.0.0.1:0", "sasl.enabled.mechanisms"),
    ("SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms"),
    ("PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.keystore.location")])
def test_secure_listener_without_its_settings_exits_with_one_line(
        config_file: Path, tmp_path: Path, listeners: str, missing: str) -> None:
    """Never plaintext on a port the operator configured for TLS or SASL: a TLS listener
    without key material, or a SASL one left with Kafka's default GSSAPI, stops the broker
    with one line naming the setting."""
    inter_broker = listeners.split("://")[0]
    result = _run_failing([sys.executable, "-m", "pybroker", str(config_file),
                           "--override", f"listeners={listeners}",
                           "--override", f"advertised.listeners={listeners}",
                           "--override", f"inter.broker.listener.name={inter_broker}",
                           "--override", f"log.dirs={tmp_path / 'logs'}"])
    errors = [line for line in result.stderr.splitlines()
              if line.startswith("pybroker-server: ")]
    assert len(errors) == 1 and missing in errors[0], result.stderr


@pytest.mark.parametrize("listeners", ["SSL://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"])
def test_only_secure_listeners_and_no_inter_broker_listener_named_exits(
        config_file: Path, tmp_path: Path, listeners: str) -> None:
    """Kafka refuses to start when the inter-broker listener (security.inter.broker.protocol's
    PLAINTEXT by default) is not advertised, rather than using another listener: one line,
    Kafka's words."""
    result = _run_failing([sys.executable, "-m", "pybroker", str(config_file),
                           "--override", f"listeners={listeners}",
                           "--override", f"advertised.listeners={listeners}",
                           "--override", "sasl.enabled.mechanisms=PLAIN",
                           "--override", "sasl.jaas.config=org.apache.kafka.common.security."
                                         'plain.PlainLoginModule required user_a="b";',
                           "--override", f"log.dirs={tmp_path / 'logs'}"])
    errors = [line for line in result.stderr.splitlines()
              if line.startswith("pybroker-server: ")]
    name = listeners.split("://")[0]
    assert len(errors) == 1 and (
        "inter.broker.listener.name must be a listener name defined in advertised.listeners. "
        f"The valid options based on currently configured listeners are {name}") in errors[0], \
        result.stderr


def test_override_without_equals_is_an_error(config_file: Path, tmp_path: Path) -> None:
    result = _run_failing(_module_args(config_file, tmp_path / "logs",
                                       "--override", "num.partitions"))
    assert "num.partitions" in result.stderr


def test_missing_config_file(tmp_path: Path) -> None:
    result = _run_failing(_module_args(tmp_path / "nope.properties", tmp_path / "logs"))
    assert "nope.properties" in result.stderr


def test_log_dir_under_a_regular_file(config_file: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain-file"
    plain.write_text("not a directory")
    result = _run_failing(_module_args(config_file, plain / "x"))
    assert str(plain / "x") in result.stderr
    result = _run_failing(_module_args(config_file, Path("/etc/passwd/x")))
    assert "/etc/passwd/x" in result.stderr


def test_read_only_log_dir(config_file: Path, tmp_path: Path) -> None:
    if os.geteuid() == 0:  # root writes to a chmod 555 directory; sysfs refuses even root
        ro = Path("/sys")
        if not ro.is_dir():
            pytest.skip("no read-only directory available to root")
        result = _run_failing(_module_args(config_file, ro))
        assert "/sys" in result.stderr
        return
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        result = _run_failing(_module_args(config_file, ro))
        assert str(ro) in result.stderr
        _run_failing(_module_args(config_file, ro / "sub"))
    finally:
        ro.chmod(0o755)


def test_port_in_use_exits_with_one_line(config_file: Path, tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _run_failing([sys.executable, "-m", "pybroker", str(config_file),
                               "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                               "--override", f"log.dirs={tmp_path / 'logs'}"])
    assert "in use" in result.stderr.lower()


def test_unknown_key_is_a_warning(config_file: Path, tmp_path: Path) -> None:
    with open(config_file, "a") as f:
        f.write("\nsome.unknown.key=42\n")
    server = Server(_module_args(config_file, tmp_path / "logs",
                                 "--override", "another.unknown.key=x"))
    assert server.stop_once_started() == 0, server.stderr
    warnings = [ln for ln in server.lines if " WARNING " in ln]
    for key in ("some.unknown.key", "another.unknown.key"):  # each reported once
        assert len([ln for ln in warnings if key in ln]) == 1, server.stderr


def _run_server(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    """`python -m pybroker ARGS` to completion; a broker that starts instead of exiting
    fails the test by its timeout."""
    return subprocess.run([sys.executable, "-m", "pybroker", *args], capture_output=True,
                          text=True, env=_env(), cwd=ROOT, timeout=timeout)


def test_no_argument_prints_usage_and_starts_nothing() -> None:
    # Kafka's kafka-server-start.sh: "USAGE: $0 [-daemon] server.properties [--override
    # property=value]*" and exit 1. pybroker used to start on built-in defaults instead,
    # writing to /tmp/kafka-logs.
    result = _run_server(timeout=15)
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [
        "USAGE: pybroker-server server.properties [--override property=value]*",
        "       pybroker-server --defaults [--override property=value]*"]
    assert result.stdout == ""


def test_defaults_flag_runs_on_built_in_defaults(tmp_path: Path) -> None:
    server = Server([sys.executable, "-m", "pybroker", "--defaults", *LISTENER_OVERRIDES,
                     "--override", f"log.dirs={tmp_path / 'logs'}"])
    assert server.stop_once_started() == 0, server.stderr
    assert (tmp_path / "logs" / ".kafka_cleanshutdown").exists()


def test_defaults_flag_with_a_config_file_is_one_line(config_file: Path) -> None:
    result = _run_failing([sys.executable, "-m", "pybroker", str(config_file), "--defaults"])
    assert result.stderr == (f"pybroker-server: --defaults runs without a config file; got "
                             f"{config_file} (see --help)\n")


def test_unknown_flag_is_one_line() -> None:
    result = _run_failing([sys.executable, "-m", "pybroker", "--no-such-flag"])
    assert result.returncode == 1
    assert "--no-such-flag" in result.stderr


def test_help_says_what_the_config_file_is_and_where_data_goes() -> None:
    result = _run_server("--help")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "usage: pybroker-server server.properties [--override property=value]*" in text
    assert "server.properties is a broker config file in Kafka's format" in text
    # where data goes: log.dirs, as the shipped file sets it, and the built-in default
    shipped = load_properties(SERVER_PROPERTIES)["log.dirs"]
    assert f"Data goes to the directories of log.dirs (the example file: {shipped})" in text
    built_in = ",".join(BROKER_CONFIG_DEFS["log.dir"].default)
    assert f"without log.dirs and log.dir, to {built_in}. --defaults runs on the built-in " \
           "defaults alone" in text


def test_version() -> None:
    result = _run_server("--version")
    assert (result.returncode, result.stdout) == (0, f"{pybroker.__version__} (pybroker)\n")
    # One source of truth: the installed metadata reads pybroker.__version__.
    from importlib.metadata import version
    assert version("pybroker") == pybroker.__version__


def test_inert_key_is_a_one_line_warning_at_start(config_file: Path, tmp_path: Path) -> None:
    """A key whose feature is not built yet (num.replica.fetchers: one fetcher task per
    source broker is all replication has) starts the broker, with one warning line at start
    that names the key and the feature."""
    server = Server(_module_args(config_file, tmp_path / "logs",
                                 "--override", "num.replica.fetchers=2"))
    try:
        server.wait_started()
        rc, _ = server.signal_and_wait(signal.SIGTERM)
    finally:
        server.kill()
    assert rc == 0, server.stderr
    warnings = [ln for ln in server.lines
                if " WARNING " in ln and "num.replica.fetchers" in ln]
    assert len(warnings) == 1, server.stderr
    assert "no effect yet" in warnings[0] and "fetchers" in warnings[0]


def _free_port() -> int:
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_cluster_file_without_zookeeper_fails_in_one_line(tmp_path: Path) -> None:
    """The three-broker example started with no ZooKeeper running: after
    zookeeper.connection.timeout.ms, one line naming ZooKeeper's address, exit non-zero, and
    the log dir untouched (ZooKeeper is reached before any log dir is opened)."""
    log_dir = tmp_path / "logs"
    port = _free_port()
    result = _run_failing([sys.executable, "-m", "pybroker",
                           str(ROOT / "config" / "cluster" / "server-1.properties"),
                           *LISTENER_OVERRIDES, "--override", f"log.dirs={log_dir}",
                           "--override", f"zookeeper.connect=127.0.0.1:{port}",
                           "--override", "zookeeper.connection.timeout.ms=1500"])
    reason = result.stderr.strip().splitlines()[-1]
    assert f"ZooKeeper at 127.0.0.1:{port} did not answer within " \
        "zookeeper.connection.timeout.ms=1500" in reason
    # What to do about it, either way (issue #27): start ZooKeeper, or the standalone file.
    assert "bin/zookeeper-server-start.sh config/zookeeper.properties" in reason
    assert "bin/pybroker-server config/standalone/server.properties" in reason
    assert not log_dir.exists()


# `pybroker-server` run in-process with a canary: an object in a reference cycle, so that
# only a collection frees it, whose finalizer says so. SIGTERM once the broker (or the node)
# logs that it serves; prints the exit code.
_CANARY_RUN = """
import logging, os, signal, sys, threading
from pathlib import Path
from pybroker import __main__ as server
class Canary:
    def __del__(self, write=os.write):  # bound now: os is gone by the final collection
        write(2, b"CANARY COLLECTED\\n")
canary = Canary()
canary.cycle = canary
log_dir, cores = Path(sys.argv[1]), sys.argv[2]
serving = threading.Event()
class Serving(logging.Handler):
    def emit(self, record):
        text = record.getMessage()
        if "brokers ready" in text or (cores == "1" and "listening on" in text):
            serving.set()
logging.getLogger("pybroker").addHandler(Serving())
def stop_when_serving():
    serving.wait(120)
    os.kill(os.getpid(), signal.SIGTERM)
threading.Thread(target=stop_when_serving, daemon=True).start()
code = server.main(["--defaults", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                    "--override", f"log.dirs={log_dir}", "--override", f"num.cores={cores}"])
print("exit", code, flush=True)
sys.exit(code)
"""


@pytest.mark.parametrize("cores", ["1", "2"])
def test_a_clean_stop_leaves_the_heap_to_the_kernel(tmp_path: Path, cores: str) -> None:
    """A broker (and a node's supervisor) that stopped cleanly exits without CPython's final
    collection of its whole heap (pybroker.__main__._exit_without_final_collection: 0.2-0.6 s
    of every stop, once per worker of a node): an object that only a collection would free
    is never finalized. Its stop is clean all the same (exit 0, the clean shutdown marker)."""
    result = subprocess.run([sys.executable, "-c", _CANARY_RUN, str(tmp_path / "logs"), cores],
                            capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "exit 0" in result.stdout
    assert "shut down cleanly" in result.stderr
    assert (tmp_path / "logs" / ".kafka_cleanshutdown").exists()
    assert "CANARY COLLECTED" not in result.stderr
