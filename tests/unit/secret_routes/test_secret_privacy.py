"""Black-box privacy tests of the secret-routes release (docs/math.md §14): neighbouring
windows and streams (one vehicle added), event-based lower bounds on epsilon from many
seeded runs (Clopper-Pearson), positive controls (a deliberately broken release is caught),
and partition selection's delta for a cell only the added vehicle visited."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import h3
import pytest
from scipy.stats import beta

from stream_dp.config import load_settings
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource
from stream_dp.dp.secret_accounting import COUNT_STEPS, SecretRoutesBudget
from stream_dp.engine import OfflineEngine
from stream_dp.release.records import WindowRelease
from stream_dp.secret_routes.params import SecretRoutesParams
from stream_dp.secret_routes.release import release_secret_window
from tests.unit.secret_routes.columns import Pair, crowd, window_columns

#: Two-sided confidence of each Clopper-Pearson bound.
CONFIDENCE = 0.999


def cp_low(k: int, n: int) -> float:
    return 0.0 if k == 0 else float(beta.ppf((1 - CONFIDENCE) / 2, k, n - k + 1))


def cp_high(k: int, n: int) -> float:
    return 1.0 if k == n else float(beta.ppf(1 - (1 - CONFIDENCE) / 2, k + 1, n - k))


def epsilon_lower_bound(hits: int, other_hits: int, runs: int, delta: float) -> float:
    """From ``P[E | D'] <= e^eps P[E | D] + delta``: the least eps the counts support."""
    high = cp_high(other_hits, runs)
    low = cp_low(hits, runs) - delta
    return math.log(low / high) if low > 0 and high > 0 else 0.0


@dataclass(frozen=True)
class QuarterCountNoise(SecretRoutesParams):
    """A broken release: the count noise a quarter of what its epsilon needs."""

    @property
    def count_scale(self) -> Fraction:
        return super().count_scale / 4


@dataclass(frozen=True)
class NoThreshold(SecretRoutesParams):
    """A broken release: any cell whose noisy count reaches one vehicle is shown."""

    @property
    def threshold(self) -> int:
        return COUNT_STEPS


BUDGET = SecretRoutesBudget(2.0, 1e-6, 1, 1)  # per-cell epsilon ~1: events with power
BASE: list[Pair] = crowd("a", 30, 20.0) + crowd("b", 5, 10.0)
ADDED: list[Pair] = [("x", "a", [60.0, 61.0])]


def hits(params: SecretRoutesParams, pairs: list[Pair], event: Callable[[WindowRelease], bool],
         runs: int, seed: int) -> int:  # fmt: skip
    source = RandomSource.seeded_for_tests(seed)
    columns = window_columns(pairs)
    return sum(event(release_secret_window(0, columns, params, source, 1)) for _ in range(runs))


def count_at_least(cell: str, vehicles: float) -> Callable[[WindowRelease], bool]:
    def event(release: WindowRelease) -> bool:
        return any(c["cell"] == cell and c["n_vehicles_noisy"] >= vehicles for c in release.cells)

    return event


def mean_at_least(cell: str, value: float) -> Callable[[WindowRelease], bool]:
    def event(release: WindowRelease) -> bool:
        return any(c["cell"] == cell and c["mean"] >= value for c in release.cells)

    return event


def _bound(params: SecretRoutesParams, event: Callable[[WindowRelease], bool],
           runs: int) -> float:  # fmt: skip
    with_vehicle = hits(params, BASE + ADDED, event, runs, seed=1)
    without = hits(params, BASE, event, runs, seed=2)
    return max(
        epsilon_lower_bound(with_vehicle, without, runs, BUDGET.selection_delta),
        epsilon_lower_bound(runs - with_vehicle, runs - without, runs, BUDGET.selection_delta),
    )


@dataclass(frozen=True)
class HalfCountNoise(SecretRoutesParams):
    """A broken release: the count noise half of what its epsilon needs (the count alone
    then loses about the whole window's epsilon: only a count-only claim catches it)."""

    @property
    def count_scale(self) -> Fraction:
        return super().count_scale / 2


def count_claim(params: SecretRoutesParams) -> float:
    """What an event on the noisy counts alone may show: ``L0 eps_n`` plus the selection's
    ``-ln(1 - delta_sel)`` (§14.4), not the whole window's epsilon."""
    budget = params.budget
    return budget.cells * float(budget.cell_epsilons[0]) - math.log1p(-budget.selection_delta)


def test_epsilon_lower_bound_stays_below_the_claim() -> None:
    params = SecretRoutesParams(BUDGET, window_seconds=3600)
    found = _bound(params, count_at_least("a", 31), 4000)
    assert 0.3 < found < count_claim(params)  # the count's part of the window's epsilon
    found = _bound(params, mean_at_least("a", 21.0), 4000)
    assert 0.3 < found < params.budget.window_epsilon


def test_positive_control_quartered_count_noise_is_caught() -> None:
    broken = QuarterCountNoise(BUDGET, window_seconds=3600)
    assert _bound(broken, count_at_least("a", 31), 4000) > broken.budget.window_epsilon


def test_positive_control_halved_count_noise_is_caught_by_the_count_claim() -> None:
    broken = HalfCountNoise(BUDGET, window_seconds=3600)
    assert _bound(broken, count_at_least("a", 31), 4000) > count_claim(broken)


def test_partition_selection_shows_a_lone_vehicles_cell_within_delta() -> None:
    budget = SecretRoutesBudget(2.0, 0.2, 1, 2)  # delta_sel 0.02: 0.01 per cell (L0 2)
    lone: list[Pair] = [("x", "a", [50.0]), ("x", "z", [40.0])]  # z: only x was there
    shown = count_at_least("z", -math.inf)
    runs = 4000
    params = SecretRoutesParams(budget, window_seconds=3600, contribution_cells=2)
    found = hits(params, BASE + lone, shown, runs, seed=3)
    assert cp_low(found, runs) <= budget.selection_delta / budget.cells
    broken = NoThreshold(budget, window_seconds=3600, contribution_cells=2)
    caught = hits(broken, BASE + lone, shown, runs, seed=3)
    assert cp_low(caught, runs) > budget.selection_delta / budget.cells  # positive control


# --- neighbouring streams through the offline engine ---------------------------------------

POINTS = {"A": (40.70, -74.00), "B": (40.80, -73.90), "C": (40.60, -74.10)}
HOUR = 3600
START = 1_700_000_000 - 1_700_000_000 % 7200


#: The released span: an empty hour, the two hours with readings, an empty hour.
SPAN = (START - HOUR, START + 3 * HOUR)


def lone_x(ts: float) -> dict[str, Any]:
    lat, lon = POINTS["B"]
    return {"vehicle_id": "x", "ts": ts, "lat": lat, "lon": lon, "speed": 60.0}


#: Other neighbours: the added vehicle's only reading in the empty first or last hour, hours
#: ahead and first in the input, or in the first hour but last in the input (out of order).
LONE = {"first hour": START - HOUR + 5, "last hour": START + 2 * HOUR + 5,
        "future, first": START + 10 * HOUR, "out of order": START + 7}  # fmt: skip


def neighbour(name: str) -> list[dict[str, Any]]:
    rows = stream(False)
    if name in ("future, first", "first hour"):
        return [lone_x(LONE[name]), *rows]
    return [*rows, lone_x(LONE[name])]


def stream(with_vehicle: bool) -> list[dict[str, Any]]:
    """Two hours, 40 vehicles in each of three cells each hour; the added vehicle visits A,
    B and C in the first hour and A in the second."""
    rows = []
    for hour in (0, 1):
        for name, (lat, lon) in POINTS.items():
            for i in range(40):
                rows.append({"vehicle_id": f"{name}{i}", "ts": START + hour * HOUR + i,
                             "lat": lat, "lon": lon, "speed": 20.0})  # fmt: skip
    if with_vehicle:
        visits = [(0, "A"), (0, "A"), (0, "B"), (0, "C"), (1, "A")]
        for k, (hour, name) in enumerate(visits):
            lat, lon = POINTS[name]
            rows.append({"vehicle_id": "x", "ts": START + hour * HOUR + 100 + k,
                         "lat": lat, "lon": lon, "speed": 60.0})  # fmt: skip
    return sorted(rows, key=lambda r: r["ts"])


def engine_release(with_vehicle: bool, seed: int, rows: list[dict[str, Any]] | None = None,
                   ) -> list[WindowRelease]:  # fmt: skip
    rows = stream(with_vehicle) if rows is None else rows
    settings = load_settings(
        privacy_model="secret-routes", vehicle_budget=4.0, budget_period_seconds=2 * HOUR,
        window_seconds=HOUR, contribution_cells=2, resolution=7, accounting_delta=1e-6,
    )  # fmt: skip
    noise = LaplaceNoise(RandomSource.seeded_for_tests(seed))
    engine = OfflineEngine(settings, noise, span=SPAN)
    return [r for batch in (engine.feed(rows), engine.finish(True)) for r in batch]


def untouched_cells(release: WindowRelease) -> list[tuple[Any, ...]]:
    """The noisy fields of cells A and C, which the lone readings never touch."""
    untouched = {h3.latlng_to_cell(*POINTS[p], 7) for p in "AC"}
    fields = ("cell", "n_vehicles_noisy", "mean", "mean_low", "mean_high")
    return [tuple(c[f] for f in fields) for c in release.cells if c["cell"] in untouched]


@pytest.mark.parametrize("name", ["visits", *LONE])
def test_neighbouring_streams_differ_only_in_noisy_fields(name: str) -> None:
    added = stream(True) if name == "visits" else neighbour(name)
    a, b = engine_release(True, 5, added), engine_release(False, 5)
    assert [r.window_start for r in b] == list(range(*SPAN, HOUR))
    assert [r.window_start for r in a] == [r.window_start for r in b]  # one summary a window
    for ra, rb in zip(a, b, strict=True):
        for record in [*ra.records, *rb.records]:
            assert record["privacy_model"] == "secret-routes"
            assert not {"n_vehicles", "n_readings", "cells_observed"} & record.keys()
            assert "x" not in str(record.values())
        assert ra.summary.keys() == rb.summary.keys()
        for key in ("epsilon_window", "epsilon_period", "delta_period", "windows_in_period"):
            assert ra.summary[key] == rb.summary[key]  # the same for every vehicle, present or not
    if name in ("last hour", "future, first", "out of order"):  # x adds no cell before them:
        for ra, rb in zip(a[:3], b[:3], strict=True):  # the same noise draws: A and C
            assert untouched_cells(ra) == untouched_cells(rb)  # come out the very same


def test_neighbouring_streams_event_bound_below_the_window_epsilon() -> None:
    cell_a = h3.latlng_to_cell(*POINTS["A"], 7)
    runs = 600

    def event(releases: list[WindowRelease]) -> bool:
        first = releases[1].cells
        return any(c["cell"] == cell_a and c["n_vehicles_noisy"] >= 40.5 for c in first)

    with_vehicle = sum(event(engine_release(True, 10_000 + s)) for s in range(runs))
    without = sum(event(engine_release(False, 20_000 + s)) for s in range(runs))
    claimed = engine_release(True, 0)[1].summary["epsilon_window"]
    found = epsilon_lower_bound(with_vehicle, without, runs, 1e-6)
    assert with_vehicle > without  # the added vehicle moves the count: the event sees it
    assert found < claimed
