"""kafka-transactions, kafka-dump-log and kafka-console-consumer --isolation-level against a
real broker, with transactions written by confluent-kafka's transactional producer.

What is checked is what an operator relies on: `list` and `describe` show the coordinator's
view of a transaction; `describe-producers` shows where an open transaction starts on a
partition; `abort --start-offset` ends a transaction left open (a producer that began,
produced and vanished), after which a read_committed consumer reaches the end of the
partition; `find-hanging` does not report a healthy ongoing transaction; the segment dump shows
the commit and abort markers and the aborted transaction in the `.txnindex`.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import trio

from pybroker.tools import console_consumer, console_producer, dump_log, topics, transactions


def _table(out: str) -> list[list[str]]:
    """Kafka's prettyPrintTable back into cells (every cell ends with a tab)."""
    rows = []
    for line in out.splitlines():
        assert line.endswith("\t"), repr(line)
        rows.append([cell.strip() for cell in line[:-1].split("\t")])
    return rows


def _topic(tool, bootstrap: str, name) -> str:  # type: ignore[no-untyped-def]
    t = name("txn")
    assert tool(topics.main, "--bootstrap-server", bootstrap, "--create", "--topic", t,
                "--partitions", "1").rc == 0
    return t


def _txn_producer(bootstrap: str, txn_id: str) -> Any:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "linger.ms": 0, "transaction.timeout.ms": 120000, "log_level": 0})
    producer.init_transactions(30)
    return producer


def _send(tool, bootstrap: str, topic: str, *values: str) -> None:  # type: ignore[no-untyped-def]
    stdin = "".join(v + "\n" for v in values).encode()
    assert tool(console_producer.main, "--bootstrap-server", bootstrap, "--topic", topic,
                "--sync", stdin=stdin).rc == 0


def _consume(tool, bootstrap: str, topic: str, *flags: str) -> list[str]:  # type: ignore[no-untyped-def]
    r = tool(console_consumer.main, "--bootstrap-server", bootstrap, "--topic", topic,
             "--from-beginning", "--timeout-ms", "1500", *flags)
    assert "Processed a total of" in r.err, r.err
    return r.lines


def _segment(kafka, topic: str) -> Path:  # type: ignore[no-untyped-def]
    kafka.broker.logs.get(topic, 0).flush()
    return Path(kafka.broker.config.log_dirs[0]) / f"{topic}-0" / "00000000000000000000.log"


def test_list_describe_and_producers_of_a_transaction_then_its_commit(  # type: ignore[no-untyped-def]
        kafka, tool, bootstrap, name) -> None:
    t = _topic(tool, bootstrap, name)
    tid = name("tid")
    base = (transactions.main, "--bootstrap-server", bootstrap)
    producer = _txn_producer(bootstrap, tid)
    producer.begin_transaction()
    producer.produce(t, b"one", partition=0)
    producer.produce(t, b"two", partition=0)
    assert producer.flush(10) == 0

    r = tool(*base, "list")
    assert r.rc == 0, r.err
    rows = _table(r.out)
    assert rows[0] == list(transactions.LIST_HEADERS)
    mine = [row for row in rows[1:] if row[0] == tid]
    assert len(mine) == 1 and mine[0][3] == "Ongoing", rows
    coordinator, producer_id = mine[0][1], mine[0][2]
    assert int(producer_id) >= 0
    r = tool(*base, "list", "--duration-filter", "0")  # running for more than 0 ms
    assert [tid, coordinator, producer_id, "Ongoing"] in _table(r.out)
    r = tool(*base, "list", "--duration-filter", "3600000")  # ... and for more than an hour
    assert (r.rc, [row for row in _table(r.out) if row[0] == tid]) == (0, [])

    r = tool(*base, "describe", "--transactional-id", tid)
    assert r.rc == 0, r.err
    header, row = _table(r.out)
    assert header == list(transactions.DESCRIBE_HEADERS)
    assert row[:3] == [coordinator, tid, producer_id]
    assert row[4:6] == ["Ongoing", "120000"]
    assert int(row[6]) > 0 and 0 <= int(row[7]) < 60_000
    assert row[8] == f"{t}-0"

    r = tool(*base, "describe-producers", "--topic", t, "--partition", "0")
    assert r.rc == 0, r.err
    header, row = _table(r.out)
    assert header == list(transactions.PRODUCER_HEADERS)
    assert row[0] == producer_id and row[3] == "1" and row[5] == "0"

    # A healthy transaction is not hanging, even when every open one is old enough to look.
    for scope in (("--topic", t), ("--topic", t, "--partition", "0"), ("--broker-id", "0")):
        r = tool(*base, "find-hanging", *scope, "--max-transaction-timeout", "0")
        assert (r.rc, _table(r.out)) == (0, [list(transactions.HANGING_HEADERS)]), r.err

    producer.commit_transaction(30)
    r = tool(*base, "describe", "--transactional-id", tid)
    assert _table(r.out)[1][4] in ("PrepareCommit", "CompleteCommit")
    r = tool(*base, "describe-producers", "--topic", t, "--partition", "0")
    assert _table(r.out)[1][5] == "None"

    log = _segment(kafka, t)
    r = tool(dump_log.main, "--files", str(log), "--deep-iteration")
    assert r.rc == 0, r.err
    batches = [x for x in r.lines if x.startswith("baseOffset:")]
    assert "isTransactional: true isControl: false" in batches[0]
    assert "isTransactional: true isControl: true" in batches[-1]
    assert re.search(r"^\| offset: 2 .* endTxnMarker: COMMIT coordinatorEpoch: \d+$",
                     r.lines[-1]), r.lines


def test_describe_an_unknown_transactional_id(tool, bootstrap, name) -> None:  # type: ignore[no-untyped-def]
    tid = name("nobody")
    r = tool(transactions.main, "--bootstrap-server", bootstrap, "describe",
             "--transactional-id", tid)
    assert (r.rc, r.out) == (1, "")
    assert r.err == (f"Failed to describe transaction state of transactional-id `{tid}`: "
                     f"DescribeTransactions request for transactionalId `{tid}` failed because "
                     "the ID could not be found. Enable debug logging for additional detail.\n")


def test_abort_a_transaction_left_open_unblocks_read_committed(  # type: ignore[no-untyped-def]
        kafka, tool, bootstrap, name) -> None:
    t = _topic(tool, bootstrap, name)
    base = (transactions.main, "--bootstrap-server", bootstrap)
    _send(tool, bootstrap, t, "before")
    producer = _txn_producer(bootstrap, name("vanished"))
    producer.begin_transaction()
    producer.produce(t, b"left-open", partition=0)
    assert producer.flush(10) == 0
    _send(tool, bootstrap, t, "after")

    # The open transaction at offset 1 holds the last stable offset there.
    assert _consume(tool, bootstrap, t, "--isolation-level", "read_committed") == ["before"]
    r = tool(*base, "describe-producers", "--topic", t, "--partition", "0")
    starts = [row[5] for row in _table(r.out)[1:]]
    assert "1" in starts, r.out

    r = tool(*base, "abort", "--topic", t, "--partition", "0", "--start-offset", "1")
    assert (r.rc, r.out, r.err) == (0, "", "")
    assert _consume(tool, bootstrap, t, "--isolation-level", "read_committed") == [
        "before", "after"]
    assert _consume(tool, bootstrap, t, "--isolation-level", "read_uncommitted") == [
        "before", "left-open", "after"]

    r = tool(*base, "abort", "--topic", t, "--partition", "0", "--start-offset", "1")
    assert r.rc == 1
    assert r.err == f"Could not find any open transactions starting at offset 1 on partition {t}-0\n"

    log = _segment(kafka, t)
    r = tool(dump_log.main, "--files", str(log), "--deep-iteration")
    assert re.search(r"^\| offset: 3 .* endTxnMarker: ABORT coordinatorEpoch: \d+$",
                     r.out, re.M), r.out
    txnindex = log.with_suffix(".txnindex")
    r = tool(dump_log.main, "--files", str(txnindex))
    assert r.rc == 0, r.err
    assert re.fullmatch(r"version: 0 producerId: \d+ firstOffset: 1 lastOffset: 3 "
                        r"lastStableOffset: \d+", r.lines[1]), r.lines
    del producer


def test_console_consumer_isolation_levels(tool, bootstrap, name) -> None:  # type: ignore[no-untyped-def]
    t = _topic(tool, bootstrap, name)
    producer = _txn_producer(bootstrap, name("ca"))
    for value, commit in ((b"kept-1", True), (b"dropped", False), (b"kept-2", True)):
        producer.begin_transaction()
        producer.produce(t, value, partition=0)
        assert producer.flush(10) == 0  # an abort would drop what is still queued
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    committed = ["kept-1", "kept-2"]
    assert _consume(tool, bootstrap, t, "--isolation-level", "read_committed") == committed
    assert _consume(tool, bootstrap, t, "--consumer-property",
                    "isolation.level=read_committed") == committed
    everything = ["kept-1", "dropped", "kept-2"]
    assert _consume(tool, bootstrap, t) == everything  # read_uncommitted, as Kafka's default
    assert _consume(tool, bootstrap, t, "--isolation-level", "read_uncommitted") == everything


def test_describe_producers_of_an_idempotent_producer(tool, bootstrap, name) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import Producer

    t = _topic(tool, bootstrap, name)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 0})
    for i in range(3):
        producer.produce(t, b"v%d" % i, partition=0)
    assert producer.flush(10) == 0
    r = tool(transactions.main, "--bootstrap-server", bootstrap, "describe-producers",
             "--topic", t, "--partition", "0")
    assert r.rc == 0, r.err
    header, *rows = _table(r.out)
    assert len(rows) == 1
    pid, epoch, coordinator_epoch, last_seq, last_ts, start = rows[0]
    assert int(pid) >= 0 and epoch == "0" and coordinator_epoch == "-1"
    assert last_seq == "2" and int(last_ts) > 0 and start == "None"

    r = tool(transactions.main, "--bootstrap-server", bootstrap, "describe-producers",
             "--topic", name("missing"), "--partition", "0")
    assert r.rc == 1 and r.err.startswith("Failed to describe producers for partition ")
    assert r.err.endswith(". Enable debug logging for additional detail.\n")


async def _leave_unknown_transaction(bootstrap: str, topic: str) -> tuple[int, int]:
    """A transactional batch whose producer no coordinator knows: the hanging transaction
    find-hanging exists to find. This broker, like Kafka since 3.6 (KIP-890), refuses such a
    batch; the caller switches its verification off first, as on the brokers where hanging
    transactions came from."""
    from protocol.api_keys import ApiKey
    from protocol.records.record import Record, build_batch
    from pybroker.client import TopicPartition, open_client
    from pybroker.client.log_io import produce_batch

    async with open_client(bootstrap) as client:
        resp = await client.request(ApiKey.INIT_PRODUCER_ID, {
            "transactional_id": None, "transaction_timeout_ms": 60000})
        assert resp.error_code == 0
        batch = build_batch([Record(None, b"stuck")], producer_id=resp.producer_id,
                            producer_epoch=resp.producer_epoch, base_sequence=0,
                            transactional=True)
        await produce_batch(client, TopicPartition(topic, 0), batch,
                            transactional_id="lost-by-its-coordinator")
        return resp.producer_id, resp.producer_epoch


def test_find_hanging_reports_an_unknown_producers_open_transaction_and_abort_ends_it(  # type: ignore[no-untyped-def]
        tool, kafka, bootstrap, name, monkeypatch) -> None:
    t = _topic(tool, bootstrap, name)
    base = (transactions.main, "--bootstrap-server", bootstrap)
    # A producer the coordinator never heard of: the leader's KIP-890 check (which would
    # refuse the batch) is switched off for this one produce, as a broker before it had none.
    async def nothing_refused(*args: object) -> dict:
        return {}

    monkeypatch.setattr(kafka.broker.replicas, "txn_verifier", None)
    monkeypatch.setattr(kafka.broker.txn_verifier, "verify", nothing_refused)
    producer_id, epoch = trio.run(_leave_unknown_transaction, bootstrap, t)
    monkeypatch.undo()
    _send(tool, bootstrap, t, "after")

    r = tool(*base, "find-hanging", "--topic", t)  # younger than 15 minutes: not yet a suspect
    assert (r.rc, _table(r.out)) == (0, [list(transactions.HANGING_HEADERS)]), r.err
    r = tool(*base, "find-hanging", "--broker-id", "0", "--max-transaction-timeout", "0")
    assert r.rc == 0, r.err
    header, *rows = _table(r.out)
    assert header == list(transactions.HANGING_HEADERS)
    mine = [row for row in rows if row[0] == t]
    assert len(mine) == 1, rows
    assert mine[0][1:6] == ["0", str(producer_id), str(epoch), "-1", "0"]
    assert int(mine[0][6]) > 0 and mine[0][7] == "0"
    assert _consume(tool, bootstrap, t, "--isolation-level", "read_committed") == []

    # The form for brokers before 3.0; coordinator epoch -1 (no marker yet) is sent as 0.
    r = tool(*base, "abort", "--topic", t, "--partition", "0", "--producer-id", str(producer_id),
             "--producer-epoch", str(epoch), "--coordinator-epoch", "-1")
    assert (r.rc, r.err) == (0, "")
    assert _consume(tool, bootstrap, t, "--isolation-level", "read_committed") == ["after"]
    r = tool(*base, "find-hanging", "--topic", t, "--partition", "0",
             "--max-transaction-timeout", "0")
    assert (r.rc, _table(r.out)) == (0, [list(transactions.HANGING_HEADERS)]), r.err
