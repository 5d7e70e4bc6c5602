"""Live first (docs/math.md §13.3, "When a cell is released"): a cell that meets T within its
release price is released at its own window's close, never held to fill a span; only what
cannot pools, and the span limit bounds how late anything comes out. The price (the paced
share of the burst, or what the vehicles' full buckets would lose by waiting) checked against
a token bucket simulated window by window; no vehicle past B over random windows and rooms."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import h3
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_dp.config import load_settings
from stream_dp.dp.budget_ledger import WindowLoss
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.engine import OfflineEngine
from stream_dp.release.accounting import PrivacyAccountant
from stream_dp.release.params import ReleaseParams
from stream_dp.release.records import WindowRelease
from stream_dp.release.vehicle_budget.price import SHARE_EXPONENT, release_price
from tests.unit.release.test_budget_cells import _run as run_hours

U, T, HOUR = 65.0, 10.0, 3600
CENTRE = h3.latlng_to_cell(40.70, -74.02, 8)
A, B = sorted(h3.cell_to_children(h3.cell_to_parent(CENTRE, 7), 8))[:2]
#: B 14 per day, T 10, resolution 8 merged up to 7, spans of up to 4 hours (burst B/6).
BUDGET: dict[str, Any] = dict(
    epsilon=1.0, upper=U, resolution=8, coarsest_resolution=7, target_mean_error=T,
    variance_share=0.0, vehicle_budget=14.0, vehicle_budget_burst=14.0 / 6,
    budget_period_seconds=24 * HOUR, max_span_hours=4, app_id="test",
)  # fmt: skip


def _run(
    params: ReleaseParams,
    hours: list[list[tuple[str, str]]],
    spent: dict[str, float] | None = None,
) -> list[WindowRelease]:
    """Release each hour as the service does (ledger and carry, no end of input);
    ``spent``: what each vehicle spent the hour before."""
    ledger = PrivacyAccountant(params).new_ledger()
    if spent:
        names = tuple(sorted(spent))
        losses = np.array([spent[n] for n in names])
        ones = np.ones(len(names), dtype=np.int64)
        ledger.record_released(WindowLoss(-HOUR, float(losses.max()), names, ones, losses))
    return run_hours(params, hours, ledger)


def _fleet(cell: str, prefix: str, vehicles: int, readings: int = 2) -> list[tuple[str, str]]:
    return [(cell, f"{prefix}{v}") for v in range(vehicles) for _ in range(readings)]


def _spans(release: WindowRelease) -> list[tuple[str, str, str, int]]:
    return sorted(
        (r["cell"], r["window_start"][11:16], r["window_end"][11:16], r["n_readings"])
        for r in release.cells
    )


def test_a_small_fleet_is_published_at_its_hour_s_close_by_the_service() -> None:
    """20 vehicles for one hour: their cell meets T at an ε their full buckets can pay and
    would otherwise lose to overflow while the span fills; the service (no end of input)
    publishes it at the hour's close. Held for a longer span before, nothing came out."""
    lat, lon = h3.cell_to_latlng(CENTRE)
    point = {"lat": lat, "lon": lon, "speed": 30.0}
    readings = [{**point, "vehicle_id": f"v{n // 2}", "ts": 50 * n} for n in range(40)]
    engine = OfflineEngine(load_settings(**{**BUDGET, "max_span_hours": 8, "partitions": 2}),
                           LaplaceNoise())  # fmt: skip
    records = [r for rel in (*engine.feed(readings), *engine.finish()) for r in rel.cells]
    assert [(r["cell"], r["window_start"], r["window_end"], r["n_readings"]) for r in records] == [
        (CENTRE, "1970-01-01T00:00:00Z", "1970-01-01T01:00:00Z", 40)
    ]


def test_each_hour_that_meets_its_target_is_released_at_its_close_and_only_the_rest_pools(
) -> None:  # fmt: skip
    """Each hour 20 new vehicles in A (meets T alone) and 3 in B (too few alone, ε past the
    burst): A is released every hour, live; B's readings are carried until a span of them
    meets T (alone or pooled into the parent), never past ``max_span_hours``."""
    hours = [_fleet(A, f"a{h}-", 20) + _fleet(B, f"b{h}-", 3) for h in range(4)]
    releases = _run(ReleaseParams(**BUDGET), hours)
    for h, release in enumerate(releases):
        live = [s for s in _spans(release) if s[0] == A]
        assert live == [(A, f"{h:02d}:00", f"{h + 1:02d}:00", 40)], h
    pooled = [r for rel in releases for r in rel.cells if r["cell"] != A]
    assert pooled, "B's readings pool and come out within the span limit"
    for record in pooled:
        start, end = int(record["window_start"][11:13]), int(record["window_end"][11:13])
        assert 1 < end - start <= BUDGET["max_span_hours"]


def test_a_cell_above_its_price_pools_and_is_released_by_its_last_window() -> None:
    """Vehicles that spent most of their room (no bucket to overflow) and a cell whose ε is
    above the paced share of a one-hour record: it pools, and is released at the latest at the
    window that fills its span (the price is then the burst): no record later than that."""
    hours = [_fleet(A, "a", 20) for _ in range(6)]
    spent = {f"a{v}": 1.6 for v in range(20)}
    releases = _run(ReleaseParams(**BUDGET), hours, spent)
    records = [r for rel in releases for r in rel.cells]
    assert records and releases[0].cells == []  # one hour is not worth its ε here
    lengths = [int(r["window_end"][11:13]) - int(r["window_start"][11:13]) for r in records]
    assert max(lengths) > 1 and all(1 <= n <= BUDGET["max_span_hours"] for n in lengths)


def _overflow_by_simulation(room: float, pace: float, burst: float, windows: int) -> float:
    """What a token bucket holding ``room`` loses while it refills at ``pace`` per window for
    ``windows`` windows with nothing spent (capped at ``burst``)."""
    level, lost = room, 0.0
    for _ in range(windows):
        level += pace
        lost += max(level - burst, 0.0)
        level = min(level, burst)
    return lost


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    span=st.integers(1, 8),
    max_span=st.integers(1, 8),
    room=st.floats(0.0, 3.5),
    pace=st.floats(0.0, 1.0),
)
def test_the_price_is_the_paced_share_or_what_waiting_would_overflow(
    span: int, max_span: int, room: float, pace: float
) -> None:
    burst = 3.5
    room = min(room, burst)
    price = release_price(np.array([span]), max_span, burst, pace, np.array([room]))[0]
    share = burst * min(span / max_span, 1.0) ** SHARE_EXPONENT
    lost = _overflow_by_simulation(room, pace, burst, max(max_span - span, 0))
    assert price == pytest.approx(min(max(share, lost), burst), abs=1e-9)
    if span >= max_span:  # the last window of a span: any affordable cell is released
        assert price == burst


def _windows(seed: int, hours: int) -> list[list[tuple[str, str]]]:
    rng = np.random.default_rng(seed)
    cells = [A, B, CENTRE]
    return [
        [(cells[int(rng.integers(0, 3))], f"v{int(rng.integers(0, 30))}")
         for _ in range(int(rng.integers(1, 200)))]
        for _ in range(hours)
    ]  # fmt: skip


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow],
          derandomize=True)  # fmt: skip
@given(
    seed=st.integers(0, 10_000),
    hours=st.integers(2, 10),
    budget=st.sampled_from([2.0, 6.0, 14.0]),
    span=st.integers(1, 4),
    spent=st.lists(st.floats(0.0, 1.0), min_size=30, max_size=30),
)
def test_no_vehicle_past_b_over_random_windows_and_rooms(
    seed: int, hours: int, budget: float, span: int, spent: list[float]
) -> None:
    changes = {"vehicle_budget": budget, "vehicle_budget_burst": None, "max_span_hours": span}
    params = ReleaseParams(**{**BUDGET, **changes, "budget_period_seconds": 6 * HOUR})
    on_grid = {f"v{v}": round(x * budget / 2 * 128) / 128 for v, x in enumerate(spent)}
    before = {name: x for name, x in on_grid.items() if x > 0}  # up to B/2 spent an hour ago
    releases = _run(params, _windows(seed, hours), before)
    period = params.ledger_period_seconds
    spends: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for name, value in before.items():
        spends[name].append((-HOUR, value))
    for release in releases:
        assert release.loss is not None
        for name, value in zip(release.loss.vehicles, release.loss.loss.tolist(), strict=True):
            spends[name].append((release.window_start, value))
    for items in spends.values():
        for start, _ in items:
            total = sum(x for t, x in items if start <= t < start + period)
            assert total <= budget * (1 + 1e-9)
    for record in (r for rel in releases for r in rel.cells):
        assert record["mean_error"] <= T
        length = int(record["window_end"][11:13]) - int(record["window_start"][11:13])
        assert 1 <= length <= span
