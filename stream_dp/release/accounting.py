"""The privacy accounting of the release step: the per-vehicle budget ledger of a stream."""

from __future__ import annotations

from stream_dp.config import Settings
from stream_dp.dp.budget_ledger import BudgetLedger


def new_ledger(settings: Settings) -> BudgetLedger:
    """The per-vehicle budget ledger the settings ask for (tracking always; cap if set)."""
    return BudgetLedger(settings.budget_period_seconds, settings.budget_cap)
