"""`stream-dp release` as a user runs it: killed after any window, the previous --out keeps
every byte; a bad row leaves a rejects file and a complete release (issue 26)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from stream_dp import fault_injection
from tests.support.readings import synthetic_readings

HOURS = 4


def cli(source: Path, out: Path, *options: str, env: dict[str, str] | None = None):
    return subprocess.run(
        [sys.executable, "-m", "stream_dp.cli", "release", str(source), "--out", str(out),
         "--resolution", "7", *options],
        capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})},
    )  # fmt: skip


def write_csv(path: Path, bad_line: int | None = None) -> Path:
    rows = ["vehicle_id,ts,lat,lon,speed"]
    for r in synthetic_readings(n_vehicles=20, hours=HOURS, per_hour=300, seed=4):
        rows.append(f"{r['vehicle_id']},{r['ts']},{r['lat']},{r['lon']},{r['speed']}")
    if bad_line is not None:
        rows[bad_line - 1] = rows[bad_line - 1].rsplit(",", 1)[0] + ",fast"
    path.write_text("\n".join(rows) + "\n")
    return path


def windows(out: Path) -> list[dict]:
    records = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    return [r for r in records if r["type"] == "window"]


@pytest.fixture(scope="module")
def first(tmp_path_factory) -> tuple[Path, Path, bytes]:
    directory = tmp_path_factory.mktemp("release")
    source = write_csv(directory / "readings.csv")
    out = directory / "out" / "releases.jsonl"
    out.parent.mkdir()
    done = cli(source, out)
    assert done.returncode == 0, done.stderr
    assert len(windows(out)) == HOURS
    return source, out, out.read_bytes()


@pytest.mark.parametrize("window", range(1, HOURS + 1))
def test_a_run_killed_after_any_window_leaves_the_previous_out_byte_identical(first, window):
    source, out, before = first
    env = {fault_injection.ENV: f"release-written-kill:{window}"}
    done = cli(source, out, "--overwrite", env=env)
    assert done.returncode == -signal.SIGKILL
    assert out.read_bytes() == before
    # a killed process cannot clean up: what it leaves is a hidden temporary file, not --out
    leftovers = {p.name for p in out.parent.iterdir()} - {out.name, "releases.rejects.jsonl"}
    assert leftovers and all(
        name.startswith((".releases.jsonl.", ".releases.rejects.jsonl.")) and name.endswith(".tmp")
        for name in leftovers
    )
    for name in leftovers:
        (out.parent / name).unlink()


def test_a_bad_speed_on_line_11_leaves_a_complete_release_and_a_rejects_file(first, tmp_path):
    """The issue's report: this row truncated an existing --out to 0 bytes."""
    _source, out, before = first
    copy = tmp_path / "releases.jsonl"
    copy.write_bytes(before)
    source = write_csv(tmp_path / "mine.csv", bad_line=11)
    done = cli(source, copy, "--overwrite")
    assert done.returncode == 0, done.stderr
    assert [w["status"] for w in windows(copy)] == ["released"] * HOURS
    rejects = [orjson.loads(line) for line in (tmp_path / "releases.rejects.jsonl").read_bytes()
               .splitlines()]  # fmt: skip
    assert rejects == [
        {"line": 11, "reason": "not_a_number", "detail": "speed must be a number, not 'fast'"}
    ]
    assert "skipped 1 bad readings (not_a_number 1)" in done.stderr
    assert "Traceback" not in done.stderr
