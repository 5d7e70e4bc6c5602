"""The real sample: AIS vessel tracks of New York Harbor, 1-7 December 2020 (tracktable-data).

The full week comes from the PyPI package ``tracktable-data`` when it is installed; otherwise the
first-day extract shipped in ``stream_dp/data`` is used (see ``stream_dp/data/NOTICE.md``).
"""

from __future__ import annotations

import importlib.resources
import math
from pathlib import Path

from stream_dp.sources.traj import read_traj

PACKAGE = "tracktable_data"
PACKAGE_FILE = "python_example_data/NYHarbor_2020_12_first_week.traj"
EXTRACT_FILE = "nyharbor_2020-12-01.traj.gz"


def package_sample_path() -> Path | None:
    """The full-week file of the ``tracktable-data`` package, or ``None`` if not installed."""
    try:
        root = importlib.resources.files(PACKAGE)
    except ModuleNotFoundError:
        return None
    path = Path(str(root.joinpath(PACKAGE_FILE)))
    return path if path.is_file() else None


def extract_path() -> Path:
    """The first-day extract shipped with stream-dp."""
    return Path(str(importlib.resources.files("stream_dp").joinpath("data", EXTRACT_FILE)))


def sample_path() -> Path:
    """The full-week package file when installed, else the shipped extract."""
    return package_sample_path() or extract_path()


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
