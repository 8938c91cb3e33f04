"""kafka-transactions' tables and argument checks, and kafka-dump-log on transactional
segments and `.txnindex` files: offline, without a broker."""
from __future__ import annotations

import struct
from pathlib import Path

from protocol.records.record import Record, build_batch, build_control_batch
from pybroker.client.cluster import TopicPartition
from pybroker.client.transaction_admin import (
    AbortTransactionSpec, ProducerState, TransactionDescription, TransactionListing,
)
from pybroker.tools import dump_log, transactions
from pybroker.tools.common import pretty_table


def test_pretty_table_pads_each_column_and_ends_every_cell_with_a_tab() -> None:
    assert pretty_table(("A", "Longer"), [["wide-cell", "x"], ["b", ""]]) == [
        "A        \tLonger\t", "wide-cell\tx     \t", "b        \t      \t"]
    assert pretty_table(("Only",), []) == ["Only\t"]


def test_list_rows_name_the_coordinating_broker() -> None:
    rows = transactions.list_rows({1: [TransactionListing("a", 5, "Ongoing")],
                                   2: [TransactionListing("b", 6, "CompleteCommit")]})
    assert rows == [["a", "1", "5", "Ongoing"], ["b", "2", "6", "CompleteCommit"]]


def test_describe_row_duration_and_partitions() -> None:
    d = TransactionDescription(3, "Ongoing", 9, 1, 60000, 1000,
                               frozenset({TopicPartition("t", 10), TopicPartition("t", 2),
                                          TopicPartition("a", 0)}))
    assert transactions.describe_row("tx", d, now=4500) == [
        "3", "tx", "9", "1", "Ongoing", "60000", "1000", "3500", "a-0,t-2,t-10"]
    idle = TransactionDescription(3, "Empty", 9, 1, 60000, None, frozenset())
    assert transactions.describe_row("tx", idle, now=4500)[6:] == ["None", "None", ""]


def test_producer_and_hanging_rows_show_absent_values_as_kafka_does() -> None:
    open_txn = ProducerState(7, 2, 4, 1_000, None, 42)
    idempotent = ProducerState(8, 0, 9, 2_000, 5, None)
    assert transactions.producer_rows([open_txn, idempotent]) == [
        ["7", "2", "-1", "4", "1000", "42"], ["8", "0", "5", "9", "2000", "None"]]
    assert transactions.hanging_rows([(TopicPartition("t", 1), open_txn)],
                                     now=1_000 + 125 * 60_000) == [
        ["t", "1", "7", "2", "-1", "42", "1000", "125"]]


def test_abort_spec_reads_as_kafkas() -> None:
    spec = AbortTransactionSpec(TopicPartition("t", 0), 5, 1, 0)
    assert str(spec) == ("AbortTransactionSpec(topicPartition=t-0, producerId=5, "
                         "producerEpoch=1, coordinatorEpoch=0)")


def test_argument_combinations_are_refused_before_connecting(tool) -> None:  # type: ignore[no-untyped-def]
    base = (transactions.main, "--bootstrap-server", "127.0.0.1:1")
    r = tool(*base, "abort", "--topic", "t", "--partition", "0")
    assert (r.rc, r.out) == (1, "")
    assert r.err.startswith("The transaction to abort must be identified either with "
                            "--start-offset (for brokers on 3.0 or above) or with --producer-id")
    r = tool(*base, "abort", "--topic", "t", "--partition", "0", "--producer-id", "5")
    assert (r.rc, r.err) == (1, "Missing required argument --producer-epoch\n")
    r = tool(*base, "abort", "--topic", "t", "--partition", "0", "--producer-id", "5",
             "--producer-epoch", "0")
    assert (r.rc, r.err) == (1, "Missing required argument --coordinator-epoch\n")
    r = tool(*base, "find-hanging")
    assert (r.rc, r.err) == (1, "The `find-hanging` command requires either --topic or "
                                "--broker-id to limit the scope of the search\n")
    r = tool(*base, "find-hanging", "--broker-id", "0", "--partition", "1")
    assert (r.rc, r.err) == (1, "The --partition argument requires --topic to be provided\n")
    r = tool(transactions.main, "list")
    assert r.rc == 1 and "--bootstrap-server" in r.err
    r = tool(*base, "describe")
    assert r.rc == 1 and "--transactional-id" in r.err
    r = tool(transactions.main, "-v")
    assert r.rc == 0 and "pybroker" in r.out
    r = tool(*base, "list")  # well formed: the failure is the unreachable broker
    assert r.rc == 1 and "127.0.0.1:1" in r.err


# -- kafka-dump-log ----------------------------------------------------------------------------

def _transactional_segment(directory: Path) -> Path:
    """Offsets 0-1 committed by producer 7 (marker at 2), 3 aborted by producer 8 (marker 4)."""
    batches = [
        build_batch([Record(b"k", b"one", timestamp=1000), Record(None, b"two", timestamp=1001)],
                    base_offset=0, producer_id=7, producer_epoch=2, base_sequence=0,
                    transactional=True),
        build_control_batch(7, 2, True, 3, 1002, base_offset=2),
        build_batch([Record(None, b"gone", timestamp=1003)], base_offset=3, producer_id=8,
                    producer_epoch=0, base_sequence=0, transactional=True),
        build_control_batch(8, 0, False, 3, 1004, base_offset=4),
    ]
    log = directory / "00000000000000000000.log"
    log.write_bytes(b"".join(batches))
    return log


def test_dump_log_marks_transactional_and_control_batches(tool, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log = _transactional_segment(tmp_path)
    r = tool(dump_log.main, "--files", str(log))
    assert r.rc == 0, r.err
    batches = r.lines[2:]
    assert [(("isTransactional: true" in b), ("isControl: true" in b)) for b in batches] == [
        (True, False), (True, True), (True, False), (True, True)]
    assert "producerId: 7 producerEpoch: 2" in batches[1]
    assert "producerId: 8 producerEpoch: 0" in batches[3]

    r = tool(dump_log.main, "--files", str(log), "--print-data-log")
    records = [x for x in r.lines if x.startswith("|")]
    assert len(records) == 5
    assert records[1].endswith(" payload: two")
    assert records[2].startswith("| offset: 2 CreateTime: 1002 keySize: 4 valueSize: 6 ")
    assert records[2].endswith(" endTxnMarker: COMMIT coordinatorEpoch: 3")
    assert records[4].endswith(" endTxnMarker: ABORT coordinatorEpoch: 3")
    assert "payload" not in records[2] + records[4]


def test_dump_txn_index(tool, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    entry = struct.Struct(">hqqqq")
    index = tmp_path / "00000000000000000000.txnindex"
    index.write_bytes(entry.pack(0, 8, 3, 4, 3) + entry.pack(0, 9, 10, 15, 5) + b"\0" * 20)
    r = tool(dump_log.main, "--files", str(index))
    assert (r.rc, r.err) == (0, "")
    assert r.lines == [
        f"Dumping {index}",
        "version: 0 producerId: 8 firstOffset: 3 lastOffset: 4 lastStableOffset: 3",
        "version: 0 producerId: 9 firstOffset: 10 lastOffset: 15 lastStableOffset: 5"]

    empty = tmp_path / "00000000000000000100.txnindex"
    empty.write_bytes(b"")
    r = tool(dump_log.main, "--files", str(empty))
    assert (r.rc, r.lines) == (0, [f"Dumping {empty}"])

    newer = tmp_path / "00000000000000000200.txnindex"
    newer.write_bytes(entry.pack(1, 8, 3, 4, 3))
    r = tool(dump_log.main, "--files", str(newer))
    assert r.rc == 1
    assert r.err.startswith("Unexpected aborted transaction version 1 in transaction index ")
