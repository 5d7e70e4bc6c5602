"""A window's merged state, column-wise: the partitions' partials merged into one set of
(cell, vehicle) pairs with their counts, sums and reading logs."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import chain

import numpy as np

from stream_dp.dp.occupancy import factorize
from stream_dp.windows.name_order import NameSort, merged_order
from stream_dp.windows.state import PartialColumns, rank_in_runs


@dataclass(frozen=True)
class WindowColumns:
    """A window's merged state column-wise: one entry per (cell, vehicle) pair.

    Names are sorted (the CLIP-USER tie-break order); ``reading_*`` is the reading log of the
    partials (each pair's first stored readings, any order; see :class:`PartialColumns`).
    Built from the partitions' partials (:meth:`from_partials`) with array operations only,
    so releasing a large window touches no per-pair Python object.
    """

    cell_names: tuple[str, ...]
    cell_code: np.ndarray
    vehicle_names: tuple[str, ...]
    vehicle_code: np.ndarray
    count: np.ndarray
    total: np.ndarray
    total_sq: np.ndarray
    reading_pair: np.ndarray
    reading_ts: np.ndarray
    reading_value: np.ndarray

    def __len__(self) -> int:
        return int(self.count.shape[0])

    @classmethod
    def from_partials(
        cls, partials: list[PartialColumns], prefix_limit: int | None = None
    ) -> WindowColumns:
        """Merge partition partials. Readings are keyed by vehicle, so a vehicle normally
        appears in one partial only; when it does not (a producer keyed inconsistently), its
        pairs are merged exactly (counts and sums added, reading logs joined and, with
        ``prefix_limit``, cut back to each pair's first ``C`` by ``(ts, value)``)."""
        parts = [p for p in partials if len(p)]
        if not parts:
            empty = np.zeros(0, dtype=np.int64)
            floats = empty.astype(np.float64)
            return cls((), empty, (), empty, empty, floats, floats, empty, floats, floats)
        cells = [p.cell_names for p in parts]
        cell_names, cell_code = _merge_codes(cells, [p.pair_cell for p in parts])
        vehicles = [p.vehicle_names for p in parts]
        vehicle_names, vehicle_code = _merge_codes(
            vehicles, [p.pair_vehicle for p in parts], [p.start_vehicle_name_sort() for p in parts]
        )
        offsets = np.cumsum([0] + [len(p) for p in parts[:-1]]).tolist()
        reading_pair = np.concatenate(
            [p.reading_pair + o for p, o in zip(parts, offsets, strict=True)]
        )
        columns = cls(
            cell_names,
            cell_code,
            vehicle_names,
            vehicle_code,
            np.concatenate([p.count for p in parts]),
            np.concatenate([p.total for p in parts]),
            np.concatenate([p.total_sq for p in parts]),
            reading_pair,
            np.concatenate([p.reading_ts for p in parts]),
            np.concatenate([p.reading_value for p in parts]),
        )
        if len(vehicle_names) == sum(map(len, vehicles)):
            return columns  # no vehicle in two partials: pairs are unique
        return columns._merge_repeated_pairs(prefix_limit)

    def _merge_repeated_pairs(self, prefix_limit: int | None) -> WindowColumns:
        return self._merged_with_inverse(prefix_limit)[0]

    def _merged_with_inverse(self, prefix_limit: int | None) -> tuple[WindowColumns, np.ndarray]:
        """The pairs of one (cell, vehicle) merged, and each old pair's merged pair."""
        n_vehicles = max(len(self.vehicle_names), 1)
        key = self.cell_code * n_vehicles + self.vehicle_code
        unique_key, inverse = np.unique(key, return_inverse=True)
        n = len(unique_key)
        reading_pair = inverse[self.reading_pair]
        ts, value = self.reading_ts, self.reading_value
        if prefix_limit is not None and len(reading_pair):
            order = np.lexsort((value, ts, reading_pair))
            keep = np.sort(order[rank_in_runs(reading_pair[order]) < prefix_limit])
            reading_pair, ts, value = reading_pair[keep], ts[keep], value[keep]
        merged = WindowColumns(
            self.cell_names,
            unique_key // n_vehicles,
            self.vehicle_names,
            unique_key % n_vehicles,
            np.bincount(inverse, weights=self.count, minlength=n).astype(np.int64),
            np.bincount(inverse, weights=self.total, minlength=n),
            np.bincount(inverse, weights=self.total_sq, minlength=n),
            reading_pair,
            ts,
            value,
        )
        return merged, inverse

    @classmethod
    def from_readings(
        cls, cells: list[str], vehicles: list[str], ts: list[float], values: list[float],
        prefix_limit: int,
    ) -> WindowColumns:  # fmt: skip
        """A window holding exactly these readings (tests, benchmarks, audits)."""
        partial = PartialColumns.from_readings(cells, vehicles, ts, values, prefix_limit)
        return cls.from_partials([partial], prefix_limit)

    def prefixes(self, pairs: np.ndarray) -> tuple[np.ndarray, ...]:
        """Each pair's stored readings in event-time order (ties by value)."""
        values, bounds = self._sorted_log
        return tuple(values[bounds[i] : bounds[i + 1]] for i in pairs.tolist())

    @cached_property
    def _sorted_log(self) -> tuple[np.ndarray, np.ndarray]:
        order = np.lexsort((self.reading_value, self.reading_ts, self.reading_pair))
        bounds = np.searchsorted(self.reading_pair[order], np.arange(len(self) + 1))
        return self.reading_value[order], bounds

    def pair_index(self) -> dict[tuple[str, str], int]:
        """``(cell, vehicle) -> entry`` (tests and audits; not used on the release path)."""
        cells, vehicles = self.cell_names, self.vehicle_names
        return {
            (cells[c], vehicles[v]): i
            for i, (c, v) in enumerate(
                zip(self.cell_code.tolist(), self.vehicle_code.tolist(), strict=True)
            )
        }


def _merge_codes(
    names: list[list[str]] | list[np.ndarray],
    codes: list[np.ndarray],
    sorts: list[NameSort] | None = None,
) -> tuple[tuple[str, ...], np.ndarray]:
    """Sorted distinct names over all partials and every partial's codes mapped into them.

    Few names (cells) go through a dict; many (vehicles) are sorted as numpy unicode arrays
    (code-point order, as ``sorted``), from each partial's :class:`NameSort` if given (sorted
    in the background as the partials arrived); names repeated across partials take the
    dict path too."""
    n_names = sum(map(len, names))
    # Performance (benchmarks/release.py): many names are merged from the partials' sorts, started
    # in the background as each partial arrived (wire 25 → 11 ms).
    if n_names <= _FEW_NAMES:
        merged, global_code = factorize(_flat_names(names))
    else:
        ordered, order = merged_order(sorts or [NameSort.start(n) for n in names])
        if bool(np.any(ordered[1:] == ordered[:-1])):
            merged, global_code = factorize(_flat_names(names))
        else:
            merged = tuple(ordered.tolist())
            global_code = np.empty(n_names, dtype=np.int64)
            global_code[order] = np.arange(n_names)
    offsets = np.cumsum([0] + [len(n) for n in names[:-1]]).tolist()
    return merged, np.concatenate([global_code[o + c] for o, c in zip(offsets, codes, strict=True)])


def _flat_names(names: list[list[str]] | list[np.ndarray]) -> list[str]:
    """All the lists' names in order, as ``str`` (unicode arrays converted)."""
    return list(chain.from_iterable(n.tolist() if isinstance(n, np.ndarray) else n for n in names))


#: Up to this many names (all partials together) are merged through a dict.
_FEW_NAMES = 16_384
