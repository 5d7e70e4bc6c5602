"""Small windows for the secret-routes tests: ``(vehicle, cell, readings)`` to columns."""

from __future__ import annotations

import numpy as np

from stream_dp.windows.columns import WindowColumns

Pair = tuple[str, str, list[float]]


def window_columns(pairs: list[Pair]) -> WindowColumns:
    """A window's merged columns holding ``pairs`` (names sorted, as the merge sorts them)."""
    cells = tuple(sorted({c for _, c, _ in pairs}))
    vehicles = tuple(sorted({v for v, _, _ in pairs}))
    values = [np.asarray(x, dtype=np.float64) for _, _, x in pairs]
    reading_pair = np.repeat(np.arange(len(pairs)), [len(x) for x in values]).astype(np.int64)
    flat = np.concatenate(values) if values else np.zeros(0)
    return WindowColumns(
        cells,
        np.array([cells.index(c) for _, c, _ in pairs], dtype=np.int64),
        vehicles,
        np.array([vehicles.index(v) for v, _, _ in pairs], dtype=np.int64),
        np.array([len(x) for x in values], dtype=np.int64),
        np.array([x.sum() for x in values], dtype=np.float64),
        np.array([(x**2).sum() for x in values], dtype=np.float64),
        reading_pair,
        np.zeros(len(flat)),
        flat,
    )


def crowd(cell: str, vehicles: int, value: float, prefix: str = "v") -> list[Pair]:
    """``vehicles`` vehicles with one reading ``value`` each in ``cell``."""
    return [(f"{prefix}{cell}-{i}", cell, [value]) for i in range(vehicles)]
