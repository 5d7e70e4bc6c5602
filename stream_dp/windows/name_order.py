"""Sorting a window's vehicle names (code-point order, the CLIP-USER tie-break order).

A window's names arrive in one numpy unicode array per input partition (each partition's
accumulator builds it batch by batch during ingest, and the partial carries it as raw array
bytes). Each is sorted on the background thread when its partial arrives (numpy's string sort
releases the GIL), so by the time the window is merged the arrays are sorted runs, which a
stable sort merges in linear time. Names never end in NUL (readings with a NUL are invalid):
numpy would strip it.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

from stream_dp.windows import background

#: Lists at least this long are worth sorting as soon as they arrive.
EARLY_SORT_MIN = 4096


def _stable_argsort(array: np.ndarray) -> np.ndarray:
    return np.argsort(array, kind="stable")


@dataclass(frozen=True)
class NameSort:
    """One list of names as a numpy unicode array and its sort order (being computed)."""

    array: np.ndarray
    order: Future[np.ndarray]

    @classmethod
    def start(cls, names: list[str] | np.ndarray) -> NameSort:
        if isinstance(names, np.ndarray):
            array = names
        else:
            array = np.array(names) if names else np.zeros(0, dtype="<U1")
        return cls(array, background.submit(_stable_argsort, array))


def merged_order(sorts: list[NameSort]) -> tuple[np.ndarray, np.ndarray]:
    """All the lists' names, concatenated in list order, as ``(names, order)``: ``order`` is
    the stable ascending order of the concatenation and ``names`` the concatenation in that
    order (what ``np.argsort(concatenation, kind="stable")`` gives, from sorted runs)."""
    if not sorts:
        return np.zeros(0, dtype="<U1"), np.zeros(0, dtype=np.int64)
    orders = [s.order.result() for s in sorts]
    runs = np.concatenate([s.array[o] for s, o in zip(sorts, orders, strict=True)])
    offsets = np.cumsum([0] + [len(s.array) for s in sorts[:-1]]).tolist()
    flat_index = np.concatenate([o + offset for o, offset in zip(orders, offsets, strict=True)])
    run_order = np.argsort(runs, kind="stable")  # merges the sorted runs
    return runs[run_order], flat_index[run_order]
