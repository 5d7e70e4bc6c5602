"""Issue 21: a window whose release computation raises is contained, offline and in the
service alike (both call :func:`stream_dp.release.window.release_ready_window`)."""

from __future__ import annotations

import json
from pathlib import Path

import h3
import jsonschema
import pytest

from stream_dp import fault_injection
from stream_dp.config import load_settings
from stream_dp.dp.budget_ledger import BudgetLedger
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.pld_accounting import pld_available
from stream_dp.dp.randomness import RandomSource
from stream_dp.engine import OfflineEngine
from stream_dp.release import window as window_outcome
from stream_dp.release.params import ReleaseParams
from stream_dp.release.records import FAILED, RELEASED
from stream_dp.release.window import release_window
from tests.support.readings import HOUR, synthetic_readings
from tests.support.settings import FIXED_EPSILON_MODE, fixed_mode_settings

SCHEMA = json.loads(
    (Path(__file__).parents[3] / "stream_dp/schemas/release-record.schema.json").read_text()
)
#: Fields a failed window's summary may carry: none holds a cell value or vehicle data.
#: What a failed window's summary may not state: it has these fields (as a released one), null.
DATA_FIELDS = {
    "error_bound", "max_error", "cells_observed", "n_vehicles", "n_readings", "suppressed_pairs",
    "vehicles_budget_limited", "pairs_withheld_budget", "cells_withheld", "readings_withheld",
}  # fmt: skip


@pytest.fixture
def fault(monkeypatch):
    """Set ``STREAM_DP_FAULT_INJECTION`` for this process, its call counts starting at 0."""
    fault_injection._calls.clear()

    def set_fault(value: str) -> None:
        monkeypatch.setenv(fault_injection.ENV, value)

    yield set_fault
    fault_injection._calls.clear()


def run_engine(settings, readings, seed=1):
    engine = OfflineEngine(settings, LaplaceNoise(RandomSource.seeded_for_tests(seed)))
    return engine, [*engine.feed(readings), *engine.finish()]


def four_hours():
    return synthetic_readings(n_vehicles=20, hours=4, per_hour=300, seed=4)


def test_an_injected_failure_fails_only_its_window(fault):
    settings = fixed_mode_settings(resolution=7)
    readings = four_hours()
    _, clean = run_engine(settings, readings)
    fault("release-error:2")
    engine, releases = run_engine(settings, readings)
    assert [r.window_start for r in releases] == [r.window_start for r in clean]
    assert len(releases) == 4
    assert [r.failed for r in releases] == [False, True, False, False]
    failed = releases[1]
    assert failed.cells == [] and failed.records == [failed.summary]
    summary = failed.summary
    assert summary["status"] == FAILED and summary["error"] == "InjectedReleaseError"
    # One summary builder: the failed summary has the released one's fields, in its order.
    assert list(summary) == list(clean[1].summary)
    assert all(summary[field] is None for field in DATA_FIELDS)
    assert all(clean[1].summary[field] is not None for field in DATA_FIELDS)
    jsonschema.validate(summary, SCHEMA)
    for leak in ({"mean": 1.0}, {"n_vehicles": 20}, {"status": RELEASED}):
        with pytest.raises(jsonschema.ValidationError):  # the schema admits no data in it
            jsonschema.validate({**summary, **leak}, SCHEMA)
    # Another release event of the window: its own id (release ids name one release).
    assert summary["release_id"] != clean[1].summary["release_id"]
    for ok, reference in zip(
        [releases[i] for i in (0, 2, 3)], [clean[i] for i in (0, 2, 3)], strict=True
    ):
        assert ok.summary["status"] == RELEASED
        assert [c["cell"] for c in ok.cells] == [c["cell"] for c in reference.cells]
        for record in ok.records:
            jsonschema.validate(record, SCHEMA)
    # Charged as if released, conservatively: every vehicle at least what the release charged.
    charged = dict(zip(failed.loss.vehicles, failed.loss.cells.tolist(), strict=True))
    released = dict(zip(clean[1].loss.vehicles, clean[1].loss.cells.tolist(), strict=True))
    assert released and all(charged.get(v, 0) >= c for v, c in released.items())
    assert summary["K"] == max(charged.values()) >= clean[1].summary["K"]
    assert summary["privacy_loss"] == summary["K"] * settings.epsilon
    assert [e.window_start for e in engine.ledger.entries()] == [r.window_start for r in clean]


def test_a_failure_deep_in_the_release_is_charged_within_the_budget_cap(monkeypatch):
    """A mechanism that raises on one window's cells: that window fails, the others are
    released, and the charge never exceeds what the cap allows."""
    settings = fixed_mode_settings(
        resolution=7, mean_mechanism="baseline", budget_cap=6.0, budget_period_seconds=4 * HOUR
    )
    readings = four_hours()
    _, clean = run_engine(settings, readings)
    doomed = clean[2].window_start
    from stream_dp.release.noisy import CellDataOf

    real = CellDataOf.__call__

    def flaky(self, g):
        if calls["window"] == doomed:
            raise ZeroDivisionError("boom")
        return real(self, g)

    calls = {"window": None}
    real_release = window_outcome.release_window

    def tracking(window_start, *args):
        calls["window"] = window_start
        return real_release(window_start, *args)

    monkeypatch.setattr(CellDataOf, "__call__", flaky)
    monkeypatch.setattr(window_outcome, "release_window", tracking)
    engine, releases = run_engine(settings, readings)
    assert [r.failed for r in releases] == [False, False, True, False]
    failed = releases[2]
    assert failed.summary["error"] == "ZeroDivisionError"
    assert failed.error_site.startswith("test_window_outcome.py:")
    # The cap holds with the failed window charged: no vehicle above it in any period.
    for entry in engine.ledger.entries():
        assert engine.ledger.max_loss(entry.window_start) <= settings.budget_cap + 1e-9
    assert failed.loss.max_loss <= settings.budget_cap
    assert clean[2].summary["pairs_withheld_budget"] > 0  # the cap did bind in that window


def test_a_window_that_cannot_even_be_merged_is_charged_every_pair(monkeypatch):
    settings = fixed_mode_settings(resolution=7)
    readings = four_hours()
    _, clean = run_engine(settings, readings)
    from stream_dp.windows.coordinator import ReleaseCoordinator

    real = ReleaseCoordinator.merged

    def broken(self, window_start):
        if window_start == clean[0].window_start:
            raise MemoryError
        return real(self, window_start)

    monkeypatch.setattr(ReleaseCoordinator, "merged", broken)
    _, releases = run_engine(settings, readings)
    failed = releases[0]
    assert failed.failed and failed.summary["error"] == "MemoryError"
    # Every (cell, vehicle) pair of the hour, from the partials.
    pairs: dict[str, set[str]] = {}
    for r in readings:
        if r["ts"] < clean[0].window_start + HOUR:
            cell = h3.latlng_to_cell(r["lat"], r["lon"], settings.resolution)
            pairs.setdefault(r["vehicle_id"], set()).add(cell)
    charged = dict(zip(failed.loss.vehicles, failed.loss.cells.tolist(), strict=True))
    assert charged == {v: len(c) for v, c in pairs.items()}


def test_the_fault_point_counts_windows_per_process(fault):
    fault("release-error:3")
    hits = []
    for _ in range(5):
        try:
            fault_injection.error_point_counted(window_outcome.FAULT_POINT)
            hits.append(False)
        except fault_injection.InjectedReleaseError:
            hits.append(True)
    assert hits == [False, False, True, False, False]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize(("min_vehicles", "top_cells"), [(3, None), (1, 3), (4, 5)])
def test_a_failed_window_charges_each_vehicle_at_least_its_release(
    seed: int, min_vehicles: int, top_cells: int | None
) -> None:
    """Adaptive cells with min_vehicles and top_cells (issue 26 item 8): the failed outcome
    chooses its cells as the release does (after the regrouping), so no vehicle is charged
    fewer cells than the release of the same window would have charged it."""
    from tests.unit.dp.test_adaptive_cells import targeted_window

    params = ReleaseParams.from_settings(
        load_settings(
            resolution=8, coarsest_resolution=5, target_mean_error=20.0, epsilon=1.0,
            min_vehicles=min_vehicles, top_cells=top_cells, vehicle_budget="none",
        )
    )  # fmt: skip
    window = targeted_window(seed)
    noise = LaplaceNoise(RandomSource.seeded_for_tests(seed))
    released = release_window(0, window, params, noise, ledger=BudgetLedger(86400, None)).loss
    failed = window_outcome.failed_release(
        0, RuntimeError(), params, 0, BudgetLedger(86400, None), window, []
    ).loss
    assert released is not None and failed is not None
    assert int(released.cells.max(initial=0)) > 0, "the window must release something"
    assert_charged_at_least(failed, released)


def assert_charged_at_least(failed, released) -> None:
    """Each vehicle's failed charge is at least its release's, in cells and in ε (``loss``)."""
    cells = dict(zip(failed.vehicles, failed.cells.tolist(), strict=True))
    loss = dict(zip(failed.vehicles, failed.loss.tolist(), strict=True))
    pairs = zip(released.vehicles, released.cells.tolist(), released.loss.tolist(), strict=True)
    short = [
        (vehicle, n, eps, cells.get(vehicle, 0), loss.get(vehicle, 0.0))
        for vehicle, n, eps in pairs
        if cells.get(vehicle, 0) < n or loss.get(vehicle, 0.0) < eps - 1e-12
    ]
    assert not short


def test_a_failed_window_with_a_carry_charges_what_its_span_release_would():
    """Issue 25: under a vehicle budget a failed window pools the carry before it is charged:
    the 24 vessels of a four-hour span's record are charged their ε, not nothing."""
    from tests.unit.release.test_vehicle_budget import _params, _run, _window

    params = _params(vehicle_budget=6.0, max_span_hours=4, coarsest_resolution=8)
    windows = [[(0, 6 * h + v, 30.0 + v) for v in range(6) for _ in range(2)] for h in range(4)]
    releases, _ = _run(params, windows[:3])
    carry = releases[-1].carry
    assert carry is not None
    ledger = BudgetLedger(params.ledger_period_seconds, None)
    for rel in releases:
        ledger.record_released(rel.loss)
    columns = _window(3 * HOUR, windows[3])
    released = release_window(3 * HOUR, columns, params, LaplaceNoise(), 0, ledger, carry)
    assert len(released.cells) == 1 and len(released.loss.vehicles) == 24
    failed = window_outcome.failed_release(
        3 * HOUR, RuntimeError(), params, 0, ledger, columns, [], carry
    ).loss
    assert failed is not None
    assert_charged_at_least(failed, released.loss)


def test_a_window_that_cannot_be_merged_under_a_vehicle_budget_charges_at_most_the_room(
    monkeypatch,
):
    """Issue 25: the partials' fallback charges each vehicle at most its room (what any
    release could have charged it), so no vehicle passes B however many cells it is in."""
    from stream_dp.windows.coordinator import ReleaseCoordinator

    base = h3.latlng_to_cell(52.52, 13.40, 8)
    cells = sorted(h3.grid_disk(base, 1))
    readings = [
        {"vehicle_id": "boat", "ts": h * HOUR + i, "lat": h3.cell_to_latlng(c)[0],
         "lon": h3.cell_to_latlng(c)[1], "speed": 30.0}
        for h in range(6) for i, c in enumerate(cells)
    ]  # fmt: skip
    settings = load_settings(
        app_id="t", vehicle_budget=3.0, vehicle_budget_burst=3.0, target_mean_error=10.0,
        budget_period_seconds=24 * HOUR, partitions=1,
    )  # fmt: skip

    def broken(self, window_start):
        raise MemoryError

    monkeypatch.setattr(ReleaseCoordinator, "merged", broken)
    engine, releases = run_engine(settings, readings)
    assert len(releases) == 6 and all(r.failed for r in releases)
    charged = [float(r.loss.loss.sum()) for r in releases]
    assert charged[0] == pytest.approx(3.0)  # the whole room, not 7 cells at epsilon 1
    assert sum(charged) <= 3.0 * (1 + 1e-9)
    assert engine.ledger.max_loss(5 * HOUR) <= 3.0 * (1 + 1e-9)
    assert releases[0].summary["max_vehicle_loss"] == pytest.approx(3.0)


def test_the_pld_figure_is_null_where_pld_does_not_compose_the_mechanism() -> None:
    """Issue 26 item 8: an (ε, δ) mean's cells are no Laplace releases; a pure one's are."""
    readings = four_hours()
    modes = (  # a fixed ε per cell; the clip mean at T 15 (release's old default)
        ("cummings", False, {"vehicle_budget": "none"}),
        ("clip", True, FIXED_EPSILON_MODE),
    )
    for mechanism, composes, mode in modes:
        settings = load_settings(resolution=7, mean_mechanism=mechanism, delta=1e-6, **mode)
        _, releases = run_engine(settings, readings)
        summaries = [r.summary for r in releases if r.summary["K"] > 0]
        assert summaries
        for summary in summaries:
            assert (summary["privacy_loss_pld"] is not None) == (composes and pld_available())
