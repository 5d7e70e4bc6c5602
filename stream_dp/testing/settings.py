"""Settings of a service under test: its own topics and app id under one prefix."""

from __future__ import annotations

from typing import Any

from stream_dp.config import Settings, load_settings


def service_settings(prefix: str, **overrides: Any) -> Settings:
    """Settings whose app id and every topic name start with ``prefix`` (unique per test),
    a short idle time and resolution 7, then ``overrides``."""
    names = {
        "topic_readings": f"{prefix}.readings",
        "topic_dlq": f"{prefix}.readings.dlq",
        "topic_releases": f"{prefix}.releases",
        "topic_partials": f"{prefix}.partials",
        "topic_state": f"{prefix}.state",
        "topic_release_log": f"{prefix}.release-log",
    }
    values = {"app_id": prefix, "idle_close_seconds": 3.0, "resolution": 7, **names}
    values.update(overrides)
    return load_settings(**values)
