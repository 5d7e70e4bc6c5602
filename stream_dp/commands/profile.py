"""The recommended release profile (issue 25 item 7, issue 34): a per-vehicle budget B over a
period, per-cell epsilon for the accuracy target T, spans of up to ``max_span_hours`` windows.

The values are the prototype's finding on the bundled AIS week: B = ε 14 per 7 days (paced
with the default burst B/4), T = 10 km/h at its U of 65 km/h (mean error at 95 %; 2/13 of U
on other data), spans of up to 8 hours, H3 resolution 8 cells merged up to resolution 3, the
whole per-cell ε on the mean. They are the settings' own defaults (``stream_dp.config``),
each on its own, so ``serve``, ``release`` and the demo share them; compose and the
Kubernetes manifests repeat them. ``--fixed-epsilon`` and ``--fixed-cells`` opt out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from stream_dp.config import (
    COARSEST_RESOLUTION_STEPS,
    DEFAULT_BUDGET_PERIOD_SECONDS,
    TARGET_AT_UPPER,
    Settings,
    default_target_mean_error,
)
from stream_dp.dp.budget_ledger import BudgetLedger, WindowLoss

WEEK = DEFAULT_BUDGET_PERIOD_SECONDS

#: The settings the profile chooses: their defaults are its values.
PROFILE_FIELDS = (
    "vehicle_budget", "budget_period_seconds", "max_span_hours", "target_mean_error",
    "resolution", "coarsest_resolution", "variance_share",
)  # fmt: skip


def profile_values(upper: float = TARGET_AT_UPPER[1]) -> dict[str, Any]:
    """The profile's values at ``upper`` (T and R0 resolved as the settings resolve them)."""
    fields = Settings.model_fields
    values = {name: fields[name].default for name in PROFILE_FIELDS}
    values["target_mean_error"] = default_target_mean_error(upper)
    values["coarsest_resolution"] = max(0, values["resolution"] - COARSEST_RESOLUTION_STEPS)
    return values


#: The profile at the AIS sample's U (65 km/h): T 10.
BUDGET_PROFILE: dict[str, Any] = profile_values()


def promise(settings: Settings) -> str | None:
    """The per-vehicle promise in words, e.g. ``14 per 7 days`` (None without a budget)."""
    budget = settings.vehicle_budget
    if budget is None:
        budget = settings.budget_cap
    if budget is None:
        return None
    return f"{budget:g} per {period_words(settings.budget_period_seconds)}"


def promise_line(settings: Settings) -> str:
    """``promise: each vehicle loses at most epsilon 14 per 7 days; T 10, U 65``: B per
    period (or why there is none), the accuracy target T (or fixed cells) and U."""
    words = promise(settings)
    if words is None:
        head = (
            f"promise: none (a fixed epsilon {settings.epsilon:g} per cell, each vehicle's "
            "loss tracked, not capped)"
        )
    else:
        head = f"promise: each vehicle loses at most epsilon {words}"
        if settings.vehicle_budget is None:
            head += f" (budget_cap, a fixed epsilon {settings.epsilon:g} per cell)"
    target = settings.target_mean_error
    cells = (
        f"fixed cells at resolution {settings.resolution}"
        if target is None
        else f"target mean error T {target:g}"
    )
    return f"{head}; {cells}, U {settings.upper:g}"


def period_words(seconds: int) -> str:
    """``7 days``, ``1 hour``, ``90 s``: a budget period in words."""
    for unit, size in (("day", 86400), ("hour", 3600)):
        if seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{seconds} s"


def period_losses(settings: Settings, losses: Iterable[WindowLoss]) -> list[float]:
    """Each vehicle's loss over the budget period that ends with the last window, as the
    release's ledger sums it (basic composition); aggregates are for people, never names."""
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
