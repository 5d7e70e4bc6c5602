"""The real sample: the AIS week shipped inside the package."""

from __future__ import annotations

import gzip
import hashlib
import math
from datetime import UTC, datetime

import pytest

from stream_dp.sources import iter_readings, sample

WEEK_START = datetime(2020, 12, 1, tzinfo=UTC).timestamp()
# The tracktable-data file the shipped one is a gzip of (stream_dp/data/NOTICE.md).
ORIGINAL_SHA256 = "9b18238f5df37fb2c7cae4bbc111dfcbcfbff77ad707b36eb7537826b2308658"


@pytest.fixture(scope="module")
def week() -> list[dict]:
    return list(iter_readings(sample.sample_path()))


def test_week_is_compact_and_shipped_with_notice() -> None:
    path = sample.sample_path()
    assert path.is_file() and path.stat().st_size < 2_000_000
    notice = (path.parent / "NOTICE.md").read_text(encoding="utf-8")
    assert "Redistribution and use in source and binary forms" in notice
    assert "National Technology and Engineering Solutions" in notice
    assert ORIGINAL_SHA256 in notice


def test_week_is_the_tracktable_file_byte_for_byte() -> None:
    raw = gzip.decompress(sample.sample_path().read_bytes())
    assert hashlib.sha256(raw).hexdigest() == ORIGINAL_SHA256


def test_week_parses_to_140_vessels(week: list[dict]) -> None:
    assert len({r["vehicle_id"] for r in week}) == 140
    assert len(week) == 172_679
    assert all(WEEK_START <= r["ts"] < WEEK_START + 7 * 86_400 for r in week)
    assert all(math.isfinite(r["speed"]) and r["speed"] >= 0 for r in week)
    keys = [(r["ts"], r["vehicle_id"]) for r in week]
    assert keys == sorted(keys)


def test_load_sample_keeps_whole_hours() -> None:
    first_two_hours = sample.load_sample(hours=2)
    assert first_two_hours
    hour0 = math.floor(first_two_hours[0]["ts"] / 3600) * 3600
    assert all(r["ts"] < hour0 + 7_200 for r in first_two_hours)
    assert max(r["ts"] for r in first_two_hours) >= hour0 + 3_600


def test_load_sample_rejects_non_positive_hours() -> None:
    with pytest.raises(ValueError, match="positive"):
        sample.load_sample(hours=0)
