"""Replayable readings from files: CSV, JSON Lines and tracktable ``.traj``, optionally gzipped.

Every reader yields dicts with exactly the keys of :data:`READING_FIELDS`: ``vehicle_id``
(str), ``ts`` (float, epoch seconds UTC), ``lat``, ``lon`` and ``speed`` (float, km/h).
Values are parsed, not validated: range checks and clamping belong to the ingest.
"""

from __future__ import annotations

import gzip
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

READING_FIELDS: tuple[str, ...] = ("vehicle_id", "ts", "lat", "lon", "speed")


class SourceError(ValueError):
    """A file that cannot be read as readings; names the file and (when known) the line."""

    def __init__(self, path: str | Path, line: int | None, reason: str) -> None:
        self.path = str(path)
        self.line = line
        self.reason = reason
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {reason}")


def open_text(path: str | Path) -> IO[str]:
    """Open ``path`` as UTF-8 text (minus any BOM), gunzipping it if the name ends in ``.gz``."""
    path = Path(path)
    if path.suffix.lower() == ".gz":
        return gzip.open(path, "rt", encoding="utf-8-sig", newline="")
    return path.open("r", encoding="utf-8-sig", newline="")


def to_epoch(value: object) -> float:
    """Epoch seconds from a number, a numeric string or an ISO 8601 / RFC 3339 string (naive = UTC).

    Raises ``ValueError`` for anything else, including non-finite numbers.
    """
    if isinstance(value, bool):
        raise ValueError(f"timestamp must be a number or a string, not {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            moment = datetime.fromisoformat(text)  # Python 3.11: RFC 3339 incl. "Z"
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            seconds = moment.timestamp()
    else:
        raise ValueError(f"timestamp must be a number or a string, not {value!r}")
    if not math.isfinite(seconds):
        raise ValueError(f"timestamp is not finite: {value!r}")
    return seconds


def _kind(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


def iter_readings(path: str | Path) -> Iterator[dict]:
    """An iterator over the readings of ``path``, choosing the parser by suffix.

    ``.csv``, ``.jsonl`` / ``.ndjson`` (streamed, file order) and ``.traj`` (loaded whole, sorted
    by ``(ts, vehicle_id)``), each optionally with ``.gz``. Malformed lines raise
    :class:`SourceError` naming the file and line.
    """
    path = Path(path)
    kind = _kind(path)
    if kind == ".csv":
        from stream_dp.sources.tabular import iter_csv

        return iter_csv(path)
    if kind in (".jsonl", ".ndjson"):
        from stream_dp.sources.tabular import iter_jsonl

        return iter_jsonl(path)
    if kind == ".traj":
        from stream_dp.sources.traj import read_traj

        return iter(read_traj(path))
    raise SourceError(
        path, None, "unknown file type; expected .csv, .jsonl, .ndjson or .traj (optionally .gz)"
    )


__all__ = ["READING_FIELDS", "SourceError", "iter_readings", "open_text", "to_epoch"]
