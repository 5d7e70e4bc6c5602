"""Replayable readings from files: CSV, JSON Lines and tracktable ``.traj``, optionally gzipped.

Every reader yields dicts with exactly the keys of :data:`READING_FIELDS`: ``vehicle_id``
(str), ``ts`` (float, epoch seconds UTC), ``lat``, ``lon`` and ``speed`` (float, km/h).
Values are parsed, not validated: range checks and clamping belong to the ingest.

:func:`numbered_readings` gives every reading with its line and a bad row as a
:class:`SourceError` with its :class:`RejectReason`, so a caller can skip it (``stream-dp
release``); :func:`iter_readings` raises on the first bad row instead.
"""

from __future__ import annotations

import gzip
import math
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from stream_dp.windows.reject_reasons import RejectReason

READING_FIELDS: tuple[str, ...] = ("vehicle_id", "ts", "lat", "lon", "speed")


class SourceError(ValueError):
    """A file that cannot be read as readings; names the file and (when known) the line.

    ``code`` is the :class:`RejectReason` of a bad row (None when the whole file is unusable:
    unknown type, no header)."""

    def __init__(
        self, path: str | Path, line: int | None, reason: str, code: RejectReason | None = None
    ) -> None:
        self.path = str(path)
        self.line = line
        self.reason = reason
        self.code = code
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {reason}")


@dataclass
class LineTally:
    """Lines of an input file that hold no reading and are no error: ``blank`` lines
    (empty or white space only; skipped, counted for the run's summary)."""

    blank: int = 0


def open_text(path: str | Path, errors: str = "strict") -> IO[str]:
    """Open ``path`` as UTF-8 text (minus any BOM), gunzipping it if the name ends in ``.gz``."""
    path = Path(path)
    if path.suffix.lower() == ".gz":
        return gzip.open(path, "rt", encoding="utf-8-sig", errors=errors, newline="")
    return path.open("r", encoding="utf-8-sig", errors=errors, newline="")


def text_lines(path: str | Path) -> Iterator[str]:
    """The lines of ``path`` (:func:`open_text`), for the readers of readings.

    Bytes that are not UTF-8 stay in their line as surrogate escapes, so the reader rejects
    that line alone (:func:`is_utf8`). A file that cannot be read on (truncated or corrupt gzip
    data, an I/O error) raises a :class:`SourceError` without a line: nothing after it is read.
    """
    path = Path(path)
    read = 0
    try:
        with open_text(path, errors="surrogateescape") as stream:
            for line in stream:
                read += 1
                yield line
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        why = "truncated or corrupt gzip data"
        raise SourceError(path, None, f"cannot read {_after(read)}: {why}") from exc
    except OSError as exc:
        raise SourceError(path, None, f"cannot read {_after(read)}: {exc.strerror or exc}") from exc


def _after(lines: int) -> str:
    return f"after line {lines}" if lines else "it"


def is_utf8(text: str) -> bool:
    """Whether ``text`` (a line of :func:`text_lines`) was valid UTF-8: no surrogate escapes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def not_utf8_error(path: str | Path, line: int) -> SourceError:
    """The bad-row error of a line holding bytes that are not UTF-8."""
    return SourceError(path, line, "not UTF-8 text", RejectReason.NOT_UTF8)


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


#: One item of :func:`numbered_readings`: the line (of a ``.traj``, the trajectory's line)
#: and the parsed reading, or the :class:`SourceError` of a bad row.
Numbered = tuple[int, "dict | SourceError"]


def numbered_readings(path: str | Path, tally: LineTally | None = None) -> Iterator[Numbered]:
    """The readings of ``path`` with their line numbers, choosing the parser by suffix.

    ``.csv``, ``.jsonl`` / ``.ndjson`` (streamed, file order) and ``.traj`` (loaded whole, sorted
    by ``(ts, vehicle_id)``; its bad lines come first), each optionally with ``.gz``. A bad row
    is yielded as a :class:`SourceError` with a ``code``; an unusable file (unknown type, no
    CSV header) raises it. Blank lines are skipped and counted in ``tally``.
    """
    path = Path(path)
    kind = _kind(path)
    tally = LineTally() if tally is None else tally
    if kind == ".csv":
        from stream_dp.sources.tabular import numbered_csv

        return numbered_csv(path, tally)
    if kind in (".jsonl", ".ndjson"):
        from stream_dp.sources.tabular import numbered_jsonl

        return numbered_jsonl(path, tally)
    if kind == ".traj":
        from stream_dp.sources.traj import numbered_traj

        return iter(numbered_traj(path, tally))
    raise SourceError(
        path, None, "unknown file type; expected .csv, .jsonl, .ndjson or .traj (optionally .gz)"
    )


def iter_readings(path: str | Path) -> Iterator[dict]:
    """The readings of ``path`` (:func:`numbered_readings`); raises the first bad row's
    :class:`SourceError`, naming the file and line."""
    if _kind(Path(path)) == ".traj":  # loaded whole: an iterator that knows its length
        from stream_dp.sources.traj import read_traj

        return iter(read_traj(path))
    numbered = numbered_readings(path)  # an unusable file raises here, before iterating
    return raise_on_bad_row(numbered)


def raise_on_bad_row(numbered: Iterator[Numbered]) -> Iterator[dict]:
    """The readings of ``numbered``; raises its first bad row's :class:`SourceError`."""
    for _line, item in numbered:
        if isinstance(item, SourceError):
            raise item
        yield item


__all__ = [
    "READING_FIELDS",
    "LineTally",
    "Numbered",
    "SourceError",
    "iter_readings",
    "numbered_readings",
    "open_text",
    "raise_on_bad_row",
    "to_epoch",
]
