"""What a secret-routes cell would cost and give, from public parameters only (docs/math.md
§14.4, §14.6): no data is read and no noise drawn. For a cell of ``n`` vehicles (each adding
one clipped mean to it), the chance that it is shown — its noisy count reaches the threshold
T — and the half-width of its 95 % interval when the noisy count and sum come out at their
expected values (``n`` and ``n U / 2``: a mean at the middle of [0, U]). With adaptive levels
(§14.10) T selects the coarse cells, and a fine cell under a split one is shown at the fine
cut c: its chance at c too."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stream_dp.dp.laplace_tails import upper_tail
from stream_dp.dp.noisy_mean import noisy_means
from stream_dp.dp.secret_accounting import COUNT_STEPS, SUM_STEPS
from stream_dp.secret_routes.params import INTERVAL_LEVEL, SecretRoutesParams

#: The vehicle counts of the table when none are given.
DEFAULT_COUNTS = (25, 50, 100, 150, 200, 300, 500, 1000, 2000)


@dataclass(frozen=True)
class CellOutlook:
    """One row: a cell of ``vehicles`` vehicles."""

    vehicles: int
    shown_probability: float
    mean_error: float
    #: Adaptive levels: the chance at the fine cut (a fine cell under a split coarse cell).
    fine_probability: float | None = None


def shown_probability(params: SecretRoutesParams, vehicles: int) -> float:
    """``P(n + Z >= T)`` in count steps, Z the count's discrete Laplace noise (§14.4)."""
    return reach_probability(params, vehicles, params.threshold)


def reach_probability(params: SecretRoutesParams, vehicles: int, cut: int) -> float:
    """``P(n + Z >= cut)`` in count steps (the threshold, §14.4, or the fine cut, §14.10)."""
    return upper_tail(cut - vehicles * COUNT_STEPS, params.count_scale)


def mean_error(params: SecretRoutesParams, vehicles: int) -> float:
    """The interval's half-width (§14.6) at noisy count ``n`` and noisy sum ``n U / 2``."""
    count_width, sum_width = params.widths()
    count = np.array([float(vehicles)])
    means = noisy_means(count, count * params.upper / 2, count_width, sum_width, params.upper,
                        params.upper / (2 * SUM_STEPS))  # fmt: skip
    return float(means.error_bar[0])


def outlook(params: SecretRoutesParams, counts: tuple[int, ...] = DEFAULT_COUNTS,
            ) -> list[CellOutlook]:  # fmt: skip
    """The table's rows, one per vehicle count (with the fine cut's chance when adaptive)."""
    return [
        CellOutlook(n, shown_probability(params, n), mean_error(params, n),
                    reach_probability(params, n, params.fine_cut) if params.adaptive else None)
        for n in counts
    ]  # fmt: skip


def _levels_line(params: SecretRoutesParams) -> list[str]:
    """The second level, if any, in words (§14.9, §14.10)."""
    coarse = params.coarse_resolution
    if coarse is None:
        return []
    if not params.adaptive:
        return [f"levels: fixed, resolution {params.resolution} and its parents at {coarse}, "
                "each level by the threshold"]  # fmt: skip
    return [f"levels: adaptive, resolution {coarse} by the threshold first; under a cell whose "
            f"noisy count reaches {params.fine_cut / COUNT_STEPS:.1f}, its children at "
            f"{params.resolution}, each shown when its noisy count reaches that too"]  # fmt: skip


def _cells_line(params: SecretRoutesParams) -> str:
    """The cells the threshold selects: the coarse ones when adaptive (§14.10)."""
    threshold = f"noisy vehicle count reaches {params.threshold / COUNT_STEPS:.1f}"
    if params.adaptive:
        return (f"cells: resolution {params.coarse_resolution} first, at most "
                f"{params.contribution_cells} a vehicle a window at each level; a cell at "
                f"{params.coarse_resolution} is shown when its {threshold}")  # fmt: skip
    return (f"cells: resolution {params.resolution}, at most {params.contribution_cells} a "
            f"vehicle a window; a cell is shown when its {threshold}")  # fmt: skip


def _row(row: CellOutlook) -> str:
    """One row of the table; the fine cut's column when adaptive."""
    fine = "" if row.fine_probability is None else f" {row.fine_probability:>9.3f}"
    return f"{row.vehicles:>8} {row.shown_probability:>9.3f}{fine} {row.mean_error:>9.2f}"


def format_outlook(params: SecretRoutesParams, rows: list[CellOutlook]) -> str:
    """The plan in words and the table over n (adaptive: P(shown) of a coarse cell at T, of a
    fine cell under a split one at the fine cut, §14.10)."""
    fine, fine_note = "", ""
    if params.adaptive:
        fine = f" {'P(fine)':>9}"
        fine_note = (f"; P(fine): a cell at {params.resolution} under a split one, at "
                     f"{params.fine_cut / COUNT_STEPS:.1f}")  # fmt: skip
    b = params.budget
    lines = [
        "privacy model: secret-routes (docs/math.md §14): nothing about a vehicle is public; "
        "this plan reads no data",
        f"budget: every vehicle loses at most epsilon {b.budget:g} at delta {b.delta:g} per "
        f"period of {b.windows} windows of {params.window_seconds} s",
        f"per window, every vehicle: epsilon {b.window_epsilon:.4g}, delta "
        f"{b.selection_delta:.3g}; over the whole period epsilon "
        f"{b.period_epsilon(b.windows):.4g}, delta {b.period_delta(b.windows):.3g}",
        _cells_line(params),
        *_levels_line(params),
        "",
        f"{'vehicles':>8} {'P(shown)':>9}{fine} {f'{INTERVAL_LEVEL:.0%} bar':>9}  (mean at U/2, "
        f"U {params.upper:g}{fine_note})",
    ]
    lines += [_row(r) for r in rows]
    return "\n".join(lines)
