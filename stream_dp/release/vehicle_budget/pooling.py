"""Pool only where pooling keeps a cell within reach (docs/math.md §13.3).

Pooling a cell's hours adds vehicles when traffic passes through; when the same slow or
moored vehicles stay, it only adds their readings: the counts grow skewed and the pooled cell
needs *more* ε than either part, and may miss T where each part meets it. Before pooling, the
carry and the window's own pairs are each regrouped alone (§12), and both pooled. A unit that
meets T alone (at the regrouping ε) but whose cells the pooled regrouping withholds (pooled,
they miss T even merged up to the coarsest resolution) is *lost to the pool*:

1. **Carry first.** A unit of the carry is released now from the carry alone: the window's
   pairs under it are set aside (carried on, a span of their own), and the unit is *due*: not
   held (:func:`due_cells`), since more windows would only push it further from T.
2. **Then the window.** A unit of the window (not under a due one) is formed from the
   window's own pairs: the carried pairs under it are withheld (they would push the same
   cell past T again at every later window, until they age out).

Every other pair pools as before. A set-aside pair is in no record yet (it is carried on and
aged like any carried pair), a withheld one never will be: no reading is released twice.
Public: the choice reads the occupancy (cells, vehicles, counts) of the window and of the
carry and the configuration, never a reading's value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import h3
import numpy as np

from stream_dp.release.adaptive import adaptive_choice
from stream_dp.release.vehicle_budget.spans import pooled, take_pairs
from stream_dp.windows.columns import WindowColumns

if TYPE_CHECKING:
    from stream_dp.release.params import ReleaseParams


@dataclass(frozen=True)
class SpanChoice:
    """What a window pools: the ``window``'s pairs and the ``carry``'s to pool now, the
    window's pairs set ``aside`` (carried on), the ``due`` units (H3 cells) released unheld,
    and how many carried readings are ``withheld``."""

    window: WindowColumns
    carry: WindowColumns | None
    aside: WindowColumns | None = None
    due: tuple[str, ...] = ()
    withheld: int = 0


def choose_pooling(
    columns: WindowColumns, carry: WindowColumns | None, params: ReleaseParams, mean_epsilon: float
) -> SpanChoice:
    """The window's :class:`SpanChoice` (module docstring); ``mean_epsilon``: the ε the
    adaptive cells are chosen at (§12)."""
    if carry is None or not len(carry) or not len(columns) or params.target_mean_error is None:
        return SpanChoice(columns, carry)
    everything = pooled(columns, carry, params.prefix_limit)
    chosen = adaptive_choice(everything, params, mean_epsilon)
    if np.all(chosen.unit_of_cell >= 0):
        return SpanChoice(columns, carry)  # the pool withholds nothing: nothing is lost to it
    kept = {everything.cell_names[i] for i in np.flatnonzero(chosen.unit_of_cell >= 0).tolist()}
    due = _lost_in_pool(_units(carry, params, mean_epsilon), carry, kept, params.coarsest)
    window_aside = _under(columns, due, params.coarsest)
    mine = [u for u in _units(columns, params, mean_epsilon) if not _overlaps(u, due)]
    alone = _lost_in_pool(mine, columns, kept, params.coarsest)
    carry_aside = _under(carry, alone, params.coarsest)
    if not window_aside.any() and not carry_aside.any():
        return SpanChoice(columns, carry)
    window = _take(columns, ~window_aside)
    if window is None:
        window = take_pairs(columns, np.zeros(0, np.int64))
    withheld = int(carry.count[carry_aside].sum())
    aside = _take(columns, window_aside)
    return SpanChoice(window, _take(carry, ~carry_aside), aside, tuple(sorted(due)), withheld)


def with_aside(
    deferred: WindowColumns | None, aside: WindowColumns | None, prefix_limit: int
) -> WindowColumns | None:
    """The carry handed on: this release's deferred pairs and the set-aside ones, a (cell,
    vehicle) in both merged."""
    if aside is None or not len(aside):
        return deferred
    return aside if deferred is None else pooled(deferred, aside, prefix_limit)


def due_cells(cells: tuple[str, ...] | list[str], due: tuple[str, ...]) -> np.ndarray:
    """Per cell of ``cells`` (H3), whether it overlaps a due unit (it is then not held)."""
    return np.array([_overlaps(cell, set(due)) for cell in cells], dtype=bool)


def _units(columns: WindowColumns, params: ReleaseParams, mean_epsilon: float) -> list[str]:
    """The units the regrouping (§12) chooses for ``columns`` alone: each meets T."""
    return list(adaptive_choice(columns, params, mean_epsilon).names)


def _lost_in_pool(units: list[str], part: WindowColumns, kept: set[str], coarsest: int) -> set[str]:
    """The ``units`` none of whose cells of ``part`` the pooled regrouping ``kept``."""
    if not units:
        return set()
    unit = _unit_of(part.cell_names, units, coarsest)
    found = {int(u) for cell, u in zip(part.cell_names, unit.tolist(), strict=True) if u >= 0
             and cell in kept}  # fmt: skip
    return {name for u, name in enumerate(units) if u not in found}


def _under(columns: WindowColumns, units: set[str], coarsest: int) -> np.ndarray:
    """Per pair of ``columns``, whether its cell lies under one of ``units``."""
    if not units:
        return np.zeros(len(columns), dtype=bool)
    return (_unit_of(columns.cell_names, sorted(units), coarsest) >= 0)[columns.cell_code]


def _unit_of(cells: tuple[str, ...], units: list[str], coarsest: int) -> np.ndarray:
    """Per (finest) cell, the index of the finest of ``units`` holding it, -1 for none."""
    index = {name: u for u, name in enumerate(units)}
    levels = sorted({h3.get_resolution(u) for u in units}, reverse=True)
    out = np.full(len(cells), -1, dtype=np.int64)
    for i, cell in enumerate(cells):
        finest = h3.get_resolution(cell)
        for level in levels:
            if coarsest <= level <= finest:
                u = index.get(h3.cell_to_parent(cell, level))
                if u is not None:
                    out[i] = u
                    break
    return out


def _overlaps(cell: str, units: set[str]) -> bool:
    """Whether H3 ``cell`` contains, or lies under, one of ``units``."""
    if not units:
        return False
    res = h3.get_resolution(cell)
    for unit in units:
        level = h3.get_resolution(unit)
        if (level >= res and h3.cell_to_parent(unit, res) == cell) or (
            level < res and h3.cell_to_parent(cell, level) == unit
        ):
            return True
    return False


def _take(columns: WindowColumns, keep: np.ndarray) -> WindowColumns | None:
    pairs = np.flatnonzero(keep)
    if len(pairs) == len(columns):
        return columns
    return take_pairs(columns, pairs) if len(pairs) else None
