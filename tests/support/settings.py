"""Settings of a service under test: its own topics and app id under one prefix."""

from __future__ import annotations

from typing import Any

from stream_dp.config import Settings, load_settings

#: The fixed-resolution mode as it was the default before issue 26: every cell at
#: ``resolution``, half of epsilon on the variance, a fixed epsilon per cell (the budget
#: profile opted out, issue 34, also where a test then sets a target).
FIXED_MODE: dict[str, Any] = {
    "target_mean_error": "none",
    "variance_share": 0.5,
    "vehicle_budget": "none",
}

#: ``release``'s default mode before issue 34: accuracy-targeted cells at T 15 with a fixed
#: epsilon per cell and no vehicle budget (``--fixed-epsilon --target-mean-error 15``).
FIXED_EPSILON_MODE: dict[str, Any] = {"vehicle_budget": "none", "target_mean_error": 15.0}


def service_settings(prefix: str, **overrides: Any) -> Settings:
    """Settings whose app id and every topic name start with ``prefix`` (unique per test),
    a short idle time, resolution 7 and the fixed-resolution mode (:data:`FIXED_MODE`: the
    service tests' small data would release no targeted cell), then ``overrides``."""
    names = {
        "topic_readings": f"{prefix}.readings",
        "topic_dlq": f"{prefix}.readings.dlq",
        "topic_releases": f"{prefix}.releases",
        "topic_partials": f"{prefix}.partials",
        "topic_state": f"{prefix}.state",
        "topic_release_log": f"{prefix}.release-log",
    }
    values = {"app_id": prefix, "idle_close_seconds": 3.0, "resolution": 7, **FIXED_MODE, **names}
    values.update(overrides)
    return load_settings(**values)


def fixed_mode_settings(**overrides: Any) -> Settings:
    """Settings of the fixed-resolution mode (:data:`FIXED_MODE`), then ``overrides``; for
    tests about fixed cells or the released variance rather than the adaptive default."""
    return load_settings(**{**FIXED_MODE, **overrides})
