"""The one place a release mode is chosen: each mode of :mod:`stream_dp.release.modes` and its
pipelines (docs/architecture.md). A new mode adds its variant there and its case here."""

from __future__ import annotations

import importlib

from stream_dp.release.modes import FixedEpsilon, ReleaseMode, VehicleBudget
from stream_dp.release.params import ReleaseParams
from stream_dp.release.stages import FixedPipelines, ModePipelines

#: The vehicle budget's package, imported when that mode is chosen: its plan and spans load
#: numba, which a fixed-ε ``plan`` never does (benchmarks/plan_startup.py).
VEHICLE_BUDGET_PACKAGE = "stream_dp.release.vehicle_budget"


def pipelines_of(params: ReleaseParams) -> ModePipelines:
    """The pipelines of the parameters' mode."""
    mode: ReleaseMode = params.mode
    match mode:
        case FixedEpsilon():
            return FixedPipelines()
        case VehicleBudget():
            budget = importlib.import_module(VEHICLE_BUDGET_PACKAGE)
            pipelines: ModePipelines = budget.BudgetPipelines(params, mode)
            return pipelines
    raise AssertionError(f"no pipeline for mode {mode!r}")
