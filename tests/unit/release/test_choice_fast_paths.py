"""The budget regrouping's later fast paths (issue 25: the 1M-reading window's release) against
the paths they replace: the pairs ordered by cell with their columns in one pass
(:func:`~stream_dp.dp.ordering.grouped`), the occupancy built on it, and the finest level's
parents and readings kept for the window's next choice. Each must give exactly what the old
path gave, on data where the choices refuse cells."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from stream_dp.dp import adaptive_cells as ac
from stream_dp.dp import kernel_choice
from stream_dp.dp.adaptive_cells import BudgetChoice, UnitPrice, choose_cells
from stream_dp.dp.occupancy import Occupancy
from stream_dp.dp.ordering import grouped, stable_order
from stream_dp.release.selection import occupancy_of
from stream_dp.windows.columns import WindowColumns
from tests.unit.dp.test_adaptive_reuse import T, U, _fields, _occupancy, _old_choose_remainder


@pytest.mark.parametrize("kernels", [True, False])
@pytest.mark.parametrize("seed", range(5))
def test_grouped_is_the_stable_order_and_its_gathers(
    seed: int, kernels: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kernel_choice, "use_kernels", lambda n: kernels)
    rng = np.random.default_rng(seed)
    n, n_keys = int(rng.integers(0, 5000)), int(rng.integers(1, 50))
    keys = rng.integers(0, n_keys, n)  # many ties: the order among them is the input's
    first, second = rng.integers(0, 10**6, n), rng.integers(-50, 50, n).astype(np.int32)
    order, got_keys, got_first, got_second = grouped(keys, n_keys, first, second)
    want = np.argsort(keys, kind="stable")
    assert np.array_equal(order, stable_order(keys, n_keys)) and np.array_equal(order, want)
    for got, source in ((got_keys, keys), (got_first, first), (got_second, second)):
        assert got.dtype == source.dtype and got.tobytes() == source[want].tobytes()


def _old_occupancy_of(
    columns: WindowColumns, chosen: np.ndarray, usable: np.ndarray | None
) -> tuple[Occupancy, np.ndarray]:
    """The occupancy as it was built before :func:`grouped` (70052d3): the order by cell,
    then the vehicles and counts taken in it."""
    names = columns.vehicle_names
    if usable is None and len(chosen) == len(columns.cell_names):  # every pair, every vehicle
        entries = np.arange(len(columns))
        cell_index, vehicle_index, vehicles = columns.cell_code, columns.vehicle_code, names
    else:
        in_chosen = np.zeros(len(columns.cell_names), dtype=bool)
        in_chosen[chosen] = True
        mask = in_chosen[columns.cell_code] & (True if usable is None else usable)
        entries = np.flatnonzero(mask)
        cell_index = (np.cumsum(in_chosen) - 1)[columns.cell_code[entries]]
        vehicle_code = columns.vehicle_code[entries]
        used = np.zeros(len(names), dtype=bool)
        used[vehicle_code] = True
        vehicles = tuple(names[v] for v in np.flatnonzero(used).tolist())
        vehicle_index = (np.cumsum(used) - 1)[vehicle_code]
    order = np.argsort(cell_index, kind="stable")
    entry_of = entries[order]
    occupancy = Occupancy(
        cells=tuple(columns.cell_names[c] for c in chosen.tolist()),
        vehicles=vehicles,
        cell_index=cell_index[order].astype(np.int64),
        vehicle_index=vehicle_index[order].astype(np.int64),
        count=columns.count[entry_of],
    )
    return occupancy, entry_of


def _columns(rng: np.random.Generator) -> WindowColumns:
    """Random pairs (no order), each cell with a few vehicles, no reading log."""
    n_cells, n_vehicles = 30, 200
    keys = sorted({(int(c), int(v)) for c, v in rng.integers(0, [n_cells, n_vehicles], (900, 2))})
    keys = [keys[i] for i in rng.permutation(len(keys))]
    n = len(keys)
    none = np.zeros(0)
    return WindowColumns(
        tuple(f"c{c:02d}" for c in range(n_cells)), np.array([c for c, _ in keys]),
        tuple(f"v{v:03d}" for v in range(n_vehicles)), np.array([v for _, v in keys]),
        rng.integers(1, 40, n), np.zeros(n), np.zeros(n), np.zeros(0, dtype=np.int64), none, none,
    )  # fmt: skip


@pytest.mark.parametrize("kernels", [True, False])
@pytest.mark.parametrize("part", ["all", "some cells", "usable"])
@pytest.mark.parametrize("seed", range(4))
def test_the_occupancy_is_the_old_one_to_the_bit(
    seed: int, part: str, kernels: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kernel_choice, "use_kernels", lambda n: kernels)
    rng = np.random.default_rng(seed)
    columns = _columns(rng)
    n_cells = len(columns.cell_names)
    chosen = (
        np.arange(n_cells) if part != "some cells" else np.flatnonzero(rng.random(n_cells) < 0.5)
    )
    usable = rng.random(len(columns)) < 0.7 if part == "usable" else None
    got, got_entries = occupancy_of(columns, chosen, usable)
    want, want_entries = _old_occupancy_of(columns, chosen, usable)
    assert got.cells == want.cells and got.vehicles == want.vehicles
    assert len(got.vehicles) < len(columns.vehicle_names) or part == "all"
    for a, b in ((got.cell_index, want.cell_index), (got.vehicle_index, want.vehicle_index),
                 (got.count, want.count), (got_entries, want_entries)):  # fmt: skip
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    assert not np.all(np.diff(got_entries) >= 0)  # the pairs were not grouped by cell already


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
