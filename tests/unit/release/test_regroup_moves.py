"""The regrouping's fast paths (issue 25: the 1M-reading window's budget release) against the
paths they replace: the pairs' sums copied for pairs that stay alone (:class:`PairMoves`)
instead of one ``bincount`` over every pair, and the budget choice's reading logs regrouped
only for the choice it keeps. Each must give exactly what the old path gave."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import h3
import numpy as np
import pytest

from stream_dp.dp import kernels
from stream_dp.dp.adaptive_cells import pair_groups
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource
from stream_dp.release import adaptive, window
from stream_dp.release.accounting import PrivacyAccountant
from stream_dp.release.adaptive import PairMoves, regroup
from stream_dp.release.params import ReleaseParams
from stream_dp.release.vehicle_budget import cells as budget_cells
from stream_dp.windows.columns import WindowColumns
from stream_dp.windows.state import rank_in_runs

U, T, HOUR = 65.0, 10.0, 3600
CENTRE = h3.latlng_to_cell(40.70, -74.02, 8)


def _old_regroup(
    columns: WindowColumns, names: tuple[str, ...], unit: np.ndarray, prefix_limit: int,
    merged_unit: np.ndarray,
) -> WindowColumns:  # fmt: skip
    """The regrouping as it was (9bce537): every kept pair's sums by one ``bincount``."""
    keep = unit >= 0
    multi = keep & np.append(merged_unit, False)[unit]
    single = np.flatnonzero(keep & ~multi)
    group_cell, group_vehicle, inverse = pair_groups(
        unit[multi], columns.vehicle_code[multi], len(names), len(columns.vehicle_names)
    )
    pair_of = np.full(len(columns), -1, dtype=np.int64)
    pair_of[single] = np.arange(len(single))
    pair_of[multi] = len(single) + inverse
    n = len(single) + len(group_cell)
    inverse = pair_of[keep]
    reading_pair = pair_of[columns.reading_pair]
    live = reading_pair >= 0
    ts, value = columns.reading_ts[live], columns.reading_value[live]
    reading_pair = reading_pair[live]
    stored = np.bincount(reading_pair, minlength=n)
    if n and int(stored.max()) > prefix_limit:
        at = np.flatnonzero(stored[reading_pair] > prefix_limit)
        order = at[np.lexsort((value[at], ts[at], reading_pair[at]))]
        kept = np.ones(len(reading_pair), dtype=bool)
        kept[order[rank_in_runs(reading_pair[order]) >= prefix_limit]] = False
        reading_pair, ts, value = reading_pair[kept], ts[kept], value[kept]
    return WindowColumns(
        names, np.concatenate((unit[single], group_cell)), columns.vehicle_names,
        np.concatenate((columns.vehicle_code[single], group_vehicle)),
        np.bincount(inverse, weights=columns.count[keep], minlength=n).astype(np.int64),
        np.bincount(inverse, weights=columns.total[keep], minlength=n),
        np.bincount(inverse, weights=columns.total_sq[keep], minlength=n),
        reading_pair, ts, value,
    )  # fmt: skip


def _bytes(columns: WindowColumns) -> list[Any]:
    return [columns.cell_names, columns.vehicle_names] + [
        (a.dtype.str, a.tobytes())
        for a in (columns.cell_code, columns.vehicle_code, columns.count, columns.total,
                  columns.total_sq, columns.reading_pair, columns.reading_ts, columns.reading_value)
    ]  # fmt: skip


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_moved_pairs_are_the_old_regrouping_to_the_bit(
    seed: int, compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kernels, "use_compiled", lambda n: compiled)
    rng = np.random.default_rng(seed)
    cells = sorted(h3.grid_disk(CENTRE, 2))  # 19 cells
    n = 3000
    readings = (
        [cells[i] for i in rng.integers(0, len(cells), n)],
        [f"v{i:03d}" for i in rng.integers(0, 20, n)],
        rng.integers(0, HOUR, n).astype(float).tolist(),
        rng.choice([0.0, 3.5, 30.25, 64.0], n).tolist(),
    )
    columns = WindowColumns.from_readings(*readings, 64)
    assert int(np.bincount(columns.reading_pair).max()) < 30
    total = columns.total.copy()
    total[rng.integers(0, len(total), 40)] = -0.0  # a bincount adds a lone -0.0 up to 0.0
    columns = replace(columns, total=total)
    # Cells 0-5 stay alone, 6-13 merge into two units (joined logs past the prefix), the
    # rest are withheld.
    unit_of_cell = np.array([0, 1, 2, 3, 4, 5] + [6] * 4 + [7] * 4 + [-1] * 5, dtype=np.int64)
    names = tuple(f"unit{u}" for u in range(8))
    unit = unit_of_cell[columns.cell_code]
    merged_unit = np.bincount(unit_of_cell[unit_of_cell >= 0], minlength=8) > 1
    want = _old_regroup(columns, names, unit, 30, merged_unit)
    assert int(np.bincount(want.reading_pair).max()) == 30  # the prefix cut acted
    assert _bytes(regroup(columns, names, unit, 30, merged_unit)) == _bytes(want)
    counted = PairMoves.of(columns, names, unit, merged_unit).counts()
    assert _bytes(counted)[:5] == _bytes(want)[:5]  # names, codes and counts
    assert not counted.total.any() and len(counted.reading_pair) == 0  # counts alone


def _refusing_window() -> tuple[ReleaseParams, WindowColumns]:
    """Cell A passes the price alone, but five of its vessels also read in a far cell and
    cannot pay both: the plan drops A, which is refused and pooled into its parent with C
    (test_budget_cells' case); spans of one hour, so nothing is held."""
    parent = h3.cell_to_parent(CENTRE, 7)
    a, _, c = sorted(h3.cell_to_children(parent, 8))[:3]
    far = h3.latlng_to_cell(40.85, -73.80, 8)
    pairs = [(a, f"a{v}") for v in range(10)] + [(c, f"c{v}") for v in range(3)]
    pairs += [(far, f"s{v}") for v in range(5)] + [(far, f"d{v}") for v in range(20)]
    pairs = [p for p in pairs for _ in range(2)] + [(a, f"s{v}") for v in range(5)]
    values = [float(20 + i % 17) for i in range(len(pairs))]
    columns = WindowColumns.from_readings(
        [p[0] for p in pairs], [p[1] for p in pairs], [float(i) for i in range(len(pairs))],
        values, 64,
    )  # fmt: skip
    params = ReleaseParams(
        epsilon=1.0, upper=U, resolution=8, coarsest_resolution=7, target_mean_error=T,
        variance_share=0.0, vehicle_budget=14.0, vehicle_budget_burst=14.0 / 6,
        budget_period_seconds=24 * HOUR, max_span_hours=1, app_id="test", budget_planner="rules",
    )  # fmt: skip
    return params, columns


def test_a_choice_regrouped_without_reading_logs_releases_what_the_old_one_did(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    params, columns = _refusing_window()
    monkeypatch.setattr(window, "new_release_nonce", lambda: "fixed")  # equal record ids
    choices: list[bool] = []  # per choice: whether it regrouped the reading logs too
    real = adaptive.PairMoves.columns
    calls = {"logs": 0}

    def columns_of(self: PairMoves, prefix_limit: int) -> WindowColumns:
        calls["logs"] += 1
        return real(self, prefix_limit)

    monkeypatch.setattr(adaptive.PairMoves, "columns", columns_of)
    real_choice = budget_cells.adaptive_choice
    monkeypatch.setattr(
        budget_cells, "adaptive_choice", lambda *a: (choices.append(True), real_choice(*a))[1]
    )

    def release() -> Any:
        ledger = PrivacyAccountant(params).new_ledger()
        noise = LaplaceNoise(RandomSource.seeded_for_tests(5))
        return window.release_window(0, columns, params, noise, ledger=ledger)

    lazy = release()
    assert len(choices) == 2 and calls["logs"] == 1  # A refused; only the kept choice's logs
    monkeypatch.setattr(budget_cells, "LAZY_READINGS", False)
    eager = release()
    assert len(choices) == 4 and calls["logs"] == 3
    assert lazy.cells and lazy.cells == eager.cells and lazy.summary == eager.summary
    assert lazy.loss == eager.loss
