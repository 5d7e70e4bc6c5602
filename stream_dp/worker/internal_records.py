"""Wire format of the internal topics (orjson; vehicle ids stay on internal topics only).

- state topic (partition-aligned with the readings): ``delta`` records (a batch's state
  delta, the last input offset it covers, the partition's largest event time and late
  counts) and ``close`` records (a window was flushed to the partials topic).
- partials topic (one partition): ``partial`` records (a partition's final state of a
  window) and ``progress`` records (a partition's watermark; +inf when idle).
- release-log topic: the stored copy of each window's release, written before publishing.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from stream_dp.window_state import WindowPairs, pairs_from_rows, pairs_to_rows

INF = "inf"


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


def encode_delta(
    offset: int, max_ts: float, rows: dict[int, list[list[Any]]], late: dict[int, int]
) -> bytes:
    return orjson.dumps(
        {
            "kind": "delta",
            "offset": offset,
            "max_ts": None if math.isinf(max_ts) else max_ts,
            "windows": {str(k): v for k, v in rows.items()},
            "late": _late(late),
        }
    )


def encode_close(window_start: int, forced: bool) -> bytes:
    return orjson.dumps({"kind": "close", "window": window_start, "forced": forced})


def encode_partial(window_start: int, partition: int, pairs: WindowPairs) -> bytes:
    return orjson.dumps(
        {
            "kind": "partial",
            "window": window_start,
            "partition": partition,
            "rows": pairs_to_rows(pairs),
        }
    )


def encode_progress(partition: int, watermark: float, late: dict[int, int]) -> bytes:
    return orjson.dumps(
        {"kind": "progress", "partition": partition, "watermark": _wm(watermark),
         "late": _late(late)}
    )  # fmt: skip


def decode(value: bytes) -> dict[str, Any]:
    record = orjson.loads(value)
    kind = record.get("kind")
    if kind == "delta":
        record["max_ts"] = _wm_back(record.get("max_ts"))
        record["windows"] = {int(k): pairs_from_rows(v) for k, v in record["windows"].items()}
        record["late"] = _late_back(record.get("late"))
    elif kind == "partial":
        record["pairs"] = pairs_from_rows(record.pop("rows"))
    elif kind == "progress":
        record["watermark"] = _wm_back(record["watermark"])
        record["late"] = _late_back(record.get("late"))
    return record
