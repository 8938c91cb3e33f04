"""kafka-dump-log: pybroker's segment and index files, read offline in Kafka's format."""
from __future__ import annotations

import re
from pathlib import Path

from pybroker.tools import console_producer, dump_log, topics

BATCH = re.compile(
    r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) baseSequence: -1 lastSequence: -1 "
    r"producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false "
    r"isControl: false deleteHorizonMs: OptionalLong\.empty position: (\d+) CreateTime: \d{13} "
    r"size: (\d+) magic: 2 compresscodec: (\w+) crc: \d+ isvalid: true$")
RECORD = re.compile(r"^\| offset: (\d+) CreateTime: \d{13} keySize: (-?\d+) valueSize: (\d+) "
                    r"sequence: -1 headerKeys: \[(.*)\](.*)$")


def _segment(kafka, tool, bootstrap, name) -> Path:  # type: ignore[no-untyped-def]
    t = name("dump")
    assert tool(topics.main, "--bootstrap-server", bootstrap, "--create", "--topic", t,
                "--config", "index.interval.bytes=1").rc == 0
    # Not idempotent (the console producer's default, as Kafka's), so that the batches show
    # the fields of a plain producer: producerId -1, sequence -1.
    send = (console_producer.main, "--bootstrap-server", bootstrap, "--topic", t, "--sync",
            "--producer-property", "enable.idempotence=false")
    assert tool(*send, stdin=b"first\nsecond\n").rc == 0
    assert tool(*send, "--property", "parse.key=true", "--property", "parse.headers=true",
                "--compression-codec", "gzip", stdin=b"h:1\tkey\tthird\n").rc == 0
    # The active segment's index entries reach its files when the log is flushed, rolls or
    # closes (storage/abstract_index.py), as Kafka's reach them when the kernel writes back
    # its mmap: flush, as an operator would before reading a live segment's index.
    kafka.broker.logs.get(t, 0).flush()
    return Path(kafka.broker.config.log_dirs[0]) / f"{t}-0" / "00000000000000000000.log"


def test_log_index_and_time_index(kafka, tool, bootstrap, name) -> None:
    log = _segment(kafka, tool, bootstrap, name)
    r = tool(dump_log.main, "--files", str(log))
    assert r.rc == 0, r.err
    assert r.lines[:2] == [f"Dumping {log}", "Log starting offset: 0"]
    batches = [BATCH.match(x) for x in r.lines[2:]]
    assert all(batches), r.lines
    first, second, third = (m.groups() for m in batches)  # type: ignore[union-attr]
    assert first[:4] == ("0", "0", "1", "0") and first[5] == "none"
    assert second[:3] == ("1", "1", "1") and int(second[3]) == int(first[4])
    assert third[:3] == ("2", "2", "1") and third[5] == "gzip"

    r = tool(dump_log.main, "--files", str(log), "--print-data-log")
    records = [RECORD.match(x) for x in r.lines if x.startswith("|")]
    assert [m.groups() for m in records] == [  # type: ignore[union-attr]
        ("0", "-1", "5", "", " payload: first"), ("1", "-1", "6", "", " payload: second"),
        ("2", "3", "5", "h", " key: key payload: third")]

    index, timeindex = log.with_suffix(".index"), log.with_suffix(".timeindex")
    r = tool(dump_log.main, "--files", f"{index},{timeindex}")
    assert r.rc == 0 and r.err == ""
    assert r.lines[0] == f"Dumping {index}"
    split = r.lines.index(f"Dumping {timeindex}")
    entries = [re.fullmatch(r"offset: (\d+) position: (\d+)", x).groups()  # type: ignore
               for x in r.lines[1:split]]
    # Like Kafka's, the sparse index starts after the first batch's bytes.
    assert entries == [("1", first[4]), ("2", str(int(first[4]) + int(second[4])))]
    # Each entry names the offset of the largest timestamp so far: 0 when the next record
    # was stamped in the same millisecond.
    assert r.lines[split + 1:] and all(
        re.fullmatch(r"timestamp: \d{13} offset: [012]", x) for x in r.lines[split + 1:])

    r = tool(dump_log.main, "--files", str(index), "--index-sanity-check")
    assert r.lines == [f"Dumping {index}", f"{index} passed sanity check."]


def test_trailing_garbage_and_missing_files(kafka, tool, bootstrap, name, tmp_path) -> None:
    log = _segment(kafka, tool, bootstrap, name)
    copy = tmp_path / log.name
    copy.write_bytes(log.read_bytes() + b"\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00\x00\x05zz")
    r = tool(dump_log.main, "--files", str(copy))
    assert r.rc == 0
    assert r.lines[-1] == f"Found 14 invalid bytes at the end of {copy.name}"

    r = tool(dump_log.main, "--files", str(tmp_path / "00000000000000000000.log.missing"))
    assert r.rc == 1
    r = tool(dump_log.main, "--files", str(tmp_path / "nothing.log"))
    assert r.rc == 1 and r.err.endswith("does not exist or is not a file\n")
    other = tmp_path / "notes.txt"
    other.write_text("x")
    r = tool(dump_log.main, "--files", str(other))
    assert r.rc == 0 and r.err == f"Ignoring unknown file {other}\n"
    r = tool(dump_log.main, "--print-data-log")
    assert (r.rc, r.err) == (1, 'Missing required argument "[files]"\n')
