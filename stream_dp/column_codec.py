"""Binary encoding of named columns (numpy arrays and lists of strings) with a JSON header.

Used for the internal topics' bulk payloads (state deltas, partials): a million-reading
window encodes and decodes in milliseconds, where JSON rows took seconds. Layout::

    b"SDPC" | u32 header length | orjson header | column bytes, in header order

The header holds the caller's metadata and, per column, its name, kind (a numpy dtype
string such as ``<f8``, or ``"str"`` for a list of strings, stored as an orjson array) and
byte length. Decoding checks every length, so a truncated or corrupt blob raises ValueError.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import orjson

MAGIC = b"SDPC"
_LENGTH = struct.Struct("<I")
Column = np.ndarray | list[str]


def pack(meta: dict[str, Any], columns: dict[str, Column]) -> bytes:
    """Encode ``columns`` (1-d arrays or string lists) with ``meta`` (JSON-serialisable)."""
    specs = []
    chunks = []
    for name, column in columns.items():
        if isinstance(column, np.ndarray):
            data = np.ascontiguousarray(column).reshape(-1)
            kind = data.dtype.str
            raw = data.tobytes()
        else:
            kind = "str"
            raw = orjson.dumps(list(column))
        specs.append([name, kind, len(raw)])
        chunks.append(raw)
    header = orjson.dumps({"meta": meta, "columns": specs})
    return b"".join([MAGIC, _LENGTH.pack(len(header)), header, *chunks])


def unpack(blob: bytes) -> tuple[dict[str, Any], dict[str, Column]]:
    """Decode what :func:`pack` wrote: ``(meta, columns)``; arrays are read-only views."""
    view = memoryview(blob)
    if bytes(view[:4]) != MAGIC or len(view) < 8:
        raise ValueError("not a column blob (bad magic)")
    (header_length,) = _LENGTH.unpack(view[4:8])
    at = 8 + header_length
    if at > len(view):
        raise ValueError("column blob truncated in its header")
    try:
        header = orjson.loads(view[8:at])
        specs = header["columns"]
        meta = header["meta"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"column blob header unreadable: {exc}") from None
    columns: dict[str, Column] = {}
    for name, kind, length in specs:
        end = at + int(length)
        if end > len(view):
            raise ValueError(f"column blob truncated in column {name!r}")
        raw = view[at:end]
        if kind == "str":
            columns[name] = orjson.loads(raw)
        else:
            dtype = np.dtype(kind)
            if int(length) % dtype.itemsize:
                raise ValueError(f"column {name!r}: {length} bytes is not a whole number of {kind}")
            columns[name] = np.frombuffer(raw, dtype=dtype)
        at = end
    if at != len(view):
        raise ValueError("column blob has trailing bytes")
    return meta, columns
