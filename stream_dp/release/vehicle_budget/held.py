"""Held apart from withheld (docs/output.md, "Held and withheld"; docs/math.md §13.3).

Under a vehicle budget with spans, a window's release leaves some of the readings it reads
unreleased. Those it carries on to pool with a later window are *held*; those it drops for
good are *withheld*. Each reading is counted once: ``readings_held`` counts the readings of
the window's own hour that are carried on (a reading carried again by later windows is not
counted again), ``readings_withheld`` the readings (of any hour) this release drops. Over a
run every reading is in one released record or withheld once; a held one ends in either.
Counts only: a function of the occupancy and the release's public choices.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stream_dp.dp.adaptive_cells import AdaptiveCells
from stream_dp.windows.columns import WindowColumns


@dataclass(frozen=True)
class ReleasedCells:
    """The regrouped cells a window's release chose (occupancy order), whether each is
    released, and each one's readings (its record's ``n_readings``)."""

    names: tuple[str, ...]
    released: np.ndarray
    n_readings: np.ndarray

    @property
    def released_readings(self) -> int:
        return int(self.n_readings[self.released].sum())

    @property
    def released_names(self) -> list[str]:
        """The names of the cells released, in occupancy order."""
        return [self.names[g] for g in np.flatnonzero(self.released).tolist()]


@dataclass(frozen=True)
class HeldCounts:
    """A window's unreleased cells and readings split into held and withheld (module
    docstring); ``readings_withheld`` is what the release drops of what it pooled."""

    cells_held: int
    readings_held: int
    cells_withheld: int
    readings_withheld: int


def held_counts(
    pooled: WindowColumns,
    aside: WindowColumns | None,
    carry_out: WindowColumns | None,
    adaptive: AdaptiveCells,
    cells: ReleasedCells | None,
    readings_held: int,
) -> HeldCounts:
    """The held and withheld counts of a release that read ``pooled`` (its own pairs and the
    carry) and set ``aside`` pairs of its own, regrouped by ``adaptive`` into ``cells``, and
    carries ``carry_out`` on, ``readings_held`` of them its own. A cell is held when some of
    its readings are carried on, withheld when none are; the withheld cells are those a
    release without spans withholds (missing T, dropped by the budget's plan), the held ones
    any unreleased cell."""
    entering = _readings(pooled) + _readings(aside)
    released = 0 if cells is None else cells.released_readings
    released_names = set() if cells is None else _names_where(cells.names, cells.released)
    unreleased = set() if cells is None else _names_where(cells.names, ~cells.released)
    unreleased.update(pooled.cell_names[i] for i in adaptive.withheld_cells.tolist())
    held = _held_cells(carry_out, pooled, adaptive) - released_names
    return HeldCounts(
        cells_held=len(held),
        readings_held=readings_held,
        cells_withheld=len(unreleased - held),
        readings_withheld=entering - released - _readings(carry_out),
    )


def _held_cells(
    carry: WindowColumns | None, pooled: WindowColumns, adaptive: AdaptiveCells
) -> set[str]:
    """The cells of the carried pairs: the regrouped cell of a pooled one (its observed cell
    where the regrouping withheld it), the observed cell of one set aside before pooling."""
    if carry is None or not len(carry):
        return set()
    index = {name: i for i, name in enumerate(pooled.cell_names)}
    out: set[str] = set()
    for c in np.flatnonzero(np.bincount(carry.cell_code, minlength=len(carry.cell_names))):
        name = carry.cell_names[c]
        i = index.get(name)
        unit = -1 if i is None else int(adaptive.unit_of_cell[i])
        out.add(adaptive.names[unit] if unit >= 0 else name)
    return out


def _names_where(names: tuple[str, ...], mask: np.ndarray) -> set[str]:
    return {names[g] for g in np.flatnonzero(mask).tolist()}


def _readings(columns: WindowColumns | None) -> int:
    return 0 if columns is None else int(columns.count.sum())
