"""pybroker's own command-line tools (kafka-console-producer, kafka-console-consumer,
kafka-topics, kafka-configs, kafka-get-offsets, kafka-consumer-groups, kafka-log-dirs), each
run as `python -m pybroker.tools.<x>`, the way bin/ runs them.

Producing: one line per record, `headers<TAB>key<TAB>value` with `parse.headers`, `parse.key`
and a `null.marker`, so null keys, values and header values can be written. Consuming: every
`print.*` property on, tab-separated, with a `null.literal`, so null and empty are told apart.
Seeking to a timestamp: kafka-get-offsets `--time`, then the console consumer at that offset.
Group members with static membership: `--consumer-property group.instance.id=`. Group admin:
kafka-consumer-groups `--list`, `--describe --state` / `--members --verbose`, `--reset-offsets
--to-offset`, `--delete`.
Groups: the console consumer with `--group`, which commits what it printed. Isolation levels:
the console consumer's `--isolation-level`, in a group of its own and until it is idle, so that
what it commits on closing shows where it ended.
"""
from __future__ import annotations

from typing import NoReturn

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from compat.base import (
    TIMEOUT_S, Adapter, GroupView, Got, Headers, Member, NotApplicable, ProcessMember,
    ProduceFailed, Rec, Settings,
)

ROOT = Path(__file__).resolve().parents[2]
NULL = "<NULL>"  # null.marker when producing, null.literal when consuming
_LINE = re.compile(r"(?:CreateTime|LogAppendTime):(-?\d+)\tPartition:(\d+)\tOffset:(\d+)\t"
                   r"(.*?)\t(.*?)\t(.*)")


def _tool(name: str, *args: str, stdin: bytes | None = None,
          timeout: float = TIMEOUT_S + 15) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", f"pybroker.tools.{name}", *args], input=stdin,
                          capture_output=True, timeout=timeout, env=env, cwd=ROOT)


def _ok(proc: subprocess.CompletedProcess, what: str) -> str:
    if proc.returncode != 0:
        raise AssertionError(f"{what} exited {proc.returncode}: {_last_line(proc.stderr)}")
    return proc.stdout.decode()


def _last_line(stderr: bytes) -> str:
    lines = [line for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def _field(raw: bytes) -> bytes | None:
    return None if raw == NULL.encode() else raw


def _headers(text: bytes) -> Headers:
    if text == b"NO_HEADERS":
        return ()
    out = []
    for pair in text.split(b","):
        name, _, value = pair.partition(b":")
        out.append((name.decode(), _field(value)))
    return tuple(out)


_PRINT_ALL = ["--property", "print.key=true", "--property", "print.headers=true",
              "--property", "print.timestamp=true", "--property", "print.partition=true",
              "--property", "print.offset=true", "--property", f"null.literal={NULL}"]


def _parse(stdout: bytes) -> list[Got]:
    got = []
    for line in stdout.split(b"\n")[:-1]:
        m = _LINE.fullmatch(line.decode())
        if m is None:
            raise AssertionError(f"unexpected console-consumer line: {line[:120]!r}")
        ts, part, offset = int(m.group(1)), int(m.group(2)), int(m.group(3))
        headers, key, value = (g.encode() for g in m.group(4, 5, 6))
        got.append(Got(part, offset, _field(key), _field(value), _headers(headers), ts))
    return got


NO_SHARE_CONSUMER = ("pybroker's tools have no share consumer: kafka-share-groups "
                     "administers share groups, but no tool (nor pybroker.client) "
                     "sends ShareFetch")


class ConsoleMember(ProcessMember):
    def __init__(self, bootstrap: str, topic: str, group: str,
                 properties: dict[str, str] | None = None) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        extra = [arg for name, value in (properties or {}).items()
                 for arg in ("--consumer-property", f"{name}={value}")]
        super().__init__("kafka-console-consumer", [
            sys.executable, "-m", "pybroker.tools.console_consumer", "--bootstrap-server",
            bootstrap, "--topic", topic, "--group", group, "--from-beginning",
            "--consumer-property", "session.timeout.ms=10000",
            "--consumer-property", "heartbeat.interval.ms=500",
            "--consumer-property", "auto.commit.interval.ms=200", *extra], env=env, cwd=ROOT)


class PybrokerTools(Adapter):
    name = "pybroker-tools"
    order = 50

    def versions(self) -> dict[str, str]:
        from importlib.metadata import PackageNotFoundError, version
        try:
            v = version("pybroker")
        except PackageNotFoundError:
            v = "unknown"
        return {"pybroker": f"{v} (this tree)"}

    def missing(self) -> str | None:
        tools = ROOT / "pybroker" / "tools"
        needed = ("console_producer", "console_consumer", "topics", "configs", "get_offsets",
                  "consumer_groups", "log_dirs")
        absent = [t for t in needed if not (tools / f"{t}.py").exists()]
        return f"pybroker.tools lacks {', '.join(absent)}" if absent else None

    def cannot(self, feature: str) -> str | None:
        if feature == "partition":
            return ("kafka-console-producer cannot choose a partition (as Kafka's); "
                    "its partitioner places records")
        if feature == "timestamp":
            return "kafka-console-producer cannot set a record's timestamp (as Kafka's)"
        if feature == "transactions":
            return "kafka-console-producer has no transactions (as Kafka's)"
        return None

    # -- produce / consume ----------------------------------------------------------------------
    def produce(self, bootstrap: str, topic: str, recs: list[Rec], *, codec: str = "none",
                idempotent: bool = False, config: Settings = None) -> None:
        assert all(r.partition is None and r.timestamp is None for r in recs), \
            "the console producer cannot choose partitions or timestamps"
        null = NULL.encode()
        lines = []
        for r in recs:
            headers = b",".join(k.encode() + b":" + (null if v is None else v)
                                for k, v in r.headers)
            fields = [headers, null if r.key is None else r.key,
                      null if r.value is None else r.value]
            assert not any(b"\t" in f or b"\n" in f for f in fields), "plain text only"
            lines.append(b"\t".join(fields))
        settings = {**({"enable.idempotence": "true"} if idempotent else {}), **(config or {})}
        properties = [arg for name, value in settings.items()
                      for arg in ("--producer-property", f"{name}={value}")]
        proc = _tool("console_producer", "--bootstrap-server", bootstrap, "--topic", topic,
                     "--compression-codec", codec, "--producer-property", "linger.ms=5",
                     *properties,
                     "--property", "parse.key=true", "--property", "parse.headers=true",
                     "--property", f"null.marker={NULL}",
                     stdin=b"\n".join(lines) + b"\n")
        if proc.returncode != 0:
            raise ProduceFailed(_last_line(proc.stderr))

    def _consume(self, *args: str, count: int) -> list[Got]:
        proc = _tool("console_consumer", *args, "--max-messages", str(count),
                     "--timeout-ms", "5000", *_PRINT_ALL)
        return _parse(_ok(proc, "kafka-console-consumer").encode())

    def consume(self, bootstrap: str, topic: str, partitions: list[int],
                count: int) -> list[Got]:
        if len(partitions) == 1:
            return self._consume("--bootstrap-server", bootstrap, "--topic", topic,
                                 "--partition", str(partitions[0]), "--offset", "earliest",
                                 count=count)
        got = self._consume("--bootstrap-server", bootstrap, "--topic", topic,
                            "--from-beginning", count=count)
        return [g for g in got if g.partition in partitions]

    def consume_from(self, bootstrap: str, topic: str, partition: int, offset: int,
                     count: int) -> list[Got]:
        return self._consume("--bootstrap-server", bootstrap, "--topic", topic,
                             "--partition", str(partition), "--offset", str(offset),
                             count=count)

    def consume_from_time(self, bootstrap: str, topic: str, partition: int, timestamp: int,
                          count: int) -> list[Got]:
        out = _ok(_tool("get_offsets", "--bootstrap-server", bootstrap, "--topic", topic,
                        "--partitions", str(partition), "--time", str(timestamp)),
                  "kafka-get-offsets")
        m = re.fullmatch(rf"{re.escape(topic)}:{partition}:(\d+)\n", out)
        assert m, f"kafka-get-offsets printed {out!r}"
        return self.consume_from(bootstrap, topic, partition, int(m.group(1)), count)

    def consume_group(self, bootstrap: str, topic: str, group: str, count: int) -> list[Got]:
        return self._consume("--bootstrap-server", bootstrap, "--topic", topic,
                             "--group", group, "--from-beginning", count=count)

    def consume_to_end(self, bootstrap: str, topic: str, partitions: list[int], count: int,
                       isolation: str) -> tuple[list[Got], dict[int, int]]:
        # No --max-messages: it reads on until idle (past the markers), then commits its
        # position on closing, which kafka-consumer-groups reports.
        group = f"compat-{isolation}-{os.getpid()}-{topic}"
        proc = _tool("console_consumer", "--bootstrap-server", bootstrap, "--topic", topic,
                     "--group", group, "--from-beginning", "--isolation-level", isolation,
                     "--timeout-ms", "2000", *_PRINT_ALL)
        got = [g for g in _parse(_ok(proc, "kafka-console-consumer").encode())
               if g.partition in partitions]
        return got, self.committed(bootstrap, group, topic, partitions)

    def committed(self, bootstrap: str, group: str, topic: str,
                  partitions: list[int]) -> dict[int, int]:
        out = _ok(_tool("consumer_groups", "--bootstrap-server", bootstrap, "--describe",
                        "--group", group), "kafka-consumer-groups --describe")
        found = {}
        for g, t, p, current in re.findall(r"^(\S+)\s+(\S+)\s+(\d+)\s+(\S+)\s", out, re.M):
            if g == group and t == topic:
                found[int(p)] = int(current) if current != "-" else -1
        return {p: found.get(p, -1) for p in partitions}

    def start_member(self, bootstrap: str, topic: str, group: str) -> Member:
        return ConsoleMember(bootstrap, topic, group)

    def start_member_as(self, bootstrap: str, topic: str, group: str, *,
                        cooperative: bool = False, instance_id: str | None = None) -> Member:
        properties = {}
        if cooperative:
            properties["partition.assignment.strategy"] = \
                "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
        if instance_id is not None:
            properties["group.instance.id"] = instance_id
        member = ConsoleMember(bootstrap, topic, group, properties)
        try:  # a refused property ends the consumer at once, with the reason on stderr
            member.proc.wait(1.5)
        except subprocess.TimeoutExpired:
            return member
        member.stop()
        raise AssertionError(f"kafka-console-consumer exited {member.proc.returncode}: "
                             f"{member.debug()}")

    def offsets_for_times(self, bootstrap: str, topic: str,
                          times: dict[int, int]) -> dict[int, tuple[int, int] | None]:
        out: dict[int, tuple[int, int] | None] = {}
        for partition, timestamp in times.items():
            printed = _ok(_tool("get_offsets", "--bootstrap-server", bootstrap, "--topic", topic,
                                "--partitions", str(partition), "--time", str(timestamp)),
                          "kafka-get-offsets")
            # Kafka's GetOffsetShell leaves out a partition with no such record.
            m = re.fullmatch(rf"{re.escape(topic)}:{partition}:(\d+)\n", printed)
            assert m or printed == "", f"kafka-get-offsets printed {printed!r}"
            if m is None:
                out[partition] = None
                continue
            offset = int(m.group(1))
            (got,) = self.consume_from(bootstrap, topic, partition, offset, 1)
            out[partition] = (offset, got.timestamp)
            # GetOffsetShell prints offsets only, as pybroker's: the timestamp is read back.
            self.note("kafka-get-offsets prints offsets only: timestamps read back")
        return out

    # -- admin ----------------------------------------------------------------------------------
    def create_topic(self, bootstrap: str, topic: str, partitions: int,
                     configs: dict[str, str]) -> None:
        args = ["--bootstrap-server", bootstrap, "--create", "--topic", topic,
                "--partitions", str(partitions), "--replication-factor", "1"]
        for k, v in configs.items():
            args += ["--config", f"{k}={v}"]
        _ok(_tool("topics", *args), "kafka-topics --create")

    def list_topics(self, bootstrap: str) -> set[str]:
        return set(_ok(_tool("topics", "--bootstrap-server", bootstrap, "--list"),
                       "kafka-topics --list").split())

    def partition_count(self, bootstrap: str, topic: str) -> int:
        out = _ok(_tool("topics", "--bootstrap-server", bootstrap, "--describe", "--topic",
                        topic), "kafka-topics --describe")
        m = re.search(rf"Topic: {re.escape(topic)}\tTopicId: \S+\tPartitionCount: (\d+)", out)
        assert m, f"kafka-topics --describe printed {out[:200]!r}"
        rows = re.findall(rf"^\tTopic: {re.escape(topic)}\tPartition: \d+", out, re.M)
        assert len(rows) == int(m.group(1)), f"{len(rows)} partition rows, " \
            f"PartitionCount: {m.group(1)}"
        return int(m.group(1))

    def add_partitions(self, bootstrap: str, topic: str, total: int) -> None:
        _ok(_tool("topics", "--bootstrap-server", bootstrap, "--alter", "--topic", topic,
                  "--partitions", str(total)), "kafka-topics --alter")

    def delete_topic(self, bootstrap: str, topic: str) -> None:
        _ok(_tool("topics", "--bootstrap-server", bootstrap, "--delete", "--topic",
                  topic), "kafka-topics --delete")

    def describe_configs(self, bootstrap: str, topic: str) -> dict[str, str]:
        out = _ok(_tool("configs", "--bootstrap-server", bootstrap, "--describe", "--all",
                        "--entity-type", "topics", "--entity-name", topic),
                  "kafka-configs --describe")
        return dict(re.findall(r"^  ([^=\s]+)=(\S*) sensitive=", out, re.M))

    def set_config(self, bootstrap: str, topic: str, name: str, value: str) -> None:
        _ok(_tool("configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type",
                  "topics", "--entity-name", topic, "--add-config", f"{name}={value}"),
            "kafka-configs --alter --add-config")

    def delete_config(self, bootstrap: str, topic: str, name: str) -> None:
        _ok(_tool("configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type",
                  "topics", "--entity-name", topic, "--delete-config", name),
            "kafka-configs --alter --delete-config")

    def list_groups(self, bootstrap: str) -> set[str]:
        return set(_ok(_tool("consumer_groups", "--bootstrap-server", bootstrap, "--list"),
                       "kafka-consumer-groups --list").split())

    def describe_group(self, bootstrap: str, group: str) -> GroupView:
        state_out = _ok(_tool("consumer_groups", "--bootstrap-server", bootstrap, "--describe",
                              "--group", group, "--state"),
                        "kafka-consumer-groups --describe --state")
        rows = [line.split() for line in state_out.splitlines()
                if line.startswith(group + " ")]
        assert len(rows) == 1, f"--state printed {state_out!r}"
        # GROUP, COORDINATOR host:port, (ID), ASSIGNMENT-STRATEGY, STATE, #MEMBERS
        strategy, state = rows[0][3], rows[0][4]
        members_out = _ok(_tool("consumer_groups", "--bootstrap-server", bootstrap,
                                "--describe", "--group", group, "--members", "--verbose"),
                          "kafka-consumer-groups --describe --members --verbose")
        members = []
        for line in members_out.splitlines():
            if not line.startswith(group + " "):
                continue
            # ... #PARTITIONS CURRENT-EPOCH CURRENT-ASSIGNMENT TARGET-EPOCH TARGET-ASSIGNMENT
            assignment = line.split()[-3]
            member: dict[str, list[int]] = {}
            if assignment != "-":
                for part in assignment.split(";"):
                    topic, _, partitions = part.rpartition(":")
                    member[topic] = [int(p) for p in partitions.split(",")]
            members.append(member)
        return GroupView(state, "" if strategy == "-" else strategy, tuple(members))

    def alter_group_offsets(self, bootstrap: str, group: str, topic: str,
                            offsets: dict[int, int]) -> None:
        for partition, offset in offsets.items():  # --to-offset: one offset per run
            out = _ok(_tool("consumer_groups", "--bootstrap-server", bootstrap,
                            "--reset-offsets", "--group", group, "--topic",
                            f"{topic}:{partition}", "--to-offset", str(offset), "--execute"),
                      "kafka-consumer-groups --reset-offsets")
            assert re.search(rf"^{re.escape(group)}\s+{re.escape(topic)}\s+{partition}\s+"
                             rf"{offset}\s*$", out, re.M), f"--reset-offsets printed {out!r}"

    def delete_group(self, bootstrap: str, group: str) -> None:
        out = _ok(_tool("consumer_groups", "--bootstrap-server", bootstrap, "--delete",
                        "--group", group), "kafka-consumer-groups --delete")
        assert "was successful" in out, f"--delete printed {out!r}"

    def log_dir_sizes(self, bootstrap: str, topic: str) -> dict[int, int]:
        printed = _ok(_tool("log_dirs", "--bootstrap-server", bootstrap, "--describe",
                            "--topic-list", topic), "kafka-log-dirs --describe")
        described = json.loads(printed.splitlines()[-1])
        sizes: dict[int, int] = {}
        for broker in described["brokers"]:
            for log_dir in broker["logDirs"]:
                assert log_dir["error"] is None, log_dir
                for p in log_dir["partitions"]:
                    name, _, partition = p["partition"].rpartition("-")
                    if name == topic and not p["isFuture"]:
                        sizes[int(partition)] = p["size"]
        return sizes

    def share_client(self) -> NoReturn:
        raise NotApplicable(NO_SHARE_CONSUMER)


ADAPTER = PybrokerTools()
