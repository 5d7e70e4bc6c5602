"""The budget release's one-pass paths (issue 25: the 1M-reading window) against the paths they
replace: the occupancy's entries grouped by cell with their vehicles and counts in one
compiled scatter (:func:`~stream_dp.release.selection.occupancy_of`), the cut entries' kept
sums read off the reading log (:func:`~stream_dp.release.statistics.kept_sums`), and the
merged pairs of a regrouping split off and grouped in compiled calls (:class:`PairMoves`). Each
must give exactly what the old path gave, on data where the paths differ in work done."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from stream_dp.dp import kernels
from stream_dp.release import statistics
from stream_dp.release.adaptive import PairMoves
from stream_dp.release.selection import occupancy_of
from stream_dp.release.statistics import kept_sums
from stream_dp.windows.columns import WindowColumns


def numpy_only(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """The registry's kernel ``name`` runs its numpy form at every size (the others: as set)."""
    kernel = getattr(kernels, name)
    monkeypatch.setattr(kernels, name, replace(kernel, compiled_form=kernel.numpy_form))


def _window(seed: int, limit: int = 64) -> WindowColumns:
    """Readings of 40 vehicles in 15 cells in random arrival order, with repeated times and
    values (the sort's ties matter) and fractional values (sums depend on their order)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(200, 900))
    return WindowColumns.from_readings(
        [f"c{g:02d}" for g in rng.integers(0, 15, n)],
        [f"v{v:02d}" for v in rng.integers(0, 40, n)],
        rng.integers(0, 6, n).astype(float).tolist(),
        (rng.integers(0, 50, n) / 7.0).tolist(),
        limit,
    )  # fmt: skip


def _occupancy_bytes(got: tuple) -> list[bytes | tuple]:
    occupancy, entry_of = got
    arrays = (occupancy.cell_index, occupancy.vehicle_index, occupancy.count, entry_of)
    return [occupancy.cells, occupancy.vehicles] + [(a.dtype.str, a.tobytes()) for a in arrays]


@pytest.mark.parametrize("case", ["all cells", "some cells", "usable pairs"])
@pytest.mark.parametrize("seed", range(6))
def test_an_occupancy_grouped_in_one_pass_is_the_one_of_the_order_and_its_gathers(
    seed: int, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kernels, "use_compiled", lambda n: True)
    columns = _window(seed)
    rng = np.random.default_rng(seed + 100)
    n_cells = len(columns.cell_names)
    chosen = np.arange(n_cells)
    usable = None
    if case == "some cells":
        chosen = np.sort(rng.choice(n_cells, n_cells // 2, replace=False))
    elif case == "usable pairs":
        usable = rng.random(len(columns)) < 0.6
    fast = occupancy_of(columns, chosen, usable)
    numpy_only(monkeypatch, "ORDER_AND_GATHER")
    old = occupancy_of(columns, chosen, usable)
    # The pairs arrive unordered: grouping them by cell moved them (the paths differ).
    assert not np.array_equal(fast[1], np.arange(len(fast[1])))
    assert _occupancy_bytes(fast) == _occupancy_bytes(old)


def _kept(columns: WindowColumns, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Some pairs (in random order) with what a cap keeps of each: all, none or part."""
    rng = np.random.default_rng(seed + 200)
    entries = rng.permutation(len(columns))[: len(columns) * 3 // 4].astype(np.int64)
    count = columns.count[entries].astype(np.int64)
    kept = np.where(rng.random(len(entries)) < 0.5, count, rng.integers(0, count + 1))
    return entries, kept.astype(np.int64)


@pytest.mark.parametrize("seed", range(8))
def test_kept_sums_read_off_the_log_are_the_running_sums_ones(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    columns = _window(seed)
    entries, kept = _kept(columns, seed)
    count = columns.count[entries]
    assert np.any((kept > 0) & (kept < count))  # some entries are cut
    fast = kept_sums(columns, entries, kept)
    monkeypatch.setattr(statistics, "CUTS_FROM_LOG", False)
    old = kept_sums(columns, entries, kept)
    assert fast[0].tobytes() == old[0].tobytes() and fast[1].tobytes() == old[1].tobytes()


@pytest.mark.parametrize("from_log", [True, False])
def test_kept_sums_read_off_the_log_refuse_a_cap_beyond_the_stored_prefix(
    from_log: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(statistics, "CUTS_FROM_LOG", from_log)
    columns = _window(3, limit=2)  # pairs store 2 readings of more
    entries, kept = _kept(columns, 3)
    count = columns.count[entries]
    fits = np.where((kept > 2) & (kept < count), 2, kept)
    kept_sums(columns, entries, fits)  # every cut within the stored prefix: summed
    assert np.any((kept > 2) & (kept < count))
    with pytest.raises(ValueError, match="beyond the stored prefix"):
        kept_sums(columns, entries, kept)


def _moves_fields(moves: PairMoves) -> list[tuple[str, bytes]]:
    arrays = (moves.single, moves.merged, moves.group, moves.cell_code, moves.vehicle_code,
              moves.count)  # fmt: skip
    return [(a.dtype.str, a.tobytes()) for a in arrays] + [("dropped", bytes([moves.dropped]))]


@pytest.mark.parametrize("seed", range(6))
def test_merged_pairs_grouped_in_one_call_are_the_pair_groups_ones(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Cells into 6 units (-1: withheld), some of several cells: their pairs of one vehicle
    # merge, in (unit, vehicle) order.
    monkeypatch.setattr(kernels, "use_compiled", lambda n: True)
    columns = _window(seed)
    rng = np.random.default_rng(seed + 300)
    unit_of_cell = rng.integers(-1, 6, len(columns.cell_names))
    unit = unit_of_cell[columns.cell_code]
    merged_unit = np.bincount(unit_of_cell[unit_of_cell >= 0], minlength=6) > 1
    names = tuple(f"u{u}" for u in range(6))
    fast = PairMoves.of(columns, names, unit, merged_unit)
    assert len(fast.merged) > len(np.unique(fast.group)) > 0  # some pairs merged
    numpy_only(monkeypatch, "MERGED_GROUPS")
    old = PairMoves.of(columns, names, unit, merged_unit)
    assert _moves_fields(fast) == _moves_fields(old)


@pytest.mark.parametrize("seed", range(6))
def test_pairs_split_without_branching_are_the_numpy_split(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Lone, merged and withheld pairs mixed at random: the compiled split (each kept pair
    # written as both kinds) moves the pairs as numpy's masks do.
    columns = _window(seed)
    rng = np.random.default_rng(seed + 400)
    unit_of_cell = rng.integers(-1, 9, len(columns.cell_names))
    unit_of_cell[:2] = [-1, 9]  # one cell withheld, one alone in its unit
    unit = unit_of_cell[columns.cell_code]
    merged_unit = np.bincount(unit_of_cell[unit_of_cell >= 0], minlength=10) > 1
    assert merged_unit.any() and not merged_unit.all() and (unit < 0).any()
    names = tuple(f"u{u}" for u in range(10))
    monkeypatch.setattr(kernels, "use_compiled", lambda n: True)
    fast = PairMoves.of(columns, names, unit, merged_unit)
    monkeypatch.setattr(kernels, "use_compiled", lambda n: False)
    old = PairMoves.of(columns, names, unit, merged_unit)
    assert _moves_fields(fast) == _moves_fields(old)
