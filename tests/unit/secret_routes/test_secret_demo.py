"""The secret-routes demo's data and lines (``commands/demo_secret``): the synthetic city is
dense enough for cells to pass the threshold every hour, and the lines name the model's
quantities, never an exact count."""

from __future__ import annotations

import argparse

from stream_dp.commands import demo, demo_secret
from stream_dp.config import load_settings
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource
from stream_dp.engine import OfflineEngine


def demo_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    demo.register(parser.add_subparsers())
    return parser.parse_args(["demo", *argv])


def test_the_demo_accepts_secret_routes_with_hours() -> None:
    settings = demo.demo_settings(demo_args("--privacy-model", "secret-routes", "--hours", "2"))
    assert settings.privacy_model == "secret-routes"


def test_the_dense_city_releases_cells_every_hour_under_the_demo_defaults() -> None:
    settings = demo.demo_settings(demo_args("--privacy-model", "secret-routes"))
    readings = demo_secret.dense_city_readings(2)
    first = demo_secret.CITY_START // settings.window_seconds * settings.window_seconds
    span = (first, first + 2 * demo_secret.HOUR)
    engine = OfflineEngine(settings, LaplaceNoise(RandomSource.seeded_for_tests(3)), span=span)
    out = [w for part in (engine.feed(readings), engine.finish()) for w in part]
    assert len(out) == 2
    for window in out:
        assert len(window.cells) >= 3
        line = demo_secret.window_line(window.summary, window.cells)
        assert line.startswith(window.summary["window_start"][:10])
        assert " cars, " in line
    words = "\n".join(demo_secret.summary_lines([w.summary for w in out]))
    assert "2 windows released once each" in words and "Every car" in words
    threshold = demo_secret.threshold_line(load_settings(privacy_model="secret-routes"))
    assert "noisy vehicle count reaches" in threshold
