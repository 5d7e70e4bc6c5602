"""The offline release command on a window that fails: the other windows, the exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import orjson

from stream_dp import fault_injection
from stream_dp.release.records import FAILED, RELEASED
from tests.support.readings import depot_readings, synthetic_readings

SCHEMA = json.loads(
    (Path(__file__).parents[2] / "stream_dp/schemas/release-record.schema.json").read_text()
)


def four_hours():
    return synthetic_readings(n_vehicles=20, hours=4, per_hour=300, seed=4)


def cli(source: Path, out: Path, *options: str, env: dict[str, str] | None = None):
    return subprocess.run(
        [sys.executable, "-m", "stream_dp.cli", "release", str(source), "--out", str(out),
         *options],
        capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})},
    )  # fmt: skip


def write_jsonl(path: Path, readings) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in readings))
    return path


def test_the_offline_release_writes_every_other_window_and_exits_non_zero(tmp_path):
    source = write_jsonl(tmp_path / "readings.jsonl", four_hours())
    out = tmp_path / "out.jsonl"
    done = cli(  # release's mode before issue 34: a fixed ε per cell, T 15
        source, out, "--resolution", "7", "--fixed-epsilon", "--target-mean-error", "15",
        env={fault_injection.ENV: "release-error:2"},
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    records = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    windows = [r for r in records if r["type"] == "window"]
    assert [w["status"] for w in windows] == [RELEASED, FAILED, RELEASED, RELEASED]
    cells = [r for r in records if r["type"] == "cell"]
    assert cells and all(r["window_start"] != windows[1]["window_start"] for r in cells)
    for record in records:
        jsonschema.validate(record, SCHEMA)
    lines = done.stderr.strip().splitlines()
    failures = [line for line in lines if "failed: InjectedReleaseError" in line]
    assert len(failures) == 1 and windows[1]["window_start"] in failures[0]
    assert "Traceback" not in done.stderr
    assert "released 3 windows" in lines[-1] and "1 windows failed" in lines[-1]


def test_the_depot_is_released_offline_with_cummings(tmp_path):
    """Issue 21's scenario: 8 buses with 100-121 readings among 20 cars in one cell-hour,
    then three ordinary hours; cummings, delta 1e-6, a fixed ε per cell (no vehicle budget
    without the clip mean), everything else at its default."""
    source = write_jsonl(tmp_path / "depot.jsonl", depot_readings())
    out = tmp_path / "out.jsonl"
    done = cli(source, out, "--mean-mechanism", "cummings", "--delta", "1e-6", "--fixed-epsilon")
    assert done.returncode == 0, done.stderr
    records = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    windows = [r for r in records if r["type"] == "window"]
    assert len(windows) == 4 and all(w["status"] == RELEASED for w in windows)
    depot_hour = windows[0]["window_start"]
    depot_cells = [r for r in records if r["type"] == "cell" and r["window_start"] == depot_hour]
    assert max(r["n_vehicles"] for r in depot_cells) == 28
    assert all(r["mechanism"] == "cummings" for r in depot_cells)
