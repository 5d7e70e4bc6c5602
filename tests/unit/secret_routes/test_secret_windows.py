"""The secret-routes window loop (docs/math.md §14.5): every window from the first to the
last has a summary (empty ones too), the period's count of windows rolls, and a window whose
computation raises becomes a failed summary while the stream goes on."""

from __future__ import annotations

import pytest

from stream_dp.config import load_settings
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource
from stream_dp.dp.secret_accounting import SecretRoutesBudget
from stream_dp.engine import OfflineEngine
from stream_dp.secret_routes import window as secret_window
from stream_dp.secret_routes.params import SecretRoutesParams
from stream_dp.secret_routes.window import SecretRoutesReleaser
from tests.unit.secret_routes.columns import crowd, window_columns

HOUR = 3600


def releaser() -> SecretRoutesReleaser:
    params = SecretRoutesParams(SecretRoutesBudget(4.0, 1e-6, 2, 1), window_seconds=HOUR)
    return SecretRoutesReleaser(params, RandomSource.seeded_for_tests(1), first=0)


def test_gaps_get_empty_summaries_and_the_period_rolls() -> None:
    r = releaser()
    columns = window_columns(crowd("a", 200, 30.0))
    starts = [0, 3 * HOUR, 4 * HOUR]  # hours 1 and 2 had no reading
    out = []
    for start in starts:
        out.extend(r.release(empty, window_columns([])) for empty in r._gap_before(start))
        out.append(r.release(start, columns))
    assert [w.window_start for w in out] == [0, HOUR, 2 * HOUR, 3 * HOUR, 4 * HOUR]
    assert [w.summary["windows_in_period"] for w in out] == [1, 2, 2, 2, 2]
    assert [len(w.cells) for w in out] == [1, 0, 0, 1, 1]
    budget = r.params.budget
    assert out[-1].summary["epsilon_period"] == pytest.approx(budget.period_epsilon(2))
    assert budget.period_epsilon(2) <= 4.0


def test_a_failing_window_is_a_failed_summary_and_the_next_one_releases(monkeypatch) -> None:
    r = releaser()
    columns = window_columns(crowd("a", 200, 30.0))

    def broken(*args: object) -> None:
        raise ZeroDivisionError("a reading's value must never reach a log line")

    real = secret_window.release_secret_window
    monkeypatch.setattr(secret_window, "release_secret_window", broken)
    failed = r.release(0, columns)
    monkeypatch.setattr(secret_window, "release_secret_window", real)
    after = r.release(HOUR, columns)
    assert failed.cells == [] and failed.summary["status"] == "failed"
    assert failed.summary["error"] == "ZeroDivisionError"
    assert "reading" not in str(failed.summary)
    assert after.summary["status"] == "released" and after.summary["windows_in_period"] == 2


def test_the_engine_releases_an_empty_hour_between_two_with_readings() -> None:
    settings = load_settings(privacy_model="secret-routes", window_seconds=HOUR, resolution=7)
    start = 1_700_006_400
    span = (start, start + 3 * HOUR)
    engine = OfflineEngine(settings, LaplaceNoise(RandomSource.seeded_for_tests(2)), span=span)
    rows = [
        {"vehicle_id": f"v{i}", "ts": start + hour * HOUR + i, "lat": 40.7, "lon": -74.0,
         "speed": 30.0}
        for hour in (0, 2) for i in range(300)
    ]  # fmt: skip
    out = [w for batch in (engine.feed(rows), engine.finish(True)) for w in batch]
    assert [w.window_start - start for w in out] == [0, HOUR, 2 * HOUR]
    assert [len(w.cells) for w in out] == [1, 0, 1]
    assert [w.summary["windows_in_period"] for w in out] == [1, 2, 3]


def test_a_rebuilt_releaser_counts_on_from_the_stored_summary() -> None:
    """A restart's releaser told the latest stored window (hour 3, third of its period)
    fills the empty hour after it and counts on: never from one again."""
    params = SecretRoutesParams(SecretRoutesBudget(4.0, 1e-6, 6, 1), window_seconds=HOUR)
    r = SecretRoutesReleaser(params, RandomSource.seeded_for_tests(2), first=0)
    r.note_stored(3 * HOUR, 3)
    r.note_stored(2 * HOUR, 2)  # an older stored window read after it changes nothing
    gap = list(r._gap_before(5 * HOUR))
    assert gap == [4 * HOUR]
    out = [r.release(start, window_columns([])) for start in (*gap, 5 * HOUR)]
    assert [w.summary["windows_in_period"] for w in out] == [4, 5]
