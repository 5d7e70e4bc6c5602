"""The ledger backup file (``stream_dp.worker.ledger_file``): round trip and its checks."""

from __future__ import annotations

import json

import pytest

from stream_dp.worker.ledger_file import (
    RELEASE_LOG,
    LedgerFileError,
    LedgerRecord,
    check_restorable,
    read_ledger_file,
    write_ledger_file,
)

TOPICS = {RELEASE_LOG: ("app.release-log", 1)}


def records() -> list[LedgerRecord]:
    return [
        LedgerRecord(RELEASE_LOG, 0, 0, 1_700_000_000_000, b"3600", b'{"kind":"loss"}'),
        LedgerRecord(RELEASE_LOG, 0, 1, 1_700_000_000_001, None, b"\x00\xff binary\n"),
        LedgerRecord(RELEASE_LOG, 0, 2, 1_700_000_000_002, b"k", None, (("h", b"\x01"),)),
        LedgerRecord(RELEASE_LOG, 0, 3, 1_700_000_000_003, b"", b"", (("a", b""), ("a", b"2"))),
    ]


def test_round_trip_keeps_keys_values_headers_offsets_and_order(tmp_path):
    path = tmp_path / "ledger.jsonl"
    written = write_ledger_file(path, "app", TOPICS, records())
    header, back = read_ledger_file(path)
    assert back == records()
    assert header == written
    assert (header.app_id, header.topics, header.records) == ("app", TOPICS, 4)
    first = json.loads(path.read_text().splitlines()[0])
    assert first["format"] == "stream-dp-ledger" and first["version"] == 1
    assert first["topics"] == [{"role": RELEASE_LOG, "name": "app.release-log", "partitions": 1}]
    assert len(first["sha256"]) == 64


def test_an_empty_log_round_trips(tmp_path):
    path = tmp_path / "empty.jsonl"
    write_ledger_file(path, "app", TOPICS, [])
    header, back = read_ledger_file(path)
    assert back == [] and header.records == 0


def test_a_changed_record_fails_the_checksum(tmp_path):
    path = tmp_path / "ledger.jsonl"
    write_ledger_file(path, "app", TOPICS, records())
    lines = path.read_text().splitlines(keepends=True)
    record = json.loads(lines[2])
    record["value"] = None
    lines[2] = json.dumps(record, separators=(",", ":")) + "\n"
    path.write_text("".join(lines))
    with pytest.raises(LedgerFileError, match="checksum"):
        read_ledger_file(path)


def test_a_missing_record_is_named(tmp_path):
    path = tmp_path / "ledger.jsonl"
    write_ledger_file(path, "app", TOPICS, records())
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]))
    with pytest.raises(LedgerFileError, match="says 4 records, the file holds 3"):
        read_ledger_file(path)


def test_not_a_ledger_file(tmp_path):
    path = tmp_path / "other.jsonl"
    path.write_text('{"window_start": 0}\n')
    with pytest.raises(LedgerFileError, match="not a stream-dp-ledger file"):
        read_ledger_file(path)
    path.write_text("")
    with pytest.raises(LedgerFileError, match="empty"):
        read_ledger_file(path)


def test_a_failed_write_leaves_the_previous_file(tmp_path):
    path = tmp_path / "ledger.jsonl"
    write_ledger_file(path, "app", TOPICS, records())
    before = path.read_bytes()

    def broken():
        yield records()[0]
        raise RuntimeError("broker gone")

    with pytest.raises(RuntimeError):
        write_ledger_file(path, "app", TOPICS, broken())
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["ledger.jsonl"]


def test_only_a_log_starting_at_zero_without_gaps_is_restorable():
    check_restorable(records())
    with pytest.raises(LedgerFileError, match="offset 1 would be written at offset 0"):
        check_restorable(records()[1:])
    with pytest.raises(LedgerFileError, match="offset 2 would be written at offset 1"):
        check_restorable([records()[0], records()[2]])
