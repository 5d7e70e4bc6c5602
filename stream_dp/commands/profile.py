"""The recommended release profile (issue 25 item 7): a per-vehicle budget B over a period,
per-cell epsilon for the accuracy target T, spans of up to ``max_span_hours`` windows.

The values are the prototype's finding on the bundled AIS week: B = ε 14 per 7 days (paced
with the default burst B/4), T = 10 km/h (mean error at 95 %), spans of up to 8 hours, H3
resolution 8 cells merged up to resolution 3, the whole per-cell ε on the mean. The demo uses
them; ``serve`` does when the operator configures no release parameter at all (see
:func:`unconfigured`); compose and the Kubernetes manifests set them explicitly.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from stream_dp.config import Settings
from stream_dp.dp.budget_ledger import WindowLoss

WEEK = 7 * 24 * 3600

BUDGET_PROFILE: dict[str, Any] = {
    "vehicle_budget": 14.0,
    "budget_period_seconds": WEEK,
    "max_span_hours": 8,
    "target_mean_error": 10.0,
    "resolution": 8,
    "coarsest_resolution": 3,
    "variance_share": 0.0,
}

#: Settings that choose what is released and at which privacy loss: an operator who sets any
#: of them (option, environment, settings file) has configured the release.
RELEASE_SETTINGS = frozenset(
    {
        "epsilon", "upper", "resolution", "window_seconds", "error_bound", "min_vehicles",
        "top_cells", "mean_mechanism", "delta", "prefix_limit", "variance_share",
        "target_mean_error", "coarsest_resolution", "accounting", "accounting_delta",
        "vehicle_budget", "vehicle_budget_burst", "max_span_hours", "budget_period_seconds",
        "budget_cap", "pseudo_user",
    }
)  # fmt: skip


def unconfigured(settings: Settings) -> bool:
    """Whether none of the release settings was given (they all hold their defaults)."""
    return not (settings.model_fields_set & RELEASE_SETTINGS)


def promise(settings: Settings) -> str | None:
    """The per-vehicle promise in words, e.g. ``14 per 7 days`` (None without a budget)."""
    budget = settings.vehicle_budget
    if budget is None:
        budget = settings.budget_cap
    if budget is None:
        return None
    return f"{budget:g} per {_period(settings.budget_period_seconds)}"


def _period(seconds: int) -> str:
    for unit, size in (("day", 86400), ("hour", 3600)):
        if seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{seconds} s"


def period_losses(settings: Settings, losses: Iterable[WindowLoss]) -> list[float]:
    """Each vehicle's loss over the budget period that ends with the last window, as the
    release's ledger sums it (basic composition); aggregates are for people, never names."""
    from stream_dp.dp.budget_ledger import BudgetLedger

    # Over the period itself (the release's ledger checks a period widened by the spans).
    ledger = BudgetLedger(settings.budget_period_seconds, None)
    names: set[str] = set()
    last = None
    for loss in sorted(losses, key=lambda loss: loss.window_start):
        ledger.record_released(loss)
        names.update(loss.vehicles)
        last = loss.window_start
    if last is None:
        return []
    # ``spent`` sums the windows w != at with |w - at| < period: at one second before the last
    # window's end, exactly those starting within the period that ends there.
    at = last + settings.window_seconds - 1
    return [float(x) for x in ledger.spent(sorted(names), at)]
