"""`stream-dp map`: one released window as a PNG, on the live map's colour scale."""

from __future__ import annotations

import sys
from pathlib import Path

import h3
import numpy as np
import orjson
import pytest

from stream_dp.cli import main
from stream_dp.dashboard.colour_scale import OPACITY_CERTAIN, VIRIDIS_STOPS
from tests.support.records import window_records

BACKGROUND = (0xF3, 0xF3, 0xEF)


def _rgb(hex_colour: str) -> np.ndarray:
    return np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)], dtype=float)


def _shown(colour: str) -> np.ndarray:
    """The colour of a cell without a known error over the plain background."""
    return OPACITY_CERTAIN * _rgb(colour) + (1 - OPACITY_CERTAIN) * np.array(BACKGROUND)


@pytest.fixture
def releases(tmp_path: Path) -> Path:
    nyc = h3.latlng_to_cell(40.70, -74.00, 8)
    far = h3.latlng_to_cell(40.75, -73.95, 7)  # another resolution
    records = window_records(1, {nyc: 0.0, far: 65.0}, 1.0)
    records += window_records(2, {nyc: 30.0}, 1.0)
    path = tmp_path / "releases.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def test_map_draws_the_window_on_the_colour_scale(releases: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    out = tmp_path / "map.png"
    assert main(["map", str(releases), "--window", "2020-12-01T01", "--out", str(out)]) == 0
    pixels = imread(out)[:, :, :3].reshape(-1, 3) * 255
    # Both cells are drawn in their colours: 0 -> the first stop, U -> the last.
    for colour in (VIRIDIS_STOPS[0], VIRIDIS_STOPS[-1]):
        distance = np.abs(pixels - _shown(colour)).max(axis=1)
        assert (distance < 4).sum() > 500, colour
    # The other window's mean (30) is not in this picture.
    middle = _shown(VIRIDIS_STOPS[5])
    assert (np.abs(pixels - middle).max(axis=1) < 2).sum() < 50


def test_map_names_a_missing_window(releases: Path, tmp_path: Path, capsys) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "map.png"
    assert main(["map", str(releases), "--window", "2021", "--out", str(out)]) == 2
    assert "--window '2021' must match one released window" in capsys.readouterr().err
    assert not out.exists()


def test_map_without_matplotlib_names_the_extra(
    releases: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    assert main(["map", str(releases), "--out", str(tmp_path / "m.png")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "stream-dp map: error: matplotlib is not installed; this command needs the 'plot' "
        'extra: pip install "stream-dp[plot]"'
    ]


def _write(path: Path, records: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def test_map_reads_u_from_the_records(tmp_path: Path) -> None:
    """A release made with U = 120 is drawn on [0, 120]: its mean 60 gets the middle stop
    (on the default [0, 65] it would be near the top of the scale)."""
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    nyc = h3.latlng_to_cell(40.70, -74.00, 8)
    far = h3.latlng_to_cell(40.75, -73.95, 8)
    releases = _write(
        tmp_path / "u120.jsonl", window_records(1, {nyc: 60.0, far: 120.0}, 1.0, upper=120.0)
    )
    out = tmp_path / "map.png"
    assert main(["map", str(releases), "--out", str(out)]) == 0
    pixels = imread(out)[:, :, :3].reshape(-1, 3) * 255
    for colour in (VIRIDIS_STOPS[5], VIRIDIS_STOPS[-1]):
        distance = np.abs(pixels - _shown(colour)).max(axis=1)
        assert (distance < 4).sum() > 500, colour


def test_map_refuses_a_file_mixing_u(tmp_path: Path, capsys) -> None:
    pytest.importorskip("matplotlib")
    nyc = h3.latlng_to_cell(40.70, -74.00, 8)
    records = window_records(1, {nyc: 10.0}, 1.0, upper=65.0)
    records += window_records(2, {nyc: 10.0}, 1.0, upper=120.0)
    out = tmp_path / "map.png"
    assert main(["map", str(_write(tmp_path / "mixed.jsonl", records)), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "mix different U (upper: 65, 120" in err[0], err
    assert not out.exists()


def test_map_title_says_1_cell(releases: Path, tmp_path: Path, capsys) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "map.png"
    assert main(["map", str(releases), "--window", "2020-12-01T02", "--out", str(out)]) == 0
    assert "2020-12-01T02:00:00Z: 1 cell ->" in capsys.readouterr().err


def _held_then_released(tmp_path: Path) -> Path:
    """Windows 07-11 hold a cell; window 12 releases it as one record spanning 07:00-13:00
    (its mean U: the last colour stop). Window 05 withholds 2 cells and holds none."""
    nyc = h3.latlng_to_cell(40.70, -74.00, 8)
    records = window_records(5, {}, 0.0, cells_withheld=2, n_readings=40)
    for hour in range(7, 12):
        records += window_records(hour, {}, 0.0, cells_held=1, readings_held=12, n_readings=12)
    released = window_records(12, {nyc: 65.0}, 1.0, n_readings=12)
    released[0]["window_start"] = "2020-12-01T07:00:00Z"
    released[0]["n_readings"] = 72
    return _write(tmp_path / "spans.jsonl", records + released)


@pytest.mark.parametrize("hour", ["07", "09", "12"])
def test_map_draws_a_span_at_each_hour_it_covers(tmp_path: Path, capsys, hour: str) -> None:
    """A record spanning 07:00-13:00 is drawn for --window 07 (a window that held it), 09 and
    12 (the window that released it), its span in the title."""
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    out = tmp_path / "map.png"
    releases = _held_then_released(tmp_path)
    assert main(["map", str(releases), "--window", f"2020-12-01T{hour}", "--out", str(out)]) == 0
    assert f"window 2020-12-01T{hour}:00:00Z: 1 cell ->" in capsys.readouterr().err
    pixels = imread(out)[:, :, :3].reshape(-1, 3) * 255
    distance = np.abs(pixels - _shown(VIRIDIS_STOPS[-1])).max(axis=1)
    assert (distance < 4).sum() > 500


def test_map_refuses_a_window_no_record_covers(tmp_path: Path, capsys) -> None:
    """Window 05 released nothing and no span covers it: one line naming why, exit 2."""
    pytest.importorskip("matplotlib")
    out = tmp_path / "map.png"
    releases = _held_then_released(tmp_path)
    assert main(["map", str(releases), "--window", "2020-12-01T05", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "no released cell covers window 2020-12-01T05:00:00Z (2 cells withheld)" in err[0]
    assert not out.exists()
