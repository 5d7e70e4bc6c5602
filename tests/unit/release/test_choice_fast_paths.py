"""The budget regrouping's later fast paths (issue 25: the 1M-reading window's release) against
the paths they replace: the pairs ordered by cell with their columns in one pass
(:func:`~stream_dp.dp.ordering.grouped`), the finest level's parents and readings kept for
the window's next choice, the moved reading logs not counted when no pair can be cut, and the
cells' span starts of a log within the window. Each must give exactly what the old path
gave, on data where the fast path acts."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import h3
import numpy as np
import pytest

from stream_dp.dp import adaptive_cells as ac
from stream_dp.dp import kernels
from stream_dp.dp.adaptive_cells import AdaptiveCells, BudgetChoice, UnitPrice, choose_cells
from stream_dp.dp.ordering import grouped, stable_order
from stream_dp.release import adaptive
from stream_dp.release.adaptive import PairMoves
from stream_dp.release.params import ReleaseParams
from stream_dp.release.state import WindowCache
from stream_dp.release.vehicle_budget import cells, spans
from stream_dp.windows.columns import WindowColumns
from tests.unit.dp.test_adaptive_reuse import T, U, _fields, _occupancy, _old_choose_remainder
from tests.unit.release.test_regroup_moves import CENTRE, HOUR, _bytes, _old_regroup


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("seed", range(5))
def test_grouped_is_the_stable_order_and_its_gathers(
    seed: int, compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kernels, "use_compiled", lambda n: compiled)
    rng = np.random.default_rng(seed)
    n, n_keys = int(rng.integers(0, 5000)), int(rng.integers(1, 50))
    keys = rng.integers(0, n_keys, n)  # many ties: the order among them is the input's
    first, second = rng.integers(0, 10**6, n), rng.integers(-50, 50, n).astype(np.int32)
    got_keys, got_first, got_second = grouped(keys, n_keys, first, second)
    want = stable_order(keys, n_keys)
    assert np.array_equal(want, np.argsort(keys, kind="stable"))
    for got, source in ((got_keys, keys), (got_first, first), (got_second, second)):
        assert got.dtype == source.dtype and got.tobytes() == source[want].tobytes()


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("waiting", ["none", "some"])
def test_the_finest_levels_frame_kept_for_the_next_choice_gives_its_cells(
    seed: int, waiting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Three choices of one window, each refusing more cells: the later ones take the finest
    # level's parents and readings from the memo and choose what a fresh computation (and
    # the level-by-level oracle) chooses.
    names, cell, vehicle, count, room = _occupancy(seed)
    rng = np.random.default_rng(seed)
    shuffle = rng.permutation(len(cell))
    cell, vehicle, count = cell[shuffle], vehicle[shuffle], count[shuffle]
    wait = None if waiting == "none" else rng.random(len(names)) < 0.3
    price = UnitPrice(room, 1.0, 7.0 / 3.0)
    kwargs: dict[str, Any] = dict(upper=U, mean_epsilon=1.0, target=T, finest=8, coarsest=5,
                                  prefix_limit=64, detail_slack=0.3)  # fmt: skip
    rule = ac._Rule(int(vehicle.max()) + 1, U, 1.0, 64, T, 1, price)
    memo: dict[str, Any] = {}
    frames: list[Any] = []
    refused: set[str] = set()
    changed = 0
    for _ in range(3):
        budget = BudgetChoice(price, frozenset(refused), wait, memo)
        got = choose_cells(names, cell, vehicle, count, budget=budget, **kwargs)
        frames.append(memo["frame"][3])
        with monkeypatch.context() as m:
            m.setattr(ac, "USE_FRAME_MEMO", False)
            alone = BudgetChoice(price, frozenset(refused), wait)  # a memo of its own
            fresh = choose_cells(names, cell, vehicle, count, budget=alone, **kwargs)
        old = _old_choose_remainder(names, (cell, vehicle, count), rule, (8, 5, 0.3), budget)
        assert _fields(got) == _fields(fresh) == _fields(old)
        finer = [n for n, r in zip(got.names, got.resolution.tolist(), strict=True) if r > 5]
        changed += bool(finer)
        refused.update(finer[::2])
    assert changed >= 2  # the refusals changed the later choices
    assert frames[1] is frames[0] and frames[2] is frames[0]  # computed once, then reused


@pytest.mark.parametrize("bound", [True, False])
@pytest.mark.parametrize("cut", [True, False])
@pytest.mark.parametrize("seed", range(3))
def test_moves_skip_counting_the_log_only_when_no_pair_counts_past_the_limit(
    seed: int, cut: bool, bound: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(adaptive, "COUNT_BOUND", bound)
    rng = np.random.default_rng(seed)
    cells = sorted(h3.grid_disk(CENTRE, 1))  # 7 cells: 0-2 alone, 3-6 merged into one unit
    n = 600
    columns = WindowColumns.from_readings(
        [cells[i] for i in rng.integers(0, len(cells), n)],
        [f"v{i:02d}" for i in rng.integers(0, 12, n)],
        rng.integers(0, HOUR, n).astype(float).tolist(), rng.choice([1.0, 9.5, 40.0], n).tolist(),
        64,
    )  # fmt: skip
    unit_of_cell = np.array([0, 1, 2, 3, 3, 3, 3], dtype=np.int64)
    names = ("a", "b", "c", "d")
    unit = unit_of_cell[columns.cell_code]
    merged_unit = np.array([False, False, False, True])
    moves = PairMoves.of(columns, names, unit, merged_unit)
    limit = int(moves.count.max()) - 1 if cut else int(moves.count.max())
    want = _old_regroup(columns, names, unit, limit, merged_unit)
    cut_logs = len(want.reading_pair) < len(columns.reading_pair)
    assert cut_logs == cut  # the limit cut the merged pairs' logs, or left them whole
    assert _bytes(moves.columns(limit)) == _bytes(want)


@pytest.mark.parametrize("case", ["in window", "one earlier", "nan", "inf", "off boundary"])
@pytest.mark.parametrize("seed", range(3))
def test_span_starts_of_a_log_within_the_window_are_the_one_pass_ones(
    seed: int, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The whole log in the current window: every cell starts now, known without the pass
    # over the log; anything else (an earlier reading, a time that is not finite, a window
    # start off the hour grid) takes the pass, as before.
    rng = np.random.default_rng(seed)
    start = 7200 if case != "off boundary" else 7000
    n = 800
    columns = WindowColumns.from_readings(
        [f"c{g:02d}" for g in rng.integers(0, 12, n)], [f"v{v}" for v in rng.integers(0, 60, n)],
        (start + rng.uniform(0, 3600, n)).tolist(), rng.uniform(0, 65, n).tolist(), 8,
    )  # fmt: skip
    ts = columns.reading_ts.copy()
    ts[int(rng.integers(0, len(ts)))] = {"one earlier": 3700.0, "nan": np.nan,
                                         "inf": np.inf}.get(case, ts[0])  # fmt: skip
    columns = replace(columns, reading_ts=ts)
    entry_of = np.sort(rng.choice(len(columns), len(columns) * 2 // 3, replace=False))
    cell_index = columns.cell_code[entry_of].astype(np.int64)
    args = (columns, entry_of, cell_index, 12, start, 3600)
    assert spans._log_in_window(ts, start, 3600) == (case == "in window")
    fast = spans._cell_span_starts(*args)
    monkeypatch.setattr(spans, "LOG_IN_WINDOW", False)
    want = spans._cell_span_starts(*args)
    if want is None:  # a chosen pair's time is not finite: the per-pair way, as before
        assert fast is None and case in ("nan", "inf")
    else:
        assert fast is not None and fast.dtype == want.dtype == np.int64
        assert fast.tolist() == want.tolist()


@pytest.mark.parametrize(
    "case", ["in window", "one earlier", "nan", "two-hour spans", "one-hour spans"]
)
@pytest.mark.parametrize("seed", range(3))
def test_the_regroupings_span_starts_and_young_pairs_of_a_log_within_the_window(
    seed: int, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The whole log in the current window: the observed cells' span starts are the window's
    # and every open pair is young (spans of 2 hours or more), known without a pair's first
    # window; anything else reads the pairs' first windows, as before. One-hour spans: no
    # pair may wait, so none is young however new the log is.
    rng = np.random.default_rng(seed)
    n, start = 900, 7200
    columns = WindowColumns.from_readings(
        [f"c{g:02d}" for g in rng.integers(0, 12, n)], [f"v{v}" for v in rng.integers(0, 60, n)],
        (start + rng.uniform(0, 3600, n)).tolist(), rng.uniform(0, 65, n).tolist(), 8,
    )  # fmt: skip
    ts = columns.reading_ts.copy()
    ts[int(rng.integers(0, len(ts)))] = {"one earlier": 3700.0, "nan": np.nan}.get(case, ts[0])
    columns = replace(columns, reading_ts=ts)
    params = ReleaseParams(
        upper=U, target_mean_error=T, vehicle_budget=6.0,
        max_span_hours={"two-hour spans": 2, "one-hour spans": 1}.get(case, 4),
    )  # fmt: skip
    n_cells = len(columns.cell_names)
    unit_of_cell = np.where(rng.random(n_cells) < 0.2, -1, np.arange(n_cells) // 2)
    units = int(unit_of_cell.max()) + 1
    names = tuple(f"u{u:02d}" for u in range(units))
    flags, errors = np.zeros(units, dtype=bool), np.zeros(units)
    adaptive = AdaptiveCells(names, np.full(units, 8), flags, errors, unit_of_cell)
    released = [name for name in adaptive.names if rng.random() < 0.4]

    def both() -> tuple[Any, Any]:
        starts = cells.observed_span_starts(columns, params, WindowCache(), start, False)
        assert (starts is None) == (case == "one-hour spans")  # no span to start
        young = spans.deferred_pairs(columns, adaptive, released, start, params, WindowCache())
        return None if starts is None else starts.tolist(), young.tolist()

    whole = spans.first_window
    read: list[int] = []
    monkeypatch.setattr(spans, "first_window", lambda *a: read.append(1) or whole(*a))
    fast = both()
    assert bool(read) == (case in ("one earlier", "nan", "one-hour spans"))  # else none read
    monkeypatch.setattr(spans, "LOG_IN_WINDOW", False)
    assert fast == both()
    if case == "one-hour spans":
        assert fast[1] == []
    else:
        assert len(fast[1]) > 0 and (bool(read) or set(fast[0]) == {start})
