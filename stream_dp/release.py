"""Release of one closed window: occupancy → CLIP-USER → pseudo-user cap → noisy records.

Everything published is computed from the (public) occupancy array and Laplace-noised
values (composition paper Sec. V-B2, docs/math.md §3.5 and §9): per cell the mean
and variance of the kept readings, with ``(1 - s) eps`` and ``s eps`` of the cell budget
(``s = variance_share``; 0: no variance), clamped after noise to ``[0, U]`` and
``[0, U^2/4]`` (post-processing), with their 95 % error bars (:mod:`stream_dp.dp.error_bars`).
With ``target_mean_error`` the released cells are chosen adaptively from the occupancy
(:mod:`stream_dp.dp.adaptive_cells`).
"""

from __future__ import annotations

import gc
import hashlib
import secrets
import uuid
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from itertools import chain
from typing import Any, NamedTuple

import numpy as np

from stream_dp import background
from stream_dp.config import Settings
from stream_dp.dp.adaptive_cells import AdaptiveCells, choose_cells, pair_groups
from stream_dp.dp.budget_ledger import BudgetLedger, WindowLoss, limit_to_budget
from stream_dp.dp.clip_user import ClipUserResult, clip_user
from stream_dp.dp.error_bars import (
    LN20,
    ErrorModel,
    mean_error,
    mechanism_mean_error,
    variance_error,
)
from stream_dp.dp.grid_error import variance_bias
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.occupancy import Occupancy, factorize
from stream_dp.dp.pseudo_user import PseudoUserResult, no_pseudo_user, pseudo_user_step
from stream_dp.name_order import NameSort, merged_order
from stream_dp.window_state import PartialColumns, rank_in_runs

#: Version 2 (issue 21): every window summary has ``status``, ``released`` or ``failed``.
SCHEMA_VERSION = 2
#: ``status`` of a window summary: its cells were released / its release computation failed.
RELEASED, FAILED = "released", "failed"
RELEASE_NAMESPACE = uuid.UUID("6f1e2a4c-5b0d-4e7a-9c3f-2d8b1a7e4c90")
_NAMESPACE_BYTES = RELEASE_NAMESPACE.bytes


def rfc3339(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def release_id(app_id: str, window_start: int, resolution: int, cell: str, nonce: str = "") -> str:
    """Id of one (window, cell) record of one release event.

    ``uuid5(RELEASE_NAMESPACE, "[nonce|]app|window|resolution|cell")`` (RFC 4122 name-based,
    SHA-1), formatted directly: ``uuid.uuid5`` costs several times more, 2,000 times per
    window. A release draws its ``nonce`` once (:func:`new_release_nonce`), so two releases
    of the same window (the service's and an offline run's, or two apps') never share an id;
    a re-publication of a stored release carries the stored records, ids included."""
    return release_ids(app_id, window_start, resolution, [cell], nonce)[0]


def new_release_nonce() -> str:
    """A fresh random identifier of one release event (128 bits from the OS CSPRNG)."""
    return secrets.token_hex(16)


def release_ids(
    app_id: str, window_start: int, resolution: int, cells: list[str], nonce: str = ""
) -> list[str]:
    """:func:`release_id` of each cell of one window (the common prefix hashed once)."""
    name = f"{nonce}|" if nonce else ""
    prefix = hashlib.sha1(
        _NAMESPACE_BYTES + f"{name}{app_id}|{window_start}|{resolution}|".encode()
    )
    out = []
    for cell in cells:
        sha = prefix.copy()
        sha.update(cell.encode())
        digest = bytearray(sha.digest()[:16])
        digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
        digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
        h = digest.hex()
        out.append(f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
    return out


@dataclass(frozen=True)
class WindowRelease:
    """The records of one window: one per released cell, then the window summary."""

    window_start: int
    cells: list[dict[str, Any]]
    summary: dict[str, Any]
    #: Cells each vehicle was counted in (for the budget ledger; never published).
    loss: WindowLoss | None = None
    #: A failed window's ``file:line in function`` of the error (for its log line; not stored).
    error_site: str | None = None

    @property
    def records(self) -> list[dict[str, Any]]:
        return [*self.cells, self.summary]

    @property
    def failed(self) -> bool:
        """The window's release computation failed: only its summary is published."""
        return self.summary.get("status") == FAILED

    def to_json_obj(self) -> dict[str, Any]:
        return {"window_start": self.window_start, "cells": self.cells, "summary": self.summary}

    @classmethod
    def from_json_obj(cls, obj: dict[str, Any]) -> WindowRelease:
        return cls(int(obj["window_start"]), list(obj["cells"]), dict(obj["summary"]))


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
            vehicles, [p.pair_vehicle for p in parts], [p.vehicle_name_sort for p in parts]
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
        return WindowColumns(
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


def select_cells(
    columns: WindowColumns,
    min_vehicles: int,
    top_cells: int | None,
    usable: np.ndarray | None = None,
) -> np.ndarray:
    """Cells (codes) chosen from public information only: vehicle and reading counts (of the
    ``usable`` pairs only, when given)."""
    n_cells = len(columns.cell_names)
    cell_code, count = columns.cell_code, columns.count
    if usable is not None:
        cell_code, count = cell_code[usable], count[usable]
    vehicles = np.bincount(cell_code, minlength=n_cells)
    readings = np.bincount(cell_code, weights=count, minlength=n_cells)
    chosen = np.flatnonzero(vehicles >= min_vehicles)
    if top_cells is not None and len(chosen) > top_cells:
        busiest_first = np.lexsort((chosen, -readings[chosen]))  # ties: smaller cell id
        chosen = np.sort(chosen[busiest_first[:top_cells]])
    return chosen


def kept_sums(
    columns: WindowColumns,
    entries: np.ndarray,
    kept_count: np.ndarray,
    prefix_sums: Future[tuple[np.ndarray, ...]] | None = None,
    count: np.ndarray | None = None,
    entry_totals: Future[tuple[np.ndarray, np.ndarray]] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Sum and sum of squares of the first ``kept_count`` readings of each chosen entry.

    ``prefix_sums`` and ``entry_totals``: :func:`start_prefix_sums` and
    :func:`start_entry_totals` of these columns and entries, if started earlier; ``count``:
    ``columns.count[entries]``, if at hand (the occupancy's counts)."""
    from stream_dp.dp.array_kernels import kept_entry_sums

    entries = entries.astype(np.int64, copy=False)
    kept_count = kept_count.astype(np.int64, copy=False)
    count = np.take(columns.count, entries) if count is None else count
    count = count.astype(np.int64, copy=False)
    if np.any((kept_count != count) & (kept_count > 0)):
        start, sums, sums_sq = (prefix_sums or start_prefix_sums(columns)).result()
    else:
        start = np.zeros(1, dtype=np.int64)
        sums = sums_sq = np.zeros(0, dtype=np.float64)
    entry_total, entry_total_sq = (entry_totals or start_entry_totals(columns, entries)).result()
    total, total_sq, beyond = kept_entry_sums(
        entries, kept_count, count, entry_total, entry_total_sq, start, sums, sums_sq
    )
    if beyond >= 0:
        raise ValueError("a cap needs readings beyond the stored prefix")
    return total, total_sq


def start_entry_totals(
    columns: WindowColumns, entries: np.ndarray
) -> Future[tuple[np.ndarray, np.ndarray]]:
    """Start gathering the chosen entries' totals and totals of squares (in entry order) on the
    background thread: random reads over the window's pairs, done while CLIP-USER runs."""
    from stream_dp.dp.array_kernels import gather_pair_totals

    return background.submit(
        gather_pair_totals,
        entries.astype(np.int64, copy=False),
        columns.total.astype(np.float64, copy=False),
        columns.total_sq.astype(np.float64, copy=False),
    )


def start_prefix_sums(columns: WindowColumns) -> Future[tuple[np.ndarray, ...]]:
    """Start :func:`~stream_dp.dp.array_kernels.pair_prefix_sums` of the window's reading log
    on the background thread (the compiled kernel releases the GIL, so it runs beside CLIP-USER)."""
    from stream_dp.dp.array_kernels import pair_prefix_sums

    return background.submit(
        pair_prefix_sums,
        columns.reading_pair.astype(np.int64, copy=False),
        columns.reading_ts.astype(np.float64, copy=False),
        columns.reading_value.astype(np.float64, copy=False),
        len(columns),
    )


def _occupancy(
    columns: WindowColumns, chosen: np.ndarray, usable: np.ndarray | None = None
) -> tuple[Occupancy, np.ndarray]:
    """The occupancy array of the chosen cells (``usable`` pairs only, when given) and, per
    entry, its index into ``columns``.
    Cell and vehicle names are sorted, so ranks are prefix sums of presence flags. Entries are
    grouped by cell with one counting sort; within a cell they keep the columns' order (which
    nothing computed from an occupancy depends on, see :class:`Occupancy`)."""
    from stream_dp.dp.array_kernels import stable_order_by

    names = columns.vehicle_names
    if usable is None and len(chosen) == len(columns.cell_names):
        # Every pair (so every vehicle) is in: the codes are already the ranks.
        entries = None
        cell_index, vehicle_index = columns.cell_code, columns.vehicle_code
        vehicles = names
    else:
        in_chosen = np.zeros(len(columns.cell_names), dtype=bool)
        in_chosen[chosen] = True
        if usable is not None:
            entries = np.flatnonzero(in_chosen[columns.cell_code] & usable)
        else:
            entries = np.flatnonzero(in_chosen[columns.cell_code])
        cell_index = (np.cumsum(in_chosen) - 1)[columns.cell_code[entries]]
        vehicle_code = columns.vehicle_code[entries]
        used = np.zeros(len(names), dtype=bool)
        used[vehicle_code] = True
        used_vehicles = np.flatnonzero(used)
        vehicle_index = (np.cumsum(used) - 1)[vehicle_code]
        vehicles = (
            names
            if len(used_vehicles) == len(names)
            else tuple(names[v] for v in used_vehicles.tolist())
        )
    order = stable_order_by(cell_index.astype(np.int64, copy=False), len(chosen))
    entry_of = order if entries is None else np.take(entries, order)
    # Ordered by cell, the cell column is each cell's index repeated (no gather).
    per_cell = np.bincount(cell_index, minlength=len(chosen))
    occupancy = Occupancy(
        cells=tuple(columns.cell_names[c] for c in chosen.tolist()),
        vehicles=vehicles,
        cell_index=np.repeat(np.arange(len(chosen), dtype=np.int64), per_cell),
        vehicle_index=np.take(vehicle_index, order).astype(np.int64, copy=False),
        count=np.take(columns.count, entry_of),
    )
    return occupancy, entry_of


def release_window(
    window_start: int,
    columns: WindowColumns,
    settings: Settings,
    noise: LaplaceNoise,
    late_readings: int = 0,
    ledger: BudgetLedger | None = None,
) -> WindowRelease:
    """Run the whole per-window release (pure: no I/O). With a ``ledger`` whose ``cap`` is
    set, each vehicle is first limited to the cells its remaining budget allows; with any
    ledger, the release carries the per-vehicle cells counted (``loss``) for the caller to
    record once the release is stored."""
    # The step allocates no reference cycles; pausing the cyclic collector avoids repeated
    # full scans of the window's million accumulators (measured: up to 40 % of the time).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _release_window(window_start, columns, settings, noise, late_readings, ledger)
    finally:
        if collecting:
            gc.enable()


def window_base(settings: Settings, window_start: int) -> dict[str, Any]:
    """The fields every record of the window carries."""
    return {
        "schema_version": SCHEMA_VERSION,
        "window_start": rfc3339(window_start),
        "window_end": rfc3339(window_start + settings.window_seconds),
        "resolution": settings.resolution,
        "epsilon": settings.epsilon,
    }


class ChosenPairs(NamedTuple):
    """The (cell, vehicle) pairs a window's release uses before CLIP-USER: the chosen cells'
    occupancy after the per-vehicle budget cap (all public), each entry's index into the
    columns, and how many vehicles and pairs the cap withheld."""

    chosen: np.ndarray
    occupancy: Occupancy
    entry_of: np.ndarray
    withheld: tuple[int, int]


def chosen_pairs(
    window_start: int,
    columns: WindowColumns,
    settings: Settings,
    ledger: BudgetLedger | None,
    chosen: np.ndarray | None = None,
) -> ChosenPairs:
    """:class:`ChosenPairs` of the window (``chosen``: :func:`select_cells`, if at hand)."""
    if chosen is None:
        chosen = select_cells(columns, settings.min_vehicles, settings.top_cells)
    occupancy, entry_of = _occupancy(columns, chosen)
    withheld = (0, 0)
    if ledger is not None and ledger.cap is not None and len(chosen):
        if settings.accounting == "pld":  # the cap bounds epsilon at delta (PLD)
            from stream_dp.dp.pld_accounting import pld_allowed_cells

            spent = ledger.spent(occupancy.vehicles, window_start)
            allowed = pld_allowed_cells(
                spent, settings.epsilon, settings.variance_share, settings.accounting_delta,
                ledger.cap,
            )  # fmt: skip
        else:
            allowed = ledger.allowed_cells(occupancy.vehicles, window_start, settings.epsilon)
        keep = limit_to_budget(occupancy, allowed)
        if not keep.all():
            withheld = (
                int(np.count_nonzero(np.bincount(occupancy.vehicle_index[~keep]))),
                int(np.count_nonzero(~keep)),
            )
            usable = np.zeros(len(columns), dtype=bool)
            usable[entry_of[keep]] = True
            chosen = select_cells(columns, settings.min_vehicles, settings.top_cells, usable)
            occupancy, entry_of = _occupancy(columns, chosen, usable)
    return ChosenPairs(chosen, occupancy, entry_of, withheld)


def _release_window(
    window_start: int,
    columns: WindowColumns,
    settings: Settings,
    noise: LaplaceNoise,
    late_readings: int,
    ledger: BudgetLedger | None,
) -> WindowRelease:
    eps = settings.epsilon
    upper = settings.upper
    share = settings.variance_share
    eps_m, eps_v = eps * (1.0 - share), eps * share
    target = settings.target_mean_error
    model = ErrorModel.split(eps, share, LN20 if target is not None else 1.0)
    nonce = new_release_nonce()  # one per release event: every record id derives from it
    # The summary counts every reading of the window (``observed``), withheld or not.
    adaptive, cells_withheld, observed = None, (0, 0), columns
    if target is not None:
        columns, adaptive, cells_withheld = _adaptive_columns(columns, settings, eps_m)
    chosen = select_cells(columns, settings.min_vehicles, settings.top_cells)
    base = window_base(settings, window_start)
    # Only the pseudo-user cap needs each pair's reading prefixes: sum them while CLIP-USER runs.
    prefix_sums = start_prefix_sums(columns) if settings.pseudo_user and len(chosen) else None
    chosen, occupancy, entry_of, withheld = chosen_pairs(
        window_start, columns, settings, ledger, chosen
    )
    if not len(chosen):
        summary = _summary(settings, base, window_start, None, None, 0, observed, nonce)
        summary["readings_dropped_late"] = late_readings
        _budget_summary(summary, settings, withheld)
        _withheld_summary(summary, settings, cells_withheld, 0)
        loss = None if ledger is None else WindowLoss.from_counts(window_start, eps, [], [])
        return WindowRelease(window_start, [], summary, loss)

    # Work that does not depend on CLIP-USER runs on the background thread meanwhile (its
    # kernels release the GIL): the chosen pairs' totals and the release ids.
    entry_totals = start_entry_totals(columns, entry_of)
    cell_names = list(occupancy.cells)
    ids_future = background.submit(
        release_ids, settings.app_id, window_start, settings.resolution, cell_names, nonce
    )
    error_star = settings.error_bound
    if error_star is None and target is not None and share == 0.0:
        error_star = target  # the model's error is then the mean_error itself
    clip = clip_user(occupancy, upper, eps, error_star, model=model)
    if settings.pseudo_user:
        capped = pseudo_user_step(clip, upper, eps, prefix_limit=settings.prefix_limit)
    else:
        capped = no_pseudo_user(clip)
    total, total_sq = kept_sums(
        columns, entry_of, capped.kept_count, prefix_sums, occupancy.count, entry_totals
    )
    n_cells = len(occupancy.cells)
    cell_idx = occupancy.cell_index
    from stream_dp.dp.array_kernels import kept_cell_totals  # numba: imported on first use

    kept_readings, n_kept_vehicles, cell_sum, cell_sum_sq = kept_cell_totals(
        cell_idx, n_cells, capped.kept_count, total, total_sq
    )
    n_vehicles = np.diff(occupancy.cell_start)
    n_readings = occupancy.total_per_cell()

    mean_mechanism = (
        None if settings.mean_mechanism == "clip" else configured_mean_mechanism(settings)
    )
    bounds = occupancy.cell_start
    var_bias = variance_bias(upper, kept_readings.astype(np.int64), n_readings)
    mean_errors = mean_error(upper, eps_m, capped.cap, kept_readings, n_readings)
    var_errors = (
        variance_error(upper, eps_v, capped.cap, kept_readings, n_readings) if share else None
    )
    # Adaptive cells: a cell whose mean_error misses T after CLIP-USER and the cap (the budget
    # mask can raise it) is withheld; a function of the occupancy only.
    released = np.ones(n_cells, dtype=bool) if target is None else mean_errors <= target
    # The pseudo-user cap never empties a kept entry, so the cells used per vehicle are
    # CLIP-USER's G_l (over the released cells only, when adaptive cells withheld some).
    grids = clip.grids_per_vehicle()
    if not released.all():
        in_released = released[occupancy.cell_index]
        grids = occupancy.grids_per_vehicle(clip.kept & in_released)
        more = (int(np.count_nonzero(~released)), int(n_readings[~released].sum()))
        cells_withheld = (cells_withheld[0] + more[0], cells_withheld[1] + more[1])
    k_released = int(grids.max(initial=0))
    # Per cell, the mean and the variance of the kept readings with their shares of eps; all
    # draws of the window in two batches (independent draws: their order does not matter).
    means = cell_sum / kept_readings
    variances = cell_sum_sq / kept_readings - means * means
    variances = np.where(variances < 0.0, 0.0, variances)  # max(v, 0.0), NaN kept
    noisy_vars = (
        noise.release_many(variances, capped.variance_sensitivity, eps_v).tolist()
        if share
        else [None] * n_cells
    )
    if mean_mechanism is None:
        noisy_means = noise.release_many(means, capped.mean_sensitivity, eps_m).tolist()
    cells: list[dict[str, Any]] = []
    ids = ids_future.result()
    kept_list, error_list, cap_list = (
        kept_readings.tolist(),
        capped.error.tolist(),
        capped.cap.tolist(),
    )
    mean_error_list = mean_errors.tolist()
    var_error_list = [None] * n_cells if var_errors is None else var_errors.tolist()
    vehicles_list, kept_vehicles_list = n_vehicles.tolist(), n_kept_vehicles.tolist()
    readings_list = n_readings.tolist()
    released_list = released.tolist()
    shapes = _cell_shapes(adaptive, occupancy.cells, settings.resolution)
    for g, cell in enumerate(occupancy.cells):
        if not released_list[g]:
            continue
        noisy_var = noisy_vars[g]
        error_bound: float | None = error_list[g]
        cell_mean_error: float | None = mean_error_list[g]
        if mean_mechanism is None:
            noisy_mean = noisy_means[g]
        else:
            entries = range(bounds[g], bounds[g + 1])
            data = _cell_data(columns, entry_of, capped.kept_count, entries)
            outcome = mean_mechanism.release(data, upper, eps_m, noise.source)
            noisy_mean = outcome.value
            variance_part = var_bias[g] + capped.variance_sensitivity[g] / eps_v if share else 0.0
            error_bound = (
                None
                if outcome.worst_case_error is None
                else float(outcome.worst_case_error + variance_part)
            )
            participants = int(data.counts[data.kept_counts > 0].sum())
            cell_mean_error = mechanism_mean_error(
                settings.mean_mechanism, outcome.parameters, outcome.worst_case_error,
                outcome.sensitivity, upper, participants, int(readings_list[g]),
            )  # fmt: skip
        cells.append(
            {
                **base,
                **shapes[g],
                "type": "cell",
                "release_id": ids[g],
                "cell": cell,
                "mean": min(max(noisy_mean, 0.0), upper),
                "variance": None if noisy_var is None else min(max(noisy_var, 0.0), upper**2 / 4),
                "mean_error": cell_mean_error,
                "variance_error": var_error_list[g],
                "n_vehicles": int(vehicles_list[g]),
                "n_vehicles_kept": int(kept_vehicles_list[g]),
                "n_readings": int(readings_list[g]),
                "n_readings_used": int(kept_list[g]),
                "cap": int(cap_list[g]),
                "error_bound": error_bound,
                "mechanism": settings.mean_mechanism,
                "K": k_released,
            }
        )
    summary = _summary(settings, base, window_start, clip, capped, len(cells), observed, nonce)
    summary["readings_dropped_late"] = late_readings
    summary["K"], summary["privacy_loss"] = k_released, k_released * eps
    _budget_summary(summary, settings, withheld)
    _withheld_summary(summary, settings, cells_withheld, k_released)
    loss = None
    if ledger is not None:
        loss = WindowLoss.of_occupancy(window_start, eps, occupancy, None, cells=grids)
    return WindowRelease(window_start, cells, summary, loss)


def _adaptive_columns(
    columns: WindowColumns, settings: Settings, mean_epsilon: float
) -> tuple[WindowColumns, AdaptiveCells, tuple[int, int]]:
    """The window regrouped into the adaptive cells chosen from its occupancy
    (:func:`~stream_dp.dp.adaptive_cells.choose_cells`), and the (cells, readings) withheld."""
    coarsest = settings.coarsest_resolution
    chosen = choose_cells(
        columns.cell_names, columns.cell_code, columns.vehicle_code, columns.count,
        upper=settings.upper, mean_epsilon=mean_epsilon, target=float(settings.target_mean_error),
        finest=settings.resolution,
        coarsest=settings.resolution if coarsest is None else coarsest,
        prefix_limit=settings.prefix_limit, min_vehicles=settings.min_vehicles,
        shape=settings.adaptive_shape,
    )  # fmt: skip
    unit = chosen.unit_of_cell[columns.cell_code]
    keep = unit >= 0
    readings_out = int(columns.count[~keep].sum())
    cells_in = np.bincount(
        chosen.unit_of_cell[chosen.unit_of_cell >= 0], minlength=len(chosen.names)
    )
    merged = _regroup(columns, chosen.names, unit, settings.prefix_limit, cells_in > 1)
    return merged, chosen, (len(chosen.withheld_cells), readings_out)


def _regroup(
    columns: WindowColumns,
    names: tuple[str, ...],
    unit: np.ndarray,
    prefix_limit: int,
    merged_unit: np.ndarray,
) -> WindowColumns:
    """``columns`` with each pair moved to cell ``unit[pair]`` of ``names`` (-1: dropped),
    pairs of one vehicle in one new cell merged (counts and sums added; the reading log cut
    back to each merged pair's first ``prefix_limit`` by ``(ts, value)``; only pairs whose
    joined log is longer are sorted). Only the pairs of a ``merged_unit`` (one made of
    several observed cells) can meet another pair of their vehicle, so only they are grouped."""
    keep = unit >= 0
    multi = keep & np.append(merged_unit, False)[unit]  # unit -1 reads the padding
    single = np.flatnonzero(keep & ~multi)
    group_cell, group_vehicle, inverse = pair_groups(
        unit[multi], columns.vehicle_code[multi], len(names), len(columns.vehicle_names)
    )
    cell_code = np.concatenate((unit[single], group_cell))
    vehicle_code = np.concatenate((columns.vehicle_code[single], group_vehicle))
    pair_of = np.full(len(columns), -1, dtype=np.int64)
    pair_of[single] = np.arange(len(single))
    pair_of[multi] = len(single) + inverse
    n = len(cell_code)
    inverse = pair_of[keep]
    reading_pair = pair_of[columns.reading_pair]
    ts, value = columns.reading_ts, columns.reading_value
    if not keep.all():
        live = reading_pair >= 0
        reading_pair, ts, value = reading_pair[live], ts[live], value[live]
    stored = np.bincount(reading_pair, minlength=n)
    if n and int(stored.max()) > prefix_limit:
        at = np.flatnonzero(stored[reading_pair] > prefix_limit)
        order = at[np.lexsort((value[at], ts[at], reading_pair[at]))]
        drop = order[rank_in_runs(reading_pair[order]) >= prefix_limit]
        kept = np.ones(len(reading_pair), dtype=bool)
        kept[drop] = False
        reading_pair, ts, value = reading_pair[kept], ts[kept], value[kept]
    return WindowColumns(
        names,
        cell_code,
        columns.vehicle_names,
        vehicle_code,
        np.bincount(inverse, weights=columns.count[keep], minlength=n).astype(np.int64),
        np.bincount(inverse, weights=columns.total[keep], minlength=n),
        np.bincount(inverse, weights=columns.total_sq[keep], minlength=n),
        reading_pair,
        ts,
        value,
    )


def _cell_shapes(
    adaptive: AdaptiveCells | None, cells: tuple[str, ...], resolution: int
) -> list[dict[str, Any]]:
    """Each record's ``resolution`` and ``scope`` (``remainder``: a parent cell's readings
    left after its separately released children)."""
    if adaptive is None:
        return [{"resolution": resolution, "scope": "cell"}] * len(cells)
    index = {name: g for g, name in enumerate(adaptive.names)}
    res, rem = adaptive.resolution.tolist(), adaptive.remainder.tolist()
    return [
        {"resolution": res[index[c]], "scope": "remainder" if rem[index[c]] else "cell"}
        for c in cells
    ]


def _withheld_summary(
    summary: dict[str, Any], settings: Settings, withheld: tuple[int, int], k_released: int
) -> None:
    """Adaptive cells withheld (no record, no budget) and both accountings of the window:
    ``privacy_loss`` (basic, ``K eps``) and ``privacy_loss_pld`` (epsilon at
    ``accounting_delta`` of ``K`` cells; null without the optional dp-accounting package)."""
    from stream_dp.dp.pld_accounting import pld_loss

    summary["cells_withheld"], summary["readings_withheld"] = withheld
    summary["variance_share"] = settings.variance_share
    summary["accounting"] = settings.accounting
    summary["accounting_delta"] = settings.accounting_delta
    summary["target_mean_error"] = settings.target_mean_error
    summary["privacy_loss_pld"] = pld_loss(
        k_released, settings.epsilon, settings.variance_share, settings.accounting_delta
    )


def _budget_summary(summary: dict[str, Any], settings: Settings, withheld: tuple[int, int]) -> None:
    """The per-vehicle budget's part of the window summary (all public)."""
    summary["budget_cap"] = settings.budget_cap
    summary["budget_period_seconds"] = settings.budget_period_seconds
    summary["vehicles_budget_limited"], summary["pairs_withheld_budget"] = withheld


def configured_mean_mechanism(settings: Settings) -> Any:
    """The settings' mean mechanism (a ``MeanMechanism``) with its parameters; the release
    uses the built-in CLIP mean instead of the object for ``clip``."""
    from stream_dp.dp.mechanisms import get_mean_mechanism

    params: dict[str, Any] = {}
    if settings.mean_mechanism == "cummings":
        params = {"delta": settings.delta, "prefix_limit": settings.prefix_limit}
    return get_mean_mechanism(settings.mean_mechanism, **params)


def _cell_data(
    columns: WindowColumns, entry_of: np.ndarray, kept_count: np.ndarray, entries: range
) -> Any:
    from stream_dp.dp.mechanisms import CellData

    chosen = entry_of[entries.start : entries.stop]
    return CellData(
        counts=columns.count[chosen],
        sums=columns.total[chosen],
        sumsqs=columns.total_sq[chosen],
        prefixes=columns.prefixes(chosen),
        kept_counts=np.asarray(kept_count[entries.start : entries.stop], dtype=np.int64),
    )


def _summary(
    settings: Settings,
    base: dict[str, Any],
    window_start: int,
    clip: ClipUserResult | None,
    capped: PseudoUserResult | None,
    cells_released: int,
    columns: WindowColumns,
    nonce: str,
) -> dict[str, Any]:
    eps = settings.epsilon
    g1 = clip.g1 if clip else 0
    k = clip.k if clip else 0
    return {
        **base,
        "type": "window",
        "release_id": release_id(settings.app_id, window_start, settings.resolution, "*", nonce),
        "status": RELEASED,
        "G1": g1,
        "K": k,
        "privacy_loss": k * eps,
        "privacy_loss_unclipped": g1 * eps,
        "error_bound": float(clip.error_bound) if clip else 0.0,
        "max_error": float(np.max(capped.error)) if capped is not None else 0.0,
        "cells_released": cells_released,
        "cells_observed": len(columns.cell_names),
        "n_vehicles": len(columns.vehicle_names),
        "n_readings": int(columns.count.sum()),
        "suppressed_pairs": clip.n_suppressed if clip else 0,
        "mechanism": settings.mean_mechanism,
        "delta": settings.delta if settings.mean_mechanism == "cummings" else 0.0,
    }
