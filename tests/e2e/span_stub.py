"""A stand-in span policy for the worker's carry tests (issue 25 item 3), installed in the
test process and, through ``span_stub_site/sitecustomize.py``, in worker subprocesses.

The windows listed in ``SPAN_STUB_DEFER_WINDOWS`` (window starts, comma-separated)
release nothing and defer every entry to the next window; a release given a carry pools it
with its own entries. It exercises the worker's storage of carries exactly as real spans do
(``release_window(..., carry=)`` in, ``WindowRelease.carry`` out), so the same test holds
once the release defers by its own rule. Test code only.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np

from stream_dp.windows.columns import WindowColumns

ENV = "SPAN_STUB_DEFER_WINDOWS"


def joined(a: WindowColumns, b: WindowColumns, prefix_limit: int) -> WindowColumns:
    """The entries of both (a pair in both merged: counts and sums added, logs joined)."""
    cells = tuple(sorted({*a.cell_names, *b.cell_names}))
    vehicles = tuple(sorted({*a.vehicle_names, *b.vehicle_names}))

    def codes(names: tuple[str, ...], code: np.ndarray, universe: tuple[str, ...]) -> np.ndarray:
        at = {name: i for i, name in enumerate(universe)}
        lookup = np.array([at[n] for n in names], dtype=np.int64)
        return lookup[code] if len(code) else code.astype(np.int64)

    both = WindowColumns(
        cells,
        np.concatenate([codes(a.cell_names, a.cell_code, cells),
                        codes(b.cell_names, b.cell_code, cells)]),
        vehicles,
        np.concatenate([codes(a.vehicle_names, a.vehicle_code, vehicles),
                        codes(b.vehicle_names, b.vehicle_code, vehicles)]),
        np.concatenate([a.count, b.count]),
        np.concatenate([a.total, b.total]),
        np.concatenate([a.total_sq, b.total_sq]),
        np.concatenate([a.reading_pair, b.reading_pair + len(a)]),
        np.concatenate([a.reading_ts, b.reading_ts]),
        np.concatenate([a.reading_value, b.reading_value]),
    )  # fmt: skip
    return both._merge_repeated_pairs(prefix_limit)


def deferring(original: Any, defer: set[int]) -> Any:
    """``original`` (:func:`stream_dp.release.window.release_window`) with the stand-in
    policy (module docstring)."""

    def release_window(
        window_start: int, columns: WindowColumns, params: Any, noise: Any,
        late_readings: int = 0, ledger: Any = None, carry: WindowColumns | None = None,
        last: bool = False,
    ) -> Any:  # fmt: skip
        if carry is not None:
            columns = joined(carry, columns, params.prefix_limit)
        if window_start in defer:
            empty = WindowColumns.from_partials([])
            release = original(window_start, empty, params, noise, late_readings, ledger)
            return dataclasses.replace(release, carry=columns)
        return original(window_start, columns, params, noise, late_readings, ledger, last=last)

    return release_window


def install(defer: set[int]) -> None:
    from stream_dp.release import window

    window.release_window = deferring(window.release_window, defer)


def install_from_env() -> None:
    value = os.environ.get(ENV, "")
    if value:
        install({int(w) for w in value.split(",")})
