"""The replay producer: grouping, progress, file totals and `stream-dp produce` option checks."""

from __future__ import annotations

import gzip
import io
from collections import defaultdict
from pathlib import Path

import orjson
import pytest

from stream_dp.commands import produce as produce_command
from stream_dp.producer import (
    ProduceStats,
    ReadingGrouper,
    TerminalProgress,
    encode_group,
)
from stream_dp.sources.sample import sample_path
from tests.producing import Terminal, produce_cli, three_vehicles

# --- grouping -------------------------------------------------------------------------


def test_groups_hold_one_vehicle_in_order_and_at_most_batch_size() -> None:
    grouper = ReadingGrouper(4, max_delay=1e9)
    groups = [g for r in three_vehicles(30) for g in grouper.add(r)] + list(grouper.flush())
    assert sum(len(members) for _, members in groups) == 30
    per_vehicle: dict[str, list[float]] = defaultdict(list)
    for key, members in groups:
        assert 1 <= len(members) <= 4
        assert {m["vehicle_id"] for m in members} == {key}
        per_vehicle[key] += [m["ts"] for m in members]
    assert all(ts == sorted(ts) and len(ts) == 10 for ts in per_vehicle.values())


def test_a_reading_waits_at_most_max_delay_of_event_time() -> None:
    grouper = ReadingGrouper(100, max_delay=5.0)
    released: list[tuple[float, float]] = []  # (event time of release, oldest reading)
    for reading in three_vehicles(60):
        for _, members in grouper.add(reading):
            released.append((reading["ts"], members[0]["ts"]))
    assert released and all(now - oldest <= 6.0 for now, oldest in released)


def test_pending_readings_are_bounded() -> None:
    grouper = ReadingGrouper(50, max_delay=1e9, max_pending=60)
    for reading in three_vehicles(500):
        list(grouper.add(reading))
        assert grouper.pending <= 60


def test_message_value_is_an_object_or_an_array() -> None:
    one, two = three_vehicles(2)
    assert orjson.loads(encode_group([one])) == one
    assert orjson.loads(encode_group([one, two])) == [one, two]


def test_progress_bar_on_a_terminal_with_percentage_total_and_eta() -> None:
    terminal = Terminal()
    progress = TerminalProgress(terminal, total=3000, interval=0.0)
    progress(ProduceStats(readings=10, messages=1, seconds=0.01))  # too early for an ETA
    assert "%" in terminal.getvalue() and "ETA" not in terminal.getvalue()
    terminal.seek(0)
    terminal.truncate()
    progress(ProduceStats(readings=1500, messages=15, seconds=2.0))  # 750 readings/s
    first = terminal.getvalue()
    assert first.startswith("\r[##########..........]  50%  1,500/3,000 readings  15 messages")
    assert "ETA 0:02" in first and "\n" not in first
    progress(ProduceStats(readings=3000, messages=30, seconds=4.0), final=True)
    progress.close()
    last = terminal.getvalue()[len(first) :]
    assert last.startswith("\r[####################] 100%  3,000/3,000 readings")
    assert "ETA" not in last and last.endswith("\x1b[K\n")


def test_progress_without_a_total_is_a_counter_line() -> None:
    terminal = Terminal()
    progress = TerminalProgress(terminal)
    progress(ProduceStats(readings=1500, messages=15, seconds=2.0), final=True)
    assert terminal.getvalue().startswith("\r1,500 readings  15 messages")
    assert "%" not in terminal.getvalue() and "ETA" not in terminal.getvalue()


def test_progress_off_a_terminal_is_plain_periodic_lines() -> None:
    half, done = ProduceStats(1500, 15, 2.0), ProduceStats(3000, 30, 4.0)
    short = io.StringIO()  # a run shorter than the interval prints nothing
    progress = TerminalProgress(short, total=3000)
    progress(half)
    progress(done, final=True)
    progress.close()
    assert short.getvalue() == ""

    pipe = io.StringIO()
    progress = TerminalProgress(pipe, total=3000, plain_interval=0.0)
    progress(half)
    progress(done, final=True)
    progress.close()
    lines = pipe.getvalue().splitlines()
    assert lines[0] == (
        " 50%  1,500/3,000 readings  15 messages     2.0 s  750 readings/s  ETA 0:02"
    )
    assert lines[1].startswith("100%  3,000/3,000 readings") and len(lines) == 2
    assert "\r" not in pipe.getvalue() and "\x1b" not in pipe.getvalue()
    quiet = io.StringIO()
    TerminalProgress(quiet, enabled=False, plain_interval=0.0)(half)
    assert quiet.getvalue() == ""


def test_the_total_of_a_file_is_known_before_sending(tmp_path: Path) -> None:
    rows = three_vehicles(7)
    jsonl = b"\n".join(orjson.dumps(r) for r in rows) + b"\n\n  \n"  # blank lines skipped
    (tmp_path / "r.jsonl").write_bytes(jsonl)
    (tmp_path / "r.ndjson.gz").write_bytes(gzip.compress(jsonl))
    csv = "vehicle_id,ts,lat,lon,speed\n" + "".join(
        f"{r['vehicle_id']},{r['ts']},{r['lat']},{r['lon']},{r['speed']}\n" for r in rows
    )
    (tmp_path / "r.csv.gz").write_bytes(gzip.compress(csv.encode()))
    for name in ("r.jsonl", "r.ndjson.gz", "r.csv.gz"):
        readings, known = produce_command._iter_readings(str(tmp_path / name))
        assert known is None  # streamed: counted by reading through
        assert produce_command._count_lines(str(tmp_path / name)) == len(list(readings)) == 7
    traj = str(sample_path())  # loaded whole: its length is known
    readings, known = produce_command._iter_readings(traj)
    assert known == len(list(readings)) > 1000


# --- producing to the real broker -------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["--rate", "-5"], "--rate"),
        (["--rate", "0"], "--rate"),
        (["--batch-size", "0"], "--batch-size"),
        (["--max-delay", "-1"], "--max-delay"),
        (["--partitions", "0"], "--partitions"),
    ],
)
def test_cli_rejects_bad_values(
    argv: list[str],
    option: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(orjson.dumps(three_vehicles(1)[0]))
    assert produce_cli(monkeypatch, str(path), "--bootstrap", "127.0.0.1:1", *argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and option in err[0]


def test_cli_rejects_a_missing_file_and_a_missing_bootstrap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("STREAM_DP_KAFKA_BOOTSTRAP", raising=False)
    assert produce_cli(monkeypatch, str(tmp_path / "absent.jsonl"), "--bootstrap", "h:1") == 2
    assert "FILE" in capsys.readouterr().err
    path = tmp_path / "r.jsonl"
    path.write_bytes(orjson.dumps(three_vehicles(1)[0]))
    assert produce_cli(monkeypatch, str(path)) == 2
    assert "--bootstrap" in capsys.readouterr().err
