"""CSV and JSON Lines readings, streamed line by line.

Both formats carry the fields ``vehicle_id, ts, lat, lon, speed`` (other fields are ignored).
``ts`` is epoch seconds or an ISO 8601 / RFC 3339 string; naive timestamps are UTC.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator, Mapping
from contextlib import closing
from pathlib import Path

import orjson

from stream_dp.sources import (
    READING_FIELDS,
    LineTally,
    Numbered,
    SourceError,
    is_utf8,
    not_utf8_error,
    raise_on_bad_row,
    text_lines,
    to_epoch,
)
from stream_dp.windows.reject_reasons import RejectReason


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
    missing = [name for name in READING_FIELDS if name not in record]
    if missing:
        raise SourceError(path, line, f"missing {', '.join(missing)}", RejectReason.MISSING_FIELD)
    code = RejectReason.BAD_VEHICLE_ID
    try:
        vehicle = _vehicle_id(record["vehicle_id"])
        code = RejectReason.BAD_TS
        ts = to_epoch(record["ts"])
        code = RejectReason.NOT_A_NUMBER
        return {
            "vehicle_id": vehicle,
            "ts": ts,
            "lat": _number("lat", record["lat"]),
            "lon": _number("lon", record["lon"]),
            "speed": _number("speed", record["speed"]),
        }
    except ValueError as exc:
        detail = str(exc) if code != RejectReason.BAD_TS else f"ts: {exc}"
        raise SourceError(path, line, detail, code) from None


def _parsed(record: Mapping[str, object], path: Path, line: int) -> Numbered:
    try:
        return line, to_reading(record, path, line)
    except SourceError as exc:
        return line, exc


def numbered_jsonl(path: str | Path, tally: LineTally | None = None) -> Iterator[Numbered]:
    """Readings of a JSON Lines file, one object per line, with their line numbers; blank
    lines are skipped (counted in ``tally``), a bad line comes as a :class:`SourceError`."""
    path = Path(path)
    with closing(text_lines(path)) as lines:
        yield from _numbered_json_lines(path, lines, LineTally() if tally is None else tally)


def _numbered_json_lines(path: Path, lines: Iterator[str], tally: LineTally) -> Iterator[Numbered]:
    for line_number, line in enumerate(lines, start=1):
        if not line.strip():
            tally.blank += 1
            continue
        if not is_utf8(line):
            yield line_number, not_utf8_error(path, line_number)
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            detail = f"invalid JSON: {exc}"
            yield line_number, SourceError(path, line_number, detail, RejectReason.NOT_JSON)
            continue
        if not isinstance(record, dict):
            detail, code = "expected a JSON object", RejectReason.NOT_AN_OBJECT
            yield line_number, SourceError(path, line_number, detail, code)
            continue
        yield _parsed(record, path, line_number)


def numbered_csv(path: str | Path, tally: LineTally | None = None) -> Iterator[Numbered]:
    """Readings of a CSV file whose header names at least the five reading fields, with
    their line numbers; a bad row comes as a :class:`SourceError` (the header repeated as
    :attr:`RejectReason.REPEATED_HEADER`), a bad header raises it; blank lines are skipped
    and counted in ``tally``."""
    path = Path(path)
    tally = LineTally() if tally is None else tally
    with closing(text_lines(path)) as lines:
        reader = csv.reader(lines)
        header = _csv_header(path, reader)
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                line, code = reader.line_num, RejectReason.MALFORMED_ROW
                yield line, SourceError(path, line, f"invalid CSV: {exc}", code)
                continue
            if not row or (len(row) == 1 and not row[0].strip()):
                tally.blank += 1
                continue
            yield reader.line_num, _csv_row(path, reader.line_num, header, row)


def _csv_header(path: Path, reader: Iterator[list[str]]) -> list[str]:
    """The header's field names (stripped); :class:`SourceError` for an unusable header."""
    try:
        header = next(reader, [])
    except csv.Error as exc:
        raise SourceError(path, 1, f"invalid CSV: {exc}") from None
    if not header:
        raise SourceError(path, 1, "empty file: no CSV header")
    if not all(is_utf8(name) for name in header):
        raise SourceError(path, 1, "CSV header is not UTF-8 text")
    names = [name.strip() for name in header]
    absent = [name for name in READING_FIELDS if name not in names]
    if absent:
        raise SourceError(path, 1, f"CSV header lacks {', '.join(absent)}")
    return names


def _csv_row(path: Path, line: int, header: list[str], row: list[str]) -> dict | SourceError:
    """One CSV row as a reading, or the :class:`SourceError` of a bad one."""
    if not all(is_utf8(value) for value in row):
        return not_utf8_error(path, line)
    if len(row) > len(header):
        return SourceError(path, line, "more fields than the header", RejectReason.MALFORMED_ROW)
    if [value.strip() for value in row] == header:
        detail = "the header row again (files joined with their headers?)"
        return SourceError(path, line, detail, RejectReason.REPEATED_HEADER)
    present = dict(zip(header, row, strict=False))  # a short row lacks its last fields
    return _parsed(present, path, line)[1]


def iter_jsonl(path: str | Path) -> Iterator[dict]:
    """Readings of a JSON Lines file; raises the first bad line's :class:`SourceError`."""
    return raise_on_bad_row(numbered_jsonl(path))


def iter_csv(path: str | Path) -> Iterator[dict]:
    """Readings of a CSV file; raises the first bad row's :class:`SourceError`."""
    return raise_on_bad_row(numbered_csv(path))
