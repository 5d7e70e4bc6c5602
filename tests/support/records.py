"""Release records as a worker publishes them, for the dashboard and map tests."""

from __future__ import annotations

import uuid

HOUR = 3600


def hour_stamp(hour: int) -> str:
    """The RFC 3339 time of ``hour`` o'clock on 2020-12-01."""
    return f"2020-12-01T{hour:02d}:00:00Z"


def window_records(
    hour: int, cells: dict[str, float], loss: float, upper: float | None = None, **summary
) -> list[dict]:
    """Release records of the window at ``hour``: one per cell with that mean, then the
    summary with ``privacy_loss = loss`` and any other ``summary`` fields; every record
    states ``upper`` when given (records written before they carried it state none)."""
    common = {"schema_version": 1, "window_start": hour_stamp(hour),
              "window_end": hour_stamp(hour + 1), "resolution": 8, "epsilon": 0.5,
              "mechanism": "clip", "K": 2}  # fmt: skip
    if upper is not None:
        common["upper"] = upper
    out = [
        {
            **common,
            "type": "cell",
            "release_id": str(uuid.uuid4()),
            "cell": cell,
            "mean": mean,
            "variance": 1.0,
            "n_vehicles": 3,
            "n_readings": 9,
            "error_bound": 4.0,
        }  # fmt: skip
        for cell, mean in cells.items()
    ]
    out.append(
        {
            **common,
            "type": "window",
            "release_id": str(uuid.uuid4()),
            "privacy_loss": loss,
            "cells_released": len(cells),
            "budget_period_seconds": 3 * HOUR,
            **summary,
        }  # fmt: skip
    )
    return out
