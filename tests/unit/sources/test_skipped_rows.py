"""Issue 34 item 5: a repeated CSV header is its own reject reason, blank lines are counted,
and a run's skipped rows are summed by reason."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from stream_dp.sources import LineTally, SourceError, numbered_readings
from stream_dp.sources.skipped import SkippedRows, first_bad_row, strict_line
from stream_dp.windows.reject_reasons import RejectReason

HEADER = "vehicle_id,ts,lat,lon,speed\n"
ROW = "v1,1606822299,40.7,-74.0,12.5\n"


def _items(path: Path) -> tuple[list[tuple[int, object]], LineTally]:
    tally = LineTally()
    return list(numbered_readings(path, tally)), tally


def test_a_repeated_csv_header_is_rejected_as_such_not_as_a_bad_ts(tmp_path: Path) -> None:
    path = tmp_path / "joined.csv"
    path.write_text(HEADER + ROW + " vehicle_id , ts,lat,lon,speed\n" + ROW)
    items, _ = _items(path)
    assert [line for line, _ in items] == [2, 3, 4]
    error = items[1][1]
    assert isinstance(error, SourceError) and error.code == RejectReason.REPEATED_HEADER
    assert all(isinstance(item, dict) for _, item in (items[0], items[2]))


@pytest.mark.parametrize("name", ["r.csv", "r.csv.gz"])
def test_csv_blank_lines_are_counted_and_the_line_numbers_kept(tmp_path: Path, name: str) -> None:
    text = HEADER + "\n" + ROW + "   \n\r\n" + ROW + "\n"
    path = tmp_path / name
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    items, tally = _items(path)
    assert [line for line, item in items if isinstance(item, dict)] == [3, 6]
    assert tally.blank == 4


def test_jsonl_and_traj_blank_lines_are_counted(tmp_path: Path) -> None:
    jsonl = tmp_path / "r.jsonl"
    jsonl.write_text('\n{"vehicle_id": "v", "ts": 1, "lat": 0, "lon": 0, "speed": 1}\n  \n')
    items, tally = _items(jsonl)
    assert [line for line, _ in items] == [2] and tally.blank == 2
    traj = tmp_path / "r.traj"
    head = "*T*,b6dfc4cd,terrestrial,2,0,*P*,terrestrial,2,1,1,0"
    fixes = "v,2020-12-01 11:31:39,-74.0,40.7,v,2020-12-01 11:32:39,-74.01,40.7"
    traj.write_text(f"\n{head},{fixes}\n\n")
    items, tally = _items(traj)
    assert len(items) == 2 and tally.blank == 2


def test_the_summary_counts_bad_rows_by_reason_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_text(HEADER + ROW + "\n" + HEADER + "v2,yesterday,40.7,-74.0,1\n" + ROW + "\n")
    skipped = SkippedRows()
    readings = list(skipped.readings(numbered_readings(path, skipped.lines)))
    assert len(readings) == 2 and skipped.bad == 2
    assert skipped.summary() == "skipped 2 bad rows (bad_ts 1, repeated_header 1), 2 blank lines"
    assert SkippedRows().summary() is None
    bad = first_bad_row(numbered_readings(path))
    assert bad is not None
    assert strict_line(bad).startswith(f"{path}:4: repeated_header: the header row again")
