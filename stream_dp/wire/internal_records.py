"""Wire format of the internal topics (orjson; vehicle ids stay on internal topics only).

- state topic (partition-aligned with the readings): ``delta`` records (a batch's state
  delta, the last input offset it covers, the partition's largest event time and late
  counts) and ``close`` records (a window was flushed to the partials topic).
- partials topic (one partition): ``partial`` records (a partition's final state of a
  window) and ``progress`` records (a partition's watermark; +inf when idle).
- release-log topic: the stored copy of each window's release, written before publishing,
  each preceded by the window's per-vehicle losses for the budget ledger (``loss``) and, when
  the release defers entries to the next window (a span still pooling, issue 25), by that
  ``carry`` (raw private columns: internal only, never published).

Bulk payloads (a batch's delta, a window's partial) are column blobs
(:mod:`stream_dp.wire.column_codec`) split into binary ``parts`` of at most :data:`BYTES_PER_PART`
bytes; a window's release (JSON, also read by people) is split into parts of at most
:data:`ROWS_PER_PART` cells. So no record nears Kafka's default 1 MB limit. Parts of one
payload are consecutive in one partition and share an ``id``; a payload counts only once its
last part is read (:class:`PartAssembler`), so a crash in the middle of writing one leaves
nothing half-applied. A binary part is ``BINARY_MAGIC | u32 header length | orjson header |
chunk``; every other record is plain JSON.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import orjson

from stream_dp.dp.budget_ledger import WindowLoss
from stream_dp.windows.columns import WindowColumns
from stream_dp.windows.state import PartialColumns, WindowDelta
from stream_dp.wire import column_codec

INF = "inf"
#: Release cells per record part (a cell record is ~0.5 kB of JSON).
ROWS_PER_PART = 256
#: Bytes of column blob per binary record part.
BYTES_PER_PART = 512 * 1024
BINARY_MAGIC = b"\x00SDPB"


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


def _binary_parts(
    kind: str, record_id: str | int, blob: bytes | list[bytes | memoryview]
) -> list[bytes]:
    """``blob`` (bytes, or the pieces of :func:`column_codec.pack_segments`) cut into records
    of at most ``BYTES_PER_PART`` payload bytes; every byte is copied once."""
    chunks = _cut([blob] if isinstance(blob, bytes) else blob, BYTES_PER_PART)
    records = []
    for i, chunk in enumerate(chunks or [[]]):
        header = {"kind": kind, "id": record_id, "part": i, "parts": max(len(chunks), 1)}
        records.append(column_codec.frame(BINARY_MAGIC, header, *chunk))
    return records


def _cut(segments: list[bytes | memoryview], size: int) -> list[list[memoryview]]:
    """The concatenation of ``segments`` as consecutive pieces of ``size`` bytes (the last
    one shorter), each a list of views into the segments (no copy)."""
    chunks: list[list[memoryview]] = []
    current: list[memoryview] = []
    room = size
    for segment in segments:
        view = memoryview(segment).cast("B")
        while len(view):
            take = view[:room]
            current.append(take)
            view = view[len(take) :]
            room -= len(take)
            if room == 0:
                chunks.append(current)
                current, room = [], size
    if current:
        chunks.append(current)
    return chunks


def _blob(parts: list[dict[str, Any]]) -> bytes:
    return b"".join(part["chunk"] for part in parts)


def encode_delta(
    offset: int, max_ts: float, delta: dict[int, WindowDelta], late: dict[int, int]
) -> list[bytes]:
    """A batch's delta as binary parts; ``id`` = the last input offset it covers."""
    columns: dict[str, column_codec.Column] = {}
    windows = []
    for start, d in delta.items():
        windows.append([start, d.first_pair])
        columns[f"{start}.cells"] = d.new_cells
        columns[f"{start}.vehicles"] = d.new_vehicles
        columns[f"{start}.pair"] = d.pair.astype(np.int32)
        columns[f"{start}.ts"] = d.ts
        columns[f"{start}.value"] = d.value
    meta = {
        "offset": offset,
        "max_ts": None if math.isinf(max_ts) else max_ts,
        "late": _late(late),
        "windows": windows,
    }
    return _binary_parts("delta", offset, column_codec.pack_segments(meta, columns))


def encode_close(window_start: int, forced: bool) -> bytes:
    return orjson.dumps({"kind": "close", "window": window_start, "forced": forced})


_PARTIAL_COLUMNS = (
    "pair_cell", "pair_vehicle", "count", "total", "total_sq",
    "reading_pair", "reading_ts", "reading_value",
)  # fmt: skip
_NARROW = {"pair_cell", "pair_vehicle", "reading_pair"}  # int32 on the wire


def encode_partial(
    window_start: int, partition: int, partial: PartialColumns, attempt: str
) -> list[bytes]:
    """A partition's partial state of a window as binary parts; ``attempt`` tells a re-send
    after a crash apart from the first (the coordinator keeps the first complete one)."""
    columns: dict[str, column_codec.Column] = {
        "cell_names": partial.cell_names,
        "vehicle_names": partial.vehicle_names,
    }
    for name in _PARTIAL_COLUMNS:
        array = getattr(partial, name)
        columns[name] = array.astype(np.int32) if name in _NARROW else array
    meta = {"window": window_start, "partition": partition}
    blob = column_codec.pack_segments(meta, columns)
    return _binary_parts("partial", f"{window_start}/{partition}/{attempt}", blob)


def encode_release(release_obj: dict[str, Any], attempt: str = "") -> list[bytes]:
    """A window's release for the release log, as parts (cells split, summary in the last).
    ``attempt`` names this storing of the window (two releasers racing each store their own;
    the first complete one in the log wins, see :class:`ReleaseLogIndex`)."""
    chunks = _parts(release_obj["cells"])
    start = release_obj["window_start"]
    return [
        orjson.dumps(
            {
                "kind": "release",
                "id": f"{start}/{attempt}",
                "attempt": attempt,
                "part": i,
                "parts": len(chunks),
                "window_start": start,
                "cells": chunk,
                "summary": release_obj["summary"] if i == len(chunks) - 1 else None,
            }
        )
        for i, chunk in enumerate(chunks)
    ]


def encode_loss(loss: WindowLoss, attempt: str = "") -> list[bytes]:
    """A window's per-vehicle cells counted (budget ledger), stored in the release log just
    before the window's release (same ``attempt``)."""
    return _binary_parts("loss", f"{loss.window_start}/{attempt}", loss.to_bytes())


def loss_payload(parts: list[dict[str, Any]]) -> WindowLoss:
    return WindowLoss.from_bytes(_blob(parts))


_CARRY_COLUMNS = (
    "cell_code", "vehicle_code", "count", "total", "total_sq",
    "reading_pair", "reading_ts", "reading_value",
)  # fmt: skip


def encode_carry(window_start: int, carry: WindowColumns, attempt: str = "") -> list[bytes]:
    """The entries a window's release defers to the next window, stored in the release log
    with the release (same ``attempt``, between its losses and its release): binary parts."""
    columns: dict[str, column_codec.Column] = {
        "cell_names": list(carry.cell_names),
        "vehicle_names": list(carry.vehicle_names),
    }
    for name in _CARRY_COLUMNS:
        columns[name] = np.ascontiguousarray(getattr(carry, name))
    blob = column_codec.pack_segments({"window": window_start}, columns)
    return _binary_parts("carry", f"{window_start}/{attempt}", blob)


def carry_payload(parts: list[dict[str, Any]]) -> tuple[int, WindowColumns]:
    """Window start and the deferred entries of an assembled ``carry`` payload."""
    meta, columns = column_codec.unpack(_blob(parts))
    arrays = {}
    for name in _CARRY_COLUMNS:
        array = columns[name]
        if not isinstance(array, np.ndarray):
            raise ValueError(f"carry column {name!r}: expected an array")
        arrays[name] = array.copy()  # owned, writable: the blob's buffer is not kept
    carry = WindowColumns(
        cell_names=tuple(columns["cell_names"]),
        vehicle_names=tuple(columns["vehicle_names"]),
        **arrays,
    )
    return int(meta["window"]), carry


def encode_progress(partition: int, watermark: float, late: dict[int, int]) -> bytes:
    return orjson.dumps(
        {"kind": "progress", "partition": partition, "watermark": _wm(watermark),
         "late": _late(late)}
    )  # fmt: skip


def decode(value: bytes) -> dict[str, Any]:
    """One record as written (parts are assembled by :class:`PartAssembler`); a binary
    part's payload is under ``"chunk"`` (a memoryview of ``value``)."""
    if value.startswith(BINARY_MAGIC):
        record, chunk = column_codec.unframe(BINARY_MAGIC, value, "record part")
        record["chunk"] = chunk  # a view of ``value``: joined (copied) once when assembled
        return record
    return orjson.loads(value)


class PartAssembler:
    """Collects the parts of multi-part payloads, read in partition order.

    ``add`` returns the whole payload (the parts' records, in order) when its last part
    arrives, else None. Parts of an unfinished payload are dropped when another payload with
    the same key starts (the writer crashed and began again).
    """

    def __init__(self) -> None:
        self._pending: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._started: dict[tuple[str, str], int] = {}

    def add(self, record: dict[str, Any], offset: int = -1) -> list[dict[str, Any]] | None:
        """``offset``: the record's, if known (see :meth:`oldest_unfinished`)."""
        key = (record["kind"], str(record["id"]))
        if record["part"] == 0:
            self._pending[key] = []
            self._started[key] = offset
        parts = self._pending.get(key)
        if parts is None or len(parts) != record["part"]:
            return None  # a part without its beginning: an interrupted write
        parts.append(record)
        if len(parts) < record["parts"]:
            return None
        del self._pending[key]
        self._started.pop(key, None)
        return parts

    def oldest_unfinished(self) -> int | None:
        """Offset of the first part of the oldest payload still missing parts (None: none;
        -1: one whose offset was not given)."""
        return min(self._started.values(), default=None)


def delta_payload(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Windows (as :class:`WindowDelta`), offset, max event time and late counts of an
    assembled delta."""
    meta, columns = column_codec.unpack(_blob(parts))
    windows = {}
    for start, first_pair in meta["windows"]:
        windows[int(start)] = WindowDelta(
            int(first_pair),
            list(columns[f"{start}.cells"]),
            list(columns[f"{start}.vehicles"]),
            np.asarray(columns[f"{start}.pair"], dtype=np.int64),
            np.array(columns[f"{start}.ts"], dtype=np.float64),
            np.array(columns[f"{start}.value"], dtype=np.float64),
        )
    return {
        "offset": meta["offset"],
        "max_ts": _wm_back(meta["max_ts"]),
        "windows": windows,
        "late": _late_back(meta.get("late")),
    }


def partial_payload(parts: list[dict[str, Any]]) -> tuple[int, int, PartialColumns]:
    """Window, partition and the partial's columns."""
    meta, columns = column_codec.unpack(_blob(parts))
    arrays = {}
    for name in _PARTIAL_COLUMNS:
        array = columns[name]
        assert isinstance(array, np.ndarray)
        arrays[name] = array.astype(np.int64) if name in _NARROW else array
    partial = PartialColumns(
        cell_names=list(columns["cell_names"]),
        vehicle_names=_name_array(columns["vehicle_names"]),
        **arrays,
    )
    return int(meta["window"]), int(meta["partition"]), partial


def _name_array(names: column_codec.Column) -> np.ndarray:
    """Vehicle names as a numpy unicode array (sent as one; a JSON list is accepted too)."""
    if isinstance(names, np.ndarray):
        if names.dtype.kind != "U":
            raise ValueError(f"vehicle_names: expected a unicode array, got {names.dtype}")
        return names
    return np.array(names) if names else np.zeros(0, dtype="<U1")


def attempt_of(parts: list[dict[str, Any]]) -> str:
    """The attempt a stored payload belongs to ("" for records written before attempts)."""
    record_id = str(parts[0]["id"])
    return record_id.split("/", 1)[1] if "/" in record_id else ""


def release_payload(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "window_start": parts[0]["window_start"],
        "cells": [cell for part in parts for cell in part["cells"]],
        "summary": parts[-1]["summary"],
    }


def progress_payload(record: dict[str, Any]) -> tuple[int, float, dict[int, int]]:
    return record["partition"], _wm_back(record["watermark"]), _late_back(record.get("late"))
