"""Prometheus metrics of a stream-dp worker.

Names follow Prometheus conventions: ``stream_dp_`` prefix, base units, ``_total`` counters,
and no per-vehicle or per-cell labels (a label value must never identify a vehicle or cell).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from stream_dp.config import WINDOW_PLANNERS


class ServiceMetrics:
    """All metrics of one worker, registered on their own registry (tests make many)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._add_stream_metrics(self.registry)
        self._add_privacy_metrics(self.registry)
        self._add_held_metrics(self.registry)
        self._add_model_metrics(self.registry)

    def busiest_period_loss(self) -> float:
        """The busiest vehicle's loss over the rolling period, as last exported (0: none)."""
        name = "stream_dp_vehicle_privacy_loss_period_max_epsilon"
        return self.registry.get_sample_value(name) or 0.0

    def model_period_loss(self, model: str) -> tuple[float, float]:
        """The (epsilon, delta) every vehicle has spent over the period under ``model``, as
        last exported ((0, 0): no window stored yet)."""
        labels = {"privacy_model": model}
        epsilon = self.registry.get_sample_value("stream_dp_privacy_model_period_epsilon", labels)
        delta = self.registry.get_sample_value("stream_dp_privacy_model_period_delta", labels)
        return epsilon or 0.0, delta or 0.0

    def set_model_loss(self, summary: dict[str, Any]) -> None:
        """A secret-routes window summary's (epsilon, delta), per window and over the period
        so far (docs/math.md §14), labelled with the model that protected it."""
        model = str(summary["privacy_model"])
        self.model_window_epsilon.labels(model).set(summary["epsilon_window"])
        self.model_window_delta.labels(model).set(summary["delta_window"])
        self.model_period_epsilon.labels(model).set(summary["epsilon_period"])
        self.model_period_delta.labels(model).set(summary["delta_period"])

    def _add_model_metrics(self, r: CollectorRegistry) -> None:
        """The loss every vehicle takes under the secret-routes model (one value for all)."""

        def gauge(name: str, text: str) -> Gauge:
            return Gauge(f"stream_dp_privacy_model_{name}",
                         f"{text}, by the privacy model that protected it.",
                         ["privacy_model"], registry=r)  # fmt: skip

        self.model_window_epsilon = gauge(
            "window_epsilon", "Epsilon every vehicle spends on the last stored window"
        )
        self.model_window_delta = gauge(
            "window_delta", "Delta every vehicle spends on the last stored window"
        )
        self.model_period_epsilon = gauge(
            "period_epsilon",
            "Epsilon every vehicle has spent over the budget period so far (the period's "
            "windows composed, the last stored window included)",
        )
        self.model_period_delta = gauge(
            "period_delta", "Delta every vehicle has spent over the budget period so far"
        )

    def _add_stream_metrics(self, r: CollectorRegistry) -> None:
        """Readings, windows, latency, watermark, readiness, parameters."""
        self.readings = Counter(
            "stream_dp_readings_total",
            "Readings seen, by outcome (accepted, invalid, late).",
            ["outcome"],
            registry=r,
        )
        self.readings_after_release = Counter(
            "stream_dp_readings_dropped_after_release_total",
            "Accepted readings whose window had been released without their partition "
            "(it had reported itself idle): dropped.",
            registry=r,
        )
        self.windows_released = Counter(
            "stream_dp_windows_released_total", "Windows released (each exactly once).", registry=r
        )
        self.release_failures = Counter(
            "stream_dp_release_failures_total",
            "Windows whose release computation raised, stored by this process: published as "
            "failed (summary only, no cells) and charged to the budget as if released.",
            registry=r,
        )
        self.cells_released = Counter(
            "stream_dp_cells_released_total", "Cell records released.", registry=r
        )
        self.release_latency = Histogram(
            "stream_dp_release_latency_seconds",
            "Time from the releaser finding a window complete (every partition's partial in, "
            "or its watermark past the window) to the window's records being published.",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=r,
        )
        self.watermark = Gauge(
            "stream_dp_watermark_timestamp_seconds",
            "Lowest event-time watermark (largest event time seen minus grace) over this "
            "worker's partitions, Unix seconds: windows ending before it are closed here.",
            registry=r,
        )
        self.consumer_lag = Gauge(
            "stream_dp_readings_consumer_lag",
            "Per readings partition this worker owns: messages between the partition's end "
            "(as the broker last reported it in a fetch) and what this worker has applied.",
            ["partition"],
            registry=r,
        )
        self.ready = Gauge(
            "stream_dp_ready", "1 once state recovery has finished, else 0.", registry=r
        )
        self.info = Info(
            "stream_dp", "Release parameters: epsilon, upper, resolution, window.", registry=r
        )

    def _add_privacy_metrics(self, r: CollectorRegistry) -> None:
        """Privacy loss, budget, CLIP-USER's suppression and error bound."""
        self.window_privacy_loss = Gauge(
            "stream_dp_window_privacy_loss_epsilon",
            "K*epsilon: worst-case privacy loss of one vehicle in the last released window.",
            registry=r,
        )
        self.window_privacy_loss_unclipped = Gauge(
            "stream_dp_window_privacy_loss_unclipped_epsilon",
            "G1*epsilon: what the last window would have cost without CLIP-USER.",
            registry=r,
        )
        self.privacy_budget_spent = Counter(
            "stream_dp_privacy_budget_spent_epsilon_total",
            "Worst-case privacy loss (sum of K*epsilon) of the windows this process released; "
            "a window whose releaser died before counting it is missing here: the gauge "
            "stream_dp_privacy_budget_cumulative_epsilon is the authoritative total.",
            registry=r,
        )
        self.privacy_budget_spent_all = Gauge(
            "stream_dp_privacy_budget_cumulative_epsilon",
            "Sum of K*epsilon over every window in the durable release log, as of this "
            "worker's last release or rebuild: the whole history, restored after restarts "
            "(take max() across workers).",
            registry=r,
        )
        self.error_bound = Gauge(
            "stream_dp_window_error_bound",
            "Data-independent worst-case error bound E of the last released window.",
            registry=r,
        )
        self.suppressed_pairs = Counter(
            "stream_dp_suppressed_pairs_total",
            "(cell, vehicle) pairs suppressed by CLIP-USER.",
            registry=r,
        )
        self.vehicle_loss_period_max = Gauge(
            "stream_dp_vehicle_privacy_loss_period_max_epsilon",
            "Largest loss of any one vehicle over the rolling budget period (summed epsilon; "
            "under a vehicle budget each vehicle's own share of each cell's epsilon) "
            "(the ledger's actual per-vehicle losses; the cap is in stream_dp_info).",
            registry=r,
        )
        self.vehicle_budget = Gauge(
            "stream_dp_vehicle_budget_epsilon",
            "The promise: the per-vehicle budget B (epsilon per budget period, issue 25) that "
            "no vehicle's loss over the rolling period may exceed; 0 without one.",
            registry=r,
        )
        self.vehicle_loss_period_max_pld = Gauge(
            "stream_dp_vehicle_privacy_loss_period_max_epsilon_pld",
            "The same vehicle's loss by the PLD accountant: epsilon at accounting_delta "
            "(absent without the optional dp-accounting package).",
            registry=r,
        )
        self.vehicle_delta_period_max = Gauge(
            "stream_dp_vehicle_privacy_loss_period_max_delta",
            "The delta of that vehicle over the rolling period: its cells times delta with the "
            "(epsilon, delta)-DP cummings mean, 0 with every other (pure epsilon-DP) mechanism.",
            registry=r,
        )
        self.budget_withheld_pairs = Counter(
            "stream_dp_budget_withheld_pairs_total",
            "(cell, vehicle) pairs left out because the vehicle's budget was spent.",
            registry=r,
        )
        self.budget_limited_vehicles = Gauge(
            "stream_dp_budget_limited_vehicles",
            "Vehicles limited by their remaining budget in the last released window.",
            registry=r,
        )

    def _add_held_metrics(self, r: CollectorRegistry) -> None:
        """What released windows held to pool with later hours, apart from what they withheld."""
        self.readings_withheld = Counter(
            "stream_dp_readings_withheld_total",
            "Readings released windows dropped for good (missed the error target, or too old "
            "to pool): in no record, ever.",
            registry=r,
        )
        self.readings_held = Counter(
            "stream_dp_readings_held_total",
            "Readings released windows held to pool with a later window (spans), each counted "
            "once, by the window of its own hour; released or withheld later.",
            registry=r,
        )
        self.cells_withheld = Gauge(
            "stream_dp_cells_withheld",
            "Cells the last released window withheld (dropped for good).",
            registry=r,
        )
        self.cells_held = Gauge(
            "stream_dp_cells_held",
            "Cells the last released window held to pool with a later window (spans).",
            registry=r,
        )
        self.windows_planned = Counter(
            "stream_dp_windows_planned_total",
            "Released windows whose cells a vehicle budget's planner chose, by planner (rules, "
            "optimiser; budget_planner auto picks one by the window's pooled pairs).",
            ["planner"],
            registry=r,
        )
        for planner in WINDOW_PLANNERS:  # exported at 0 from the start
            self.windows_planned.labels(planner)
