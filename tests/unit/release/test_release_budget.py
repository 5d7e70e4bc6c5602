"""The per-vehicle budget ledger inside the release step and the offline engine."""

from __future__ import annotations

import numpy as np
import pytest

from stream_dp.config import ConfigError, load_settings
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource
from stream_dp.engine import OfflineEngine
from stream_dp.release.accounting import PrivacyAccountant
from stream_dp.release.params import ReleaseParams
from tests.support.readings import HOUR, START, hourly_readings
from tests.support.settings import fixed_mode_settings


def readings(hours: int, n_vehicles: int = 20, per_hour: int = 300, seed: int = 5):
    """Vehicles wandering over a handful of resolution-7 cells, hour after hour."""
    return hourly_readings(n_vehicles, hours, per_hour, start=START, seed=seed)


def run(settings, data):
    engine = OfflineEngine(settings, LaplaceNoise(RandomSource.seeded_for_tests(1)), partitions=2)
    releases = [*engine.feed(data), *engine.finish()]
    return engine, releases


def brute_force_losses(releases):
    """Per window, each vehicle's cells counted, from the releases' loss records."""
    return {
        r.window_start: dict(zip(r.loss.vehicles, r.loss.cells.tolist(), strict=True))
        for r in releases
    }


@pytest.mark.parametrize(("cap_cells", "period_hours"), [(1, 3), (2, 2), (3, 5)])
def test_no_vehicle_exceeds_the_cap_in_any_rolling_period(cap_cells, period_hours):
    eps = 0.5
    settings = fixed_mode_settings(
        epsilon=eps, resolution=7, budget_cap=cap_cells * eps,
        budget_period_seconds=period_hours * HOUR,
    )  # fmt: skip
    _, releases = run(settings, readings(hours=8))
    losses = brute_force_losses(releases)
    starts = sorted(losses)
    assert len(starts) == 8
    vehicles = {v for per in losses.values() for v in per}
    for end in starts:
        in_period = [w for w in starts if end - period_hours * HOUR < w <= end]
        for v in vehicles:
            assert sum(losses[w].get(v, 0) for w in in_period) <= cap_cells
    # the cap binds: some pairs were withheld, and the summaries say so
    assert sum(r.summary["pairs_withheld_budget"] for r in releases) > 0
    assert all(r.summary["budget_cap"] == cap_cells * eps for r in releases)


def test_published_counts_respect_the_cap():
    """From the records alone: with one cell per period of the whole run, each vehicle is
    counted in at most one released cell overall."""
    settings = fixed_mode_settings(
        epsilon=1.0, resolution=7, budget_cap=1.0, budget_period_seconds=24 * HOUR
    )
    _, releases = run(settings, readings(hours=6))
    counted = sum(c["n_vehicles_kept"] for r in releases for c in r.cells)
    assert 0 < counted <= 20


def test_without_a_cap_losses_are_tracked_and_nothing_is_withheld():
    settings = fixed_mode_settings(epsilon=0.5, resolution=7)
    engine, releases = run(settings, readings(hours=4))
    assert all(r.summary["pairs_withheld_budget"] == 0 for r in releases)
    assert all(r.summary["budget_cap"] is None for r in releases)
    # the loss of a window is K * eps at most, and reaches it for some vehicle
    for r in releases:
        assert int(r.loss.cells.max()) == r.summary["K"]
    # the ledger's rolling maximum is the largest per-vehicle sum over the last day
    totals: dict[str, int] = {}
    for r in releases:
        for v, c in zip(r.loss.vehicles, r.loss.cells.tolist(), strict=True):
            totals[v] = totals.get(v, 0) + c
    last = max(r.window_start for r in releases)
    assert engine.ledger.max_loss(last) == pytest.approx(0.5 * max(totals.values()))


def test_a_capped_release_matches_its_occupancy():
    """Withheld pairs leave the occupancy: kept readings never include a limited vehicle's
    other cells, and cells left without vehicles are not released."""
    eps = 0.5
    capped = fixed_mode_settings(
        epsilon=eps, resolution=7, budget_cap=eps, budget_period_seconds=48 * HOUR
    )
    free = fixed_mode_settings(epsilon=eps, resolution=7)
    _, with_cap = run(capped, readings(hours=3))
    _, without = run(free, readings(hours=3))
    first_capped, first_free = with_cap[0], without[0]
    assert first_capped.summary["pairs_withheld_budget"] > 0
    # window 1 of the capped run: each vehicle counted in one cell only
    assert int(first_capped.loss.cells.max()) == 1
    assert first_capped.summary["K"] == 1
    kept = sum(c["n_vehicles_kept"] for c in first_capped.cells)
    assert kept == len(first_capped.loss.vehicles)
    assert sum(c["n_vehicles"] for c in first_capped.cells) < sum(
        c["n_vehicles"] for c in first_free.cells
    )
    # later windows: every vehicle already counted has nothing left
    later = {v for r in with_cap[1:] for v in r.loss.vehicles}
    assert not later & set(first_capped.loss.vehicles)
    assert np.all(first_capped.loss.cells == 1)


def test_the_losses_count_each_vehicles_kept_cells():
    """A vehicle's loss counts the cells whose release uses its readings: over a window, the
    losses add up to the released cells' kept vehicles."""
    _, releases = run(fixed_mode_settings(epsilon=0.5, resolution=7), readings(hours=3))
    assert releases
    for r in releases:
        assert int(r.loss.cells.sum()) == sum(c["n_vehicles_kept"] for c in r.cells)
        assert int(r.loss.cells.max()) == r.summary["K"]
        assert list(r.loss.vehicles) == sorted(set(r.loss.vehicles))


def test_a_cap_below_one_cell_fails_naming_the_field():
    with pytest.raises(ConfigError, match="budget_cap"):
        load_settings(epsilon=1.0, budget_cap=0.5)
    with pytest.raises(ConfigError, match="budget_period_seconds"):
        load_settings(budget_period_seconds=0)


def test_the_period_delta_is_cells_times_delta_only_for_cummings() -> None:
    """δ over the period (docs/math.md §7.11): c cells of the (ε, δ)-DP cummings mean lose
    c·δ; a pure ε-DP mechanism loses no δ whatever its ε."""

    def accountant(**values: object) -> PrivacyAccountant:
        return PrivacyAccountant(ReleaseParams.from_settings(fixed_mode_settings(**values)))

    cummings = accountant(mean_mechanism="cummings", delta=1e-6, epsilon=0.5)
    for cells in (0, 1, 3, 17):
        assert cummings.period_delta(cells * 0.5) == pytest.approx(cells * 1e-6)
    assert accountant(mean_mechanism="clip", epsilon=0.5).period_delta(7 * 0.5) == 0.0
    assert accountant(mean_mechanism="baseline", epsilon=0.5).period_delta(7 * 0.5) == 0.0
