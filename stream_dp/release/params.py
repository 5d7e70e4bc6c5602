"""The release's parameters (docs/math.md §9): the DP fields of the settings, and nothing else.

Built once at the edge (the offline engine, the worker, ``plan``, the experiments and
benchmarks) by :meth:`ReleaseParams.from_settings` and passed through the release, so no
stage sees Kafka, web or operations settings. Frozen; :meth:`ReleaseParams.__post_init__`
checks what depends on the mean mechanism's spec (:mod:`stream_dp.dp.mechanism_specs`, the
one registry of mechanisms); the commands that run the release check the settings they
load with :func:`checked_settings` at start.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field, fields
from typing import Literal

from stream_dp.config import (
    BUDGET_PLANNERS,
    DEFAULT_BUDGET_PERIOD_SECONDS,
    DEFAULT_BURST_SHARE,
    DEFAULT_MAX_SPAN_HOURS,
    OPTIMISER_MAX_PAIRS,
    ConfigError,
    Settings,
    label,
)
from stream_dp.dp.mechanism_specs import DEFAULT_MEAN_MECHANISM, MeanMechanismSpec, mechanism_spec
from stream_dp.dp.pld_accounting import check_composable
from stream_dp.release.modes import FixedEpsilon, ReleaseMode, VehicleBudget


@dataclass(frozen=True)
class ReleaseParams:
    """What the release of a window reads (the settings of the same names, docs/README)."""

    epsilon: float = 1.0
    variance_share: float = 0.0
    upper: float = 65.0
    resolution: int = 8
    window_seconds: int = 3600
    prefix_limit: int = 64
    error_bound: float | None = None
    pseudo_user: bool = True
    min_vehicles: int = 1
    top_cells: int | None = None
    mean_mechanism: str = DEFAULT_MEAN_MECHANISM
    delta: float | None = None
    budget_cap: float | None = None
    budget_period_seconds: int = DEFAULT_BUDGET_PERIOD_SECONDS
    accounting: Literal["basic", "pld"] = "basic"
    accounting_delta: float = 1e-6
    target_mean_error: float | None = None
    coarsest_resolution: int | None = None
    adaptive_shape: Literal["compact", "remainder"] = "remainder"
    #: B: the per-vehicle budget over any ``budget_period_seconds`` (docs/math.md §13).
    vehicle_budget: float | None = None
    vehicle_budget_burst: float | None = None
    max_span_hours: int = DEFAULT_MAX_SPAN_HOURS
    #: How the vehicle budget plans a window: "auto", "rules" or "optimiser" (docs/math.md
    #: §13.5).
    budget_planner: str = "auto"
    #: ``budget_planner = "auto"``: the most pooled pairs a window the optimiser plans.
    optimiser_max_pairs: int = OPTIMISER_MAX_PAIRS
    #: Part of every release id (the service's app id).
    app_id: str = "stream-dp"
    #: The mode, built from the fields above (:mod:`stream_dp.release.modes`): the release
    #: reads the vehicle budget's fields off it, never off the flat settings.
    mode: ReleaseMode = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """ValueError naming the field of an inconsistent combination."""
        for name in ("epsilon", "upper"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name}: must be a finite number > 0, got {value!r}")
        try:
            spec = mechanism_spec(self.mean_mechanism)
        except ValueError as exc:
            raise ValueError(f"mean_mechanism: {exc}") from None
        if self.vehicle_budget is not None and not spec.window_combiner:
            raise ValueError(
                "mean_mechanism: vehicle_budget needs mean_mechanism 'clip' (its per-cell "
                f"epsilon comes from target_mean_error's adaptive cells), got "
                f"{self.mean_mechanism!r}; add --fixed-epsilon (vehicle_budget none) for a "
                "fixed epsilon per cell"
            )
        self._check_vehicle_budget()
        object.__setattr__(self, "mode", self._mode())
        if spec.needs_delta and self.delta is None:
            raise ValueError(f"delta: required by mean_mechanism {self.mean_mechanism!r}")
        if self.target_mean_error is not None and not spec.window_combiner:
            raise ValueError(
                "target_mean_error: needs mean_mechanism 'clip' (adaptive cells predict the "
                f"clipped mean's mean_error), got {self.mean_mechanism!r}; set it to none "
                "(--fixed-cells) for fixed cells"
            )
        if self.accounting == "pld":
            try:
                check_composable(self.mean_mechanism)
            except ValueError as exc:
                raise ValueError(f"accounting: {exc}") from None

    def _check_vehicle_budget(self) -> None:
        for name in ("vehicle_budget", "vehicle_budget_burst"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name}: must be a finite number > 0, got {value!r}")
        if self.max_span_hours < 1:
            raise ValueError(f"max_span_hours: must be >= 1, got {self.max_span_hours!r}")
        if self.budget_planner not in BUDGET_PLANNERS:
            raise ValueError(
                f"budget_planner: must be one of {', '.join(BUDGET_PLANNERS)}, "
                f"got {self.budget_planner!r}"
            )
        if self.optimiser_max_pairs < 0:
            raise ValueError(f"optimiser_max_pairs: must be >= 0, got {self.optimiser_max_pairs!r}")
        if self.vehicle_budget is None:
            return
        if self.budget_cap is not None:
            raise ValueError("budget_cap: unset it with vehicle_budget (which replaces it)")
        if self.target_mean_error is None:
            raise ValueError("vehicle_budget: needs target_mean_error (per-cell epsilon)")
        if self.vehicle_burst > self.vehicle_budget:
            raise ValueError("vehicle_budget_burst: must be <= vehicle_budget")

    def _mode(self) -> ReleaseMode:
        """The mode these fields choose (checked by :meth:`_check_vehicle_budget`)."""
        if self.vehicle_budget is None:
            return FixedEpsilon()
        return VehicleBudget(
            float(self.vehicle_budget), self.vehicle_burst, self.max_span_hours,
            self.budget_period_seconds, self.budget_planner, self.optimiser_max_pairs,
        )  # fmt: skip

    @property
    def vehicle_burst(self) -> float:
        """Pacing's burst (token bucket capacity): ``vehicle_budget_burst``, else B/4."""
        if self.vehicle_budget_burst is not None:
            return self.vehicle_budget_burst
        return 0.0 if self.vehicle_budget is None else self.vehicle_budget * DEFAULT_BURST_SHARE

    @property
    def ledger_period_seconds(self) -> int:
        """The rolling period the ledger checks a vehicle's room over (docs/math.md §13.1):
        ``budget_period_seconds``, widened under a vehicle budget by ``(max_span_hours - 1)``
        windows, because a record released at ``t`` holds readings up to that many windows
        older; every release using the readings of one period then lies in one widened period.
        """
        if self.vehicle_budget is None:
            return self.budget_period_seconds
        return self.budget_period_seconds + (self.max_span_hours - 1) * self.window_seconds

    @classmethod
    def from_settings(cls, settings: Settings) -> ReleaseParams:
        """The DP fields of ``settings`` (the one place that reads them for the release)."""
        values = {f.name: getattr(settings, f.name) for f in fields(cls) if f.init}
        return cls(**_fixed_cells_unless_asked(values, settings.model_fields_set))

    @property
    def mechanism(self) -> MeanMechanismSpec:
        """The mean mechanism's spec."""
        return mechanism_spec(self.mean_mechanism)

    @property
    def coarsest(self) -> int:
        """R0 of adaptive cells (the resolution when unset)."""
        return self.resolution if self.coarsest_resolution is None else self.coarsest_resolution


def checked_settings(settings: Settings, flags: Collection[str] = ()) -> Settings:
    """``settings`` once their release parameters are consistent with the mean mechanism's
    spec; :class:`~stream_dp.config.ConfigError` naming the setting (and its flag, for the
    settings in ``flags``) otherwise. The targeted default (``target_mean_error``) is for
    the window-wide CLIP mean: another mechanism chosen without an explicit target gets fixed
    cells instead of a refusal of a value the user never set (in the settings returned too,
    so a worker started from them runs the same release); under the default vehicle budget,
    which needs the CLIP mean, it is refused until ``--fixed-epsilon`` drops the budget."""
    values = {f.name: getattr(settings, f.name) for f in fields(ReleaseParams) if f.init}
    fixed = _fixed_cells_unless_asked(values, settings.model_fields_set)
    try:
        ReleaseParams(**fixed)
    except ValueError as exc:
        field, _, reason = str(exc).partition(": ")
        raise ConfigError(f"invalid setting {label(field, flags)}: {reason}") from None
    changed = {k: v for k, v in fixed.items() if values[k] != v}
    return settings.model_copy(update=changed) if changed else settings


def _fixed_cells_unless_asked(
    values: dict[str, object], explicit: Collection[str]
) -> dict[str, object]:
    """``values`` (settings by name) with fixed cells (``target_mean_error`` none) where the
    mean mechanism is not the window-wide CLIP mean and the target is the default, not one
    the user set (``explicit``: the names set)."""
    try:
        combiner = mechanism_spec(str(values["mean_mechanism"])).window_combiner
    except ValueError:
        return values  # ReleaseParams names the unknown mechanism
    if combiner or "target_mean_error" in explicit:
        return values
    unset: dict[str, object] = {"target_mean_error": None}
    if "coarsest_resolution" not in explicit:
        unset["coarsest_resolution"] = None
    return {**values, **unset}
