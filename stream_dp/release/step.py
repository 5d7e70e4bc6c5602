"""The release of one complete window, as named stages (docs/math.md §9):

0. with ``target_mean_error``, regroup into adaptive cells (:mod:`.adaptive`, §12);
1. select cells (:mod:`.selection`, §9.1);
2. bound contributions (:mod:`.bounding`, §9.2): budget mask → CLIP-USER → pseudo-user cap;
3. statistics of the kept readings (:mod:`.statistics`, §9.3), and their error bars;
   with adaptive cells, the cells still missing the target are withheld;
4. noise (:mod:`.noisy`, §9.4), the ε split and K·ε by the window's
   :class:`~stream_dp.release.accounting.WindowAccountant`;
5. records (:mod:`.records`, §9.5).

Everything published is computed from the public occupancy array and noised values
(composition paper Sec. V-B2). Pure: no I/O.
"""

from __future__ import annotations

import gc
from typing import Any

import numpy as np

from stream_dp.config import Settings
from stream_dp.dp.budget_ledger import BudgetLedger
from stream_dp.dp.error_bars import LN20
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.release.accounting import WindowAccountant
from stream_dp.release.adaptive import adaptive_columns, cell_shapes, released_cells
from stream_dp.release.bounding import (
    NOTHING_BOUNDED,
    BudgetMask,
    ClipUserBound,
    Contributions,
    ReadingCap,
)
from stream_dp.release.noisy import CellDataOf, error_bars, noisy_cells
from stream_dp.release.records import (
    WindowRelease,
    cell_records,
    new_release_nonce,
    release_ids,
    window_base,
    window_summary,
)
from stream_dp.release.selection import occupancy_of, select_cells
from stream_dp.release.statistics import cell_statistics, start_entry_totals, start_prefix_sums
from stream_dp.windows import background
from stream_dp.windows.columns import WindowColumns


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
    # Performance (benchmarks/release.py): the step allocates no reference cycles; pausing
    # the cyclic collector avoids repeated full scans of the window's arrays' owners
    # (measured: up to 40 % of the time).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _run_stages(window_start, columns, settings, noise, late_readings, ledger)
    finally:
        if collecting:
            gc.enable()


def chosen_pairs(
    window_start: int,
    columns: WindowColumns,
    settings: Settings,
    ledger: BudgetLedger | None,
    report: dict[str, Any] | None = None,
    chosen: np.ndarray | None = None,
) -> Contributions:
    """Stage 1 and the budget mask of stage 2: the chosen cells' pairs that the ledger
    allows (``chosen``: :func:`select_cells` of the columns, if at hand)."""
    if chosen is None:
        chosen = select_cells(columns, settings.min_vehicles, settings.top_cells)
    pairs = Contributions(chosen, *occupancy_of(columns, chosen))
    mask = BudgetMask(columns, ledger, window_start, settings)
    return mask.apply(pairs, {} if report is None else report)


def _run_stages(
    window_start: int,
    columns: WindowColumns,
    settings: Settings,
    noise: LaplaceNoise,
    late_readings: int,
    ledger: BudgetLedger | None,
) -> WindowRelease:
    accountant = WindowAccountant.for_settings(settings, window_start)
    nonce = new_release_nonce()  # one per release event: every record id derives from it
    report = dict(NOTHING_BOUNDED)
    target = settings.target_mean_error
    # The summary counts every reading of the window (``observed``), withheld or not.
    adaptive, observed = None, columns
    if target is not None:  # stage 0: the adaptive cells of the occupancy (§12)
        columns, adaptive, withheld = adaptive_columns(columns, settings, accountant.mean_epsilon)
        report["cells_withheld"], report["readings_withheld"] = withheld
    base = window_base(settings, window_start)
    chosen = select_cells(columns, settings.min_vehicles, settings.top_cells)
    # Performance (benchmarks/release.py): only the cap reads each pair's reading prefixes;
    # their sums run on the background thread (a GIL-free kernel) while CLIP-USER runs.
    prefix_sums = start_prefix_sums(columns) if settings.pseudo_user and len(chosen) else None
    pairs = chosen_pairs(window_start, columns, settings, ledger, report, chosen)
    if not len(pairs.chosen):
        summary = window_summary(
            base, settings, window_start, report, 0, observed, late_readings, nonce
        )
        loss = None if ledger is None else accountant.loss(None, None)
        return WindowRelease(window_start, [], summary, loss)
    # Also beside CLIP-USER: the chosen pairs' totals and the release ids.
    entry_totals = start_entry_totals(columns, pairs.entry_of)
    ids = background.submit(
        release_ids, settings.app_id, window_start, settings.resolution,
        list(pairs.occupancy.cells), nonce,
    )  # fmt: skip
    pairs = _bound(pairs, settings, accountant, report)
    assert pairs.clip is not None and pairs.capped is not None
    capped, occupancy = pairs.capped, pairs.occupancy
    stats = cell_statistics(
        columns, occupancy, pairs.entry_of, capped.kept_count, prefix_sums, entry_totals
    )
    bars = error_bars(stats, capped, accountant, settings.upper)
    released, grids, k, withheld = released_cells(
        target, bars.mean, pairs.clip, occupancy, stats.n_readings,
        (report["cells_withheld"], report["readings_withheld"]),
    )  # fmt: skip
    report["cells_withheld"], report["readings_withheld"] = withheld
    report["K"], report["privacy_loss_pld"] = k, accountant.pld_loss(k)
    mechanism = None if settings.mean_mechanism == "clip" else configured_mean_mechanism(settings)
    cell_data = CellDataOf(
        columns, pairs.entry_of, capped.kept_count, occupancy.cell_start, settings.upper
    )
    noisy = noisy_cells(
        stats, capped, accountant, noise, bars, released, settings.upper, mechanism, cell_data
    )
    variance_errors = [None] * len(released) if bars.variance is None else bars.variance.tolist()
    cells = cell_records(
        base, settings, occupancy.cells, ids.result(), noisy, variance_errors, stats,
        capped.cap.tolist(), released.tolist(),
        cell_shapes(adaptive, occupancy.cells, settings.resolution), k,
    )  # fmt: skip
    summary = window_summary(
        base, settings, window_start, report, len(cells), observed, late_readings, nonce
    )
    loss = None if ledger is None else accountant.loss(occupancy, grids)
    return WindowRelease(window_start, cells, summary, loss)


def _bound(
    pairs: Contributions, settings: Settings, accountant: WindowAccountant, report: dict[str, Any]
) -> Contributions:
    """The bounds of stage 2 after the budget mask: CLIP-USER, then the cap. CLIP-USER keeps
    the error of the accountant's split within E (with adaptive cells and no variance, T)."""
    target = settings.target_mean_error
    error_star = settings.error_bound
    if error_star is None and target is not None and settings.variance_share == 0.0:
        error_star = target  # the model's error is then the mean_error itself
    model = accountant.error_model(LN20 if target is not None else 1.0)
    for bound in (
        ClipUserBound(settings.upper, settings.epsilon, error_star, model),
        ReadingCap(settings.pseudo_user, settings.upper, settings.epsilon, settings.prefix_limit),
    ):
        pairs = bound.apply(pairs, report)
    return pairs


def configured_mean_mechanism(settings: Settings) -> Any:
    """The settings' mean mechanism (a ``MeanMechanism``) with its parameters; for ``clip`` the
    release calls the CLIP mean's combiner (:mod:`stream_dp.dp.clip_mean`) with every cell at
    once instead of the one-cell mechanism (the same code, docs/math.md §7.2)."""
    from stream_dp.dp.mechanisms import get_mean_mechanism

    params: dict[str, Any] = {}
    if settings.mean_mechanism == "cummings":
        params = {"delta": settings.delta, "prefix_limit": settings.prefix_limit}
    return get_mean_mechanism(settings.mean_mechanism, **params)
