"""The real sample: AIS vessel tracks of New York Harbor, 1-7 December 2020 (tracktable-data).

The week ships inside the package as ``stream_dp/data/nyharbor_2020-12_week.traj.gz``: the
``tracktable-data`` file gzipped, byte for byte (licence in ``stream_dp/data/NOTICE.md``), so a
slim ``pip install .`` replays it without the 279 MB ``tracktable-data`` package.
"""

from __future__ import annotations

import importlib.resources
import math
from pathlib import Path

from stream_dp.sources.traj import read_traj

SAMPLE_FILE = "nyharbor_2020-12_week.traj.gz"


def sample_path() -> Path:
    """The shipped week of New York Harbor AIS tracks."""
    return Path(str(importlib.resources.files("stream_dp").joinpath("data", SAMPLE_FILE)))


def load_sample(hours: int | None = None) -> list[dict]:
    """Readings of the sample sorted by ``(ts, vehicle_id)``, optionally only the first ``hours``.

    Hours count from the start of the UTC hour of the first reading, so each kept window is whole.
    """
    if hours is not None and hours <= 0:
        raise ValueError(f"hours must be positive, got {hours}")
    readings = read_traj(sample_path())
    if hours is None or not readings:
        return readings
    end = math.floor(readings[0]["ts"] / 3600.0) * 3600.0 + hours * 3600.0
    return [r for r in readings if r["ts"] < end]
