"""CSV and JSON Lines readings, streamed line by line.

Both formats carry the fields ``vehicle_id, ts, lat, lon, speed`` (other fields are ignored).
``ts`` is epoch seconds or an ISO 8601 / RFC 3339 string; naive timestamps are UTC.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator, Mapping
from pathlib import Path

import orjson

from stream_dp.sources import READING_FIELDS, SourceError, open_text, to_epoch


def _vehicle_id(value: object) -> str:
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"vehicle_id must be a non-empty string or an integer, not {value!r}")


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{name} must be a number, not {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{name} must be a number, not {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"{name} is not finite: {value!r}")
    return number


def to_reading(record: Mapping[str, object], path: Path, line: int) -> dict:
    """The five reading fields of ``record``, parsed; :class:`SourceError` if any is bad."""
    missing = [name for name in READING_FIELDS if record.get(name) is None]
    if missing:
        raise SourceError(path, line, f"missing {', '.join(missing)}")
    try:
        return {
            "vehicle_id": _vehicle_id(record["vehicle_id"]),
            "ts": to_epoch(record["ts"]),
            "lat": _number("lat", record["lat"]),
            "lon": _number("lon", record["lon"]),
            "speed": _number("speed", record["speed"]),
        }
    except ValueError as exc:
        raise SourceError(path, line, str(exc)) from None


def iter_jsonl(path: str | Path) -> Iterator[dict]:
    """Readings of a JSON Lines file, one object per line; blank lines are skipped."""
    path = Path(path)
    with open_text(path) as stream:
        for line_number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise SourceError(path, line_number, f"invalid JSON: {exc}") from None
            if not isinstance(record, dict):
                raise SourceError(path, line_number, "expected a JSON object")
            yield to_reading(record, path, line_number)


def iter_csv(path: str | Path) -> Iterator[dict]:
    """Readings of a CSV file whose header names at least the five reading fields."""
    path = Path(path)
    with open_text(path) as stream:
        reader = csv.DictReader(stream)
        try:
            header = reader.fieldnames
        except csv.Error as exc:
            raise SourceError(path, reader.line_num, f"invalid CSV: {exc}") from None
        if not header:
            raise SourceError(path, 1, "empty file: no CSV header")
        reader.fieldnames = [name.strip() for name in header]
        absent = [name for name in READING_FIELDS if name not in reader.fieldnames]
        if absent:
            raise SourceError(path, 1, f"CSV header lacks {', '.join(absent)}")
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise SourceError(path, reader.line_num, f"invalid CSV: {exc}") from None
            if None in row:
                raise SourceError(path, reader.line_num, "more fields than the header")
            yield to_reading(row, path, reader.line_num)
