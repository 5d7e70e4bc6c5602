"""The occupancy CSV of ``stream-dp plan``: ``cell,vehicle,count`` rows (plain or ``.gz``).

The header names the three columns in any order (case-insensitive; other columns are
ignored); blank lines are skipped; repeated ``(cell, vehicle)`` rows are summed. A file
without quoting or blank rows is read column-wise (:func:`_read_columns`: one split of the
whole text, bulk checks); any other file is read row by row by the exact parser, whose
one-line :class:`OccupancyFileError` names the file and the line. Both give the same
:class:`~stream_dp.dp.occupancy.Occupancy`.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
import zlib
from collections.abc import Iterator
from itertools import repeat
from pathlib import Path
from typing import Any, TextIO

from stream_dp.dp.occupancy import Occupancy
from stream_dp.sources import open_text

REQUIRED_COLUMNS = ("cell", "vehicle", "count")
MAX_COUNT = 10**12
_COUNT_PATTERN = re.compile(r"[0-9]+")


class OccupancyFileError(ValueError):
    """A bad occupancy file; the message is one line naming the file (and the line)."""


def read_occupancy_csv(path: str | Path) -> Occupancy:
    """Read an occupancy CSV (module docstring); :class:`OccupancyFileError` if it is bad."""
    label = str(path)
    try:
        with open_text(Path(path)) as handle:
            text = handle.read()
    except (FileNotFoundError, IsADirectoryError) as exc:
        raise OccupancyFileError(f"FILE: cannot read {label}: {exc.strerror}") from None
    except gzip.BadGzipFile:
        raise OccupancyFileError(f"{label}: not a gzip file (the name ends in .gz)") from None
    except (EOFError, zlib.error):
        raise OccupancyFileError(f"{label}: truncated or corrupt gzip data") from None
    except UnicodeDecodeError:
        raise OccupancyFileError(f"{label}: not UTF-8 text") from None
    except OSError as exc:
        raise OccupancyFileError(f"FILE: cannot read {label}: {exc.strerror or exc}") from None
    columns = _read_columns(text)
    if columns is None:  # quoted, or something to report: the exact parser names the line
        columns = _exact_columns(text, label)
    return Occupancy.from_arrays(*columns)


Columns = tuple[list[str], list[str], list[int]]


def _read_columns(text: str) -> Columns | None:
    """Cells, vehicles and counts of an unquoted file without blank rows that passes every
    check; None for anything else (then the exact parser reads it: the same result, or the
    error naming the line). Column-wise: one split of the whole text, C-level loops only."""
    if '"' in text or text.count("\r") != text.count("\r\n"):
        return None
    body = text.replace("\r\n", "\n").removesuffix("\n")
    lines = body.split("\n")
    names = lines[0].split(",")
    normalized = [name.strip().lower() for name in names]
    if len(lines) < 2 or any(normalized.count(c) != 1 for c in REQUIRED_COLUMNS):
        return None
    if set(map(str.count, lines, repeat(","))) != {len(names) - 1}:
        return None  # a row with another number of fields, or a blank one
    fields = body[len(lines[0]) + 1 :].replace("\n", ",").split(",")
    cell, vehicle, count = (normalized.index(column) for column in REQUIRED_COLUMNS)
    width = len(names)
    cells = list(map(str.strip, fields[cell::width]))
    vehicles = list(map(str.strip, fields[vehicle::width]))
    counts = list(map(str.strip, fields[count::width]))
    if not (all(cells) and all(vehicles)):
        return None
    if not ("".join(cells).isprintable() and "".join(vehicles).isprintable()):
        return None
    digits = "".join(counts)
    if not (all(counts) and digits.isascii() and digits.isdigit()):
        return None
    if max(map(len, counts)) > 12:
        return None  # may exceed MAX_COUNT: checked row by row
    values = list(map(int, counts))
    if min(values) <= 0:
        return None
    return cells, vehicles, values


def _exact_columns(text: str, label: str) -> Columns:
    """The row-by-row parser (``csv`` module, every check with its line number)."""
    triples = list(_parse_rows(io.StringIO(text, newline=""), label))
    cells, vehicles, counts = zip(*triples, strict=True)
    return list(cells), list(vehicles), list(counts)


def _parse_rows(handle: TextIO, label: str) -> Iterator[tuple[str, str, int]]:
    reader = csv.reader(handle, strict=True)
    rows = _numbered_rows(reader, label)
    header = next(rows, None)
    if header is None:
        raise OccupancyFileError(f"{label}: empty file (expected a header cell,vehicle,count)")
    header_line, names = header
    positions = _column_positions(names, label, header_line)
    n_data = 0
    for line, row in rows:
        if len(row) != len(names):
            raise OccupancyFileError(
                f"{label} line {line}: expected {len(names)} fields, got {len(row)}"
            )
        cell = _parse_id("cell", row[positions["cell"]], label, line)
        vehicle = _parse_id("vehicle", row[positions["vehicle"]], label, line)
        yield cell, vehicle, _parse_count(row[positions["count"]], label, line)
        n_data += 1
    if n_data == 0:
        raise OccupancyFileError(f"{label}: no data rows after the header")


def _numbered_rows(reader: Any, label: str) -> Iterator[tuple[int, list[str]]]:
    """Non-blank rows of a ``csv.reader`` with the (last physical) line number of each."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise OccupancyFileError(
                f"{label} line {reader.line_num}: malformed CSV: {exc}"
            ) from None
        if row and any(field.strip() for field in row):
            yield reader.line_num, row


def _column_positions(names: list[str], label: str, line: int) -> dict[str, int]:
    normalized = [name.strip().lower() for name in names]
    positions: dict[str, int] = {}
    for column in REQUIRED_COLUMNS:
        found = [i for i, name in enumerate(normalized) if name == column]
        if not found:
            raise OccupancyFileError(
                f"{label} line {line}: missing column {column!r} in the header"
                f" (need cell,vehicle,count)"
            )
        if len(found) > 1:
            raise OccupancyFileError(
                f"{label} line {line}: duplicate column {column!r} in the header"
            )
        positions[column] = found[0]
    return positions


def _parse_id(kind: str, text: str, label: str, line: int) -> str:
    stripped = text.strip()
    if not stripped:
        raise OccupancyFileError(f"{label} line {line}: empty {kind} id")
    if not stripped.isprintable():
        raise OccupancyFileError(f"{label} line {line}: {kind} id contains a control character")
    return stripped


def _parse_count(text: str, label: str, line: int) -> int:
    stripped = text.strip()
    if not _COUNT_PATTERN.fullmatch(stripped) or int(stripped) <= 0:
        raise OccupancyFileError(
            f"{label} line {line}: count must be a positive integer, got {text!r}"
        )
    value = int(stripped)
    if value > MAX_COUNT:
        raise OccupancyFileError(f"{label} line {line}: count {value} exceeds {MAX_COUNT}")
    return value
