"""The real sample: the shipped extract and, when installed, the tracktable-data week."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

import pytest

from stream_dp.sources import iter_readings, sample

DAY_START = datetime(2020, 12, 1, tzinfo=UTC).timestamp()


@pytest.fixture(scope="module")
def extract() -> list[dict]:
    return list(iter_readings(sample.extract_path()))


def test_extract_is_small_and_shipped_with_notice() -> None:
    path = sample.extract_path()
    assert path.is_file() and path.stat().st_size < 1_000_000
    notice = (path.parent / "NOTICE.md").read_text(encoding="utf-8")
    assert "Redistribution and use in source and binary forms" in notice
    assert "National Technology and Engineering Solutions" in notice


def test_extract_parses(extract: list[dict]) -> None:
    assert len(extract) > 1_000
    assert len({r["vehicle_id"] for r in extract}) >= 10
    assert all(DAY_START <= r["ts"] < DAY_START + 86_400 for r in extract)
    assert all(math.isfinite(r["speed"]) and r["speed"] >= 0 for r in extract)
    keys = [(r["ts"], r["vehicle_id"]) for r in extract]
    assert keys == sorted(keys)


def test_sample_path_falls_back_to_extract(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sample, "package_sample_path", lambda: None)
    assert sample.sample_path() == sample.extract_path()
    first_two_hours = sample.load_sample(hours=2)
    assert first_two_hours
    hour0 = math.floor(first_two_hours[0]["ts"] / 3600) * 3600
    assert all(r["ts"] < hour0 + 7_200 for r in first_two_hours)
    assert max(r["ts"] for r in first_two_hours) >= hour0 + 3_600


def test_load_sample_rejects_non_positive_hours() -> None:
    with pytest.raises(ValueError, match="positive"):
        sample.load_sample(hours=0)


def package_week() -> Path:
    path = sample.package_sample_path()
    if path is None:
        pytest.skip("tracktable-data is not installed")
    return path


def test_package_week_parses_to_140_vessels(extract: list[dict]) -> None:
    path = package_week()
    assert sample.sample_path() == path
    week = list(iter_readings(path))
    assert len({r["vehicle_id"] for r in week}) == 140
    assert len(week) == 172_679
    # The extract is the week's 1 December, with the same derived speeds.
    assert [r for r in week if r["ts"] < DAY_START + 86_400] == extract
