"""Wire format of the internal topics (orjson; vehicle ids stay on internal topics only).

- state topic (partition-aligned with the readings): ``delta`` records (a batch's state
  delta, the last input offset it covers, the partition's largest event time and late
  counts) and ``close`` records (a window was flushed to the partials topic).
- partials topic (one partition): ``partial`` records (a partition's final state of a
  window) and ``progress`` records (a partition's watermark; +inf when idle).
- release-log topic: the stored copy of each window's release, written before publishing.

Large payloads (a batch's delta, a window's partial, a window's release) are split into
``parts`` records of at most :data:`ROWS_PER_PART` rows, so no record nears Kafka's default
1 MB limit. Parts of one payload are consecutive in one partition and share an ``id``; a
payload counts only once its last part is read (:class:`PartAssembler`), so a crash in the
middle of writing one leaves nothing half-applied.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from stream_dp.window_state import WindowPairs, pairs_from_rows, pairs_to_rows

INF = "inf"
#: Rows per record part: a row with a full 64-reading prefix is ~2.5 kB of JSON.
ROWS_PER_PART = 256


def _wm(value: float) -> float | str:
    return INF if math.isinf(value) and value > 0 else value


def _wm_back(value: Any) -> float:
    if value == INF:
        return math.inf
    return float("-inf") if value is None else float(value)


def _late(late: dict[int, int]) -> dict[str, int]:
    return {str(k): v for k, v in late.items()}


def _late_back(late: dict[str, int] | None) -> dict[int, int]:
    return {int(k): int(v) for k, v in (late or {}).items()}


def _parts(rows: list[Any], size: int = ROWS_PER_PART) -> list[list[Any]]:
    return [rows[i : i + size] for i in range(0, len(rows), size)] or [[]]


def encode_delta(
    offset: int, max_ts: float, rows: dict[int, list[list[Any]]], late: dict[int, int]
) -> list[bytes]:
    """A batch's delta as parts; ``id`` = the last input offset it covers."""
    flat = [[window, row] for window, window_rows in rows.items() for row in window_rows]
    chunks = _parts(flat)
    return [
        orjson.dumps(
            {
                "kind": "delta",
                "id": offset,
                "part": i,
                "parts": len(chunks),
                "offset": offset,
                "max_ts": None if math.isinf(max_ts) else max_ts,
                "rows": chunk,
                "late": _late(late) if i == len(chunks) - 1 else {},
            }
        )
        for i, chunk in enumerate(chunks)
    ]


def encode_close(window_start: int, forced: bool) -> bytes:
    return orjson.dumps({"kind": "close", "window": window_start, "forced": forced})


def encode_partial(
    window_start: int, partition: int, pairs: WindowPairs, attempt: str
) -> list[bytes]:
    """A partition's partial state of a window as parts; ``attempt`` tells a re-send after a
    crash apart from the first (the coordinator keeps the first complete one)."""
    chunks = _parts(pairs_to_rows(pairs))
    return [
        orjson.dumps(
            {
                "kind": "partial",
                "id": f"{window_start}/{partition}/{attempt}",
                "part": i,
                "parts": len(chunks),
                "window": window_start,
                "partition": partition,
                "rows": chunk,
            }
        )
        for i, chunk in enumerate(chunks)
    ]


def encode_release(release_obj: dict[str, Any]) -> list[bytes]:
    """A window's release for the release log, as parts (cells split, summary in the last)."""
    chunks = _parts(release_obj["cells"])
    start = release_obj["window_start"]
    return [
        orjson.dumps(
            {
                "kind": "release",
                "id": str(start),
                "part": i,
                "parts": len(chunks),
                "window_start": start,
                "cells": chunk,
                "summary": release_obj["summary"] if i == len(chunks) - 1 else None,
            }
        )
        for i, chunk in enumerate(chunks)
    ]


def encode_progress(partition: int, watermark: float, late: dict[int, int]) -> bytes:
    return orjson.dumps(
        {"kind": "progress", "partition": partition, "watermark": _wm(watermark),
         "late": _late(late)}
    )  # fmt: skip


def decode(value: bytes) -> dict[str, Any]:
    """One record as written (parts are assembled by :class:`PartAssembler`)."""
    return orjson.loads(value)


class PartAssembler:
    """Collects the parts of multi-part payloads, read in partition order.

    ``add`` returns the whole payload (the parts' records, in order) when its last part
    arrives, else None. Parts of an unfinished payload are dropped when another payload with
    the same key starts (the writer crashed and began again).
    """

    def __init__(self) -> None:
        self._pending: dict[tuple[str, str], list[dict[str, Any]]] = {}

    def add(self, record: dict[str, Any]) -> list[dict[str, Any]] | None:
        key = (record["kind"], str(record["id"]))
        if record["part"] == 0:
            self._pending[key] = []
        parts = self._pending.get(key)
        if parts is None or len(parts) != record["part"]:
            return None  # a part without its beginning: an interrupted write
        parts.append(record)
        if len(parts) < record["parts"]:
            return None
        del self._pending[key]
        return parts


def delta_payload(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Windows, offset, max event time and late counts of an assembled delta."""
    windows: dict[int, list[list[Any]]] = {}
    for part in parts:
        for window, row in part["rows"]:
            windows.setdefault(int(window), []).append(row)
    last = parts[-1]
    return {
        "offset": last["offset"],
        "max_ts": _wm_back(last["max_ts"]),
        "windows": {w: pairs_from_rows(rows) for w, rows in windows.items()},
        "late": _late_back(last.get("late")),
    }


def partial_payload(parts: list[dict[str, Any]]) -> tuple[int, int, list[list[Any]]]:
    """Window, partition and the partial's rows (kept as rows: the release is columnar)."""
    rows = [row for part in parts for row in part["rows"]]
    return parts[0]["window"], parts[0]["partition"], rows


def release_payload(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "window_start": parts[0]["window_start"],
        "cells": [cell for part in parts for cell in part["cells"]],
        "summary": parts[-1]["summary"],
    }


def progress_payload(record: dict[str, Any]) -> tuple[int, float, dict[int, int]]:
    return record["partition"], _wm_back(record["watermark"]), _late_back(record.get("late"))
