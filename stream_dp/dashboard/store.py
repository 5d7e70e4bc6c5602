"""Released windows as the dashboard shows them: records grouped by window, duplicates
(a window re-published after a restart carries the same ``release_id``) dropped.

Everything here is computed from the published records alone, so any subscriber of the
releases topic shows the same numbers. Pure (no Kafka, no asyncio): the topic follower and
the file loader feed it, the pages read it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from itertools import accumulate
from math import inf
from typing import Any

import h3

#: Windows kept in memory (two weeks of hourly windows); older ones are forgotten, but
#: their privacy loss stays in the cumulative total.
DEFAULT_MAX_WINDOWS = 336

#: Summary fields sent with the window index (those absent from a record are left out).
SUMMARY_FIELDS = (
    "window_end", "cells_released", "cells_withheld", "readings_withheld", "cells_held",
    "readings_held", "cells_observed", "n_vehicles", "n_readings", "K", "G1", "epsilon",
    "privacy_loss", "privacy_loss_unclipped", "error_bound", "mechanism", "resolution",
    "budget_cap", "budget_period_seconds",
    "vehicles_budget_limited", "pairs_withheld_budget", "readings_dropped_late", "delta",
    "status", "error", "privacy_model", "epsilon_window", "delta_window", "epsilon_period",
    "delta_period", "windows_in_period", "threshold_vehicles", "planned_by",
)  # fmt: skip


@lru_cache(maxsize=65536)
def cell_boundary(cell: str) -> tuple[tuple[float, float], ...]:
    """The hexagon (or pentagon) of an H3 cell of any resolution: ``(lat, lng)`` vertices,
    rounded to 1e-6 degrees (about 0.1 m)."""
    return tuple((round(lat, 6), round(lng, 6)) for lat, lng in h3.cell_to_boundary(cell))


def record_upper(record: Any) -> float | None:
    """The U a release record states (``upper``), or None when it carries none (records
    written before they stated it); a value that is not a positive finite number raises
    ``ValueError``."""
    if not isinstance(record, dict) or "upper" not in record:
        return None
    value = record["upper"]
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < inf:
        raise ValueError(f"upper must be a positive finite number, got {value!r}")
    return float(value)


def common_upper(records: list[Any], default: float) -> float:
    """The one U of ``records`` (``default`` for those that state none); ``ValueError``
    when they state different ones, as a file of two releases with different U would."""
    found = {record_upper(r) for r in records if isinstance(r, dict)}
    values = sorted({default if u is None else u for u in found})
    if len(values) > 1:
        shown = ", ".join(f"{u:g}" for u in values)
        raise ValueError(
            f"the records mix different U (upper: {shown}; a record without one counts as "
            f"{default:g}): draw each release from its own file"
        )
    return values[0] if values else default


@dataclass
class ReleasedWindow:
    start: str
    cells: dict[str, dict[str, Any]] = field(default_factory=dict)  # release_id -> record
    summary: dict[str, Any] | None = None
    version: int = 0

    @property
    def epoch(self) -> float:
        return _epoch(self.start)

    @property
    def upper(self) -> float | None:
        """The U the window's records state (its summary's, else a cell's), if any."""
        for record in [self.summary, *self.cells.values()]:
            if isinstance(record, dict) and isinstance(record.get("upper"), int | float):
                return float(record["upper"])
        return None


def _epoch(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


class ReleaseStore:
    """The released windows seen so far, newest ``max_windows`` kept."""

    def __init__(self, max_windows: int = DEFAULT_MAX_WINDOWS) -> None:
        if max_windows < 1:
            raise ValueError("max_windows must be >= 1")
        self.max_windows = max_windows
        #: Every window held, by its window_end (how a span's cells find their window).
        self.by_end: dict[str, ReleasedWindow] = {}
        self.version = 0
        self.duplicates = 0
        self.invalid = 0
        #: (window start epoch, privacy_loss) of summaries no longer held.
        self._forgotten: list[tuple[float, float]] = []

    def add(self, records: list[Any]) -> bool:
        """Add decoded records; True when anything new was stored."""
        changed = False
        for record in records:
            changed |= self._add_one(record)
        if changed:
            self._forget_old()
        return changed

    def _add_one(self, record: Any) -> bool:
        if not isinstance(record, dict) or not isinstance(record.get("window_start"), str):
            self.invalid += 1
            return False
        kind, release_id = record.get("type"), record.get("release_id")
        if kind not in ("cell", "window") or not isinstance(release_id, str):
            self.invalid += 1
            return False
        if kind == "cell" and not isinstance(record.get("cell"), str):
            self.invalid += 1
            return False
        start, end = record["window_start"], record.get("window_end")
        try:
            _epoch(start)
            _epoch(end if isinstance(end, str) else "")
            record_upper(record)
        except ValueError:
            self.invalid += 1
            return False
        # A window is filed under its end: a span's cells (vehicle budget) state the span's
        # first window as window_start, but are released with the window ending where they do.
        window = self.by_end.get(end)
        if window is None:
            window = self.by_end[end] = ReleasedWindow(start)
        if kind == "window":
            if window.summary is not None:
                self.duplicates += 1
                return False
            window.summary = record
            window.start = start  # a span's cell may have come first, with the span's start
        elif release_id in window.cells:
            self.duplicates += 1
            return False
        else:
            window.cells[release_id] = record
        self.version += 1
        window.version = self.version
        return True

    @property
    def windows(self) -> dict[str, ReleasedWindow]:
        """The windows held, by their window_start (a window whose summary has not arrived yet
        is listed under its first cell's start unless a window with a summary has it)."""
        out: dict[str, ReleasedWindow] = {}
        for window in sorted(self.by_end.values(), key=lambda w: w.summary is not None):
            out[window.start] = window
        return out

    def _forget_old(self) -> None:
        excess = len(self.by_end) - self.max_windows
        if excess <= 0:
            return
        for end in sorted(self.by_end, key=_epoch)[:excess]:
            window = self.by_end.pop(end)
            if window.summary is not None:
                lost = window_loss(window.summary)
                self._forgotten.append((window.epoch, lost))

    def index(self) -> list[dict[str, Any]]:
        """The released windows (those whose summary arrived), oldest first, each with its
        summary fields and the budget as of that window:

        - ``cumulative_epsilon``: sum of K·ε over every window up to this one (the
          ``stream_dp_privacy_budget_cumulative_epsilon`` gauge's value then);
        - ``period_loss_bound``: sum of K·ε over the windows of the rolling budget period
          ending with this one (K·ε bounds any one vehicle's loss in a window), or the
          per-vehicle cap when that is smaller.
        """
        held = [w for w in self.windows.values() if w.summary is not None]
        losses = sorted(
            [(began, lost, None) for began, lost in self._forgotten]
            + [(w.epoch, window_loss(w.summary or {}), w) for w in held],
            key=lambda item: item[0],
        )
        starts = [began for began, _, _ in losses]
        prefix = list(accumulate((lost for _, lost, _ in losses), initial=0.0))
        out: list[dict[str, Any]] = []
        for i, (began, _, window) in enumerate(losses):
            if window is None:
                continue
            summary = window.summary or {}
            entry: dict[str, Any] = {
                "window_start": window.start,
                "version": window.version,
                "cells_received": len(window.cells),
                "cumulative_epsilon": round(prefix[i + 1], 9),
            }
            entry.update({k: summary[k] for k in SUMMARY_FIELDS if k in summary})
            if window.upper is not None:
                entry["upper"] = window.upper
            period = summary.get("budget_period_seconds")
            if isinstance(period, int | float) and period > 0:
                first = bisect_right(starts, began - period)  # windows inside the period
                bound = prefix[i + 1] - prefix[first]
                cap = summary.get("budget_cap")
                if isinstance(cap, int | float):
                    bound = min(bound, float(cap))
                entry["period_loss_bound"] = round(bound, 9)
            out.append(entry)
        return out

    def cells(self, start: str) -> list[dict[str, Any]] | None:
        """The released cells of a window, each with its ``boundary`` ([lat, lng] vertices)
        and ``resolution``; None for an unknown window."""
        window = self.windows.get(start)
        if window is None:
            return None
        return _drawable(window.cells.values())

    def cells_covering(self, start: str) -> list[dict[str, Any]]:
        """The released cells whose span ``[window_start, window_end)`` covers the time
        ``start`` (a span released at a later window included), drawable as :meth:`cells`'."""
        at = _epoch(start)
        return _drawable(
            record
            for window in self.by_end.values()
            for record in window.cells.values()
            if _epoch(record["window_start"]) <= at < _epoch(record["window_end"])
        )


def window_loss(summary: dict[str, Any]) -> float:
    """A window's loss in the cumulative sums: K·ε (public occupancy), or the ε every vehicle
    spends on it (secret routes, docs/math.md §14; summed, a bound of the composed ε)."""
    return float(summary.get("privacy_loss", summary.get("epsilon_window", 0.0)))


def _drawable(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``records`` of H3 cells, each with its ``boundary`` and ``resolution``."""
    out = []
    for record in records:
        cell = record["cell"]
        try:
            boundary = cell_boundary(cell)
            resolution = h3.get_resolution(cell)
        except (ValueError, h3.H3BaseException):
            continue  # not an H3 cell: nothing to draw
        out.append({**record, "resolution": resolution, "boundary": boundary})
    return out
