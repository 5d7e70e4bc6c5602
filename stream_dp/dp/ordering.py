"""Stable orders by small integer keys, for grouping a window's pairs (by cell, by vehicle),
and the distinct values of an integer array.

:func:`stable_order` and :func:`grouped` run the registry's kernels
(:data:`~stream_dp.dp.kernels.STABLE_ORDER`, :data:`~stream_dp.dp.kernels.GROUPED`): the
compiled counting sort (O(n + keys)) or numpy's stable sort, whose numpy forms are here. A
stable order is unique, so both give the same permutation. Importing this module loads no
numba.
"""

from __future__ import annotations

import numpy as np

from stream_dp.dp import kernels


def stable_order(keys: np.ndarray, n_keys: int) -> np.ndarray:
    """The stable order of ``keys`` (integers in ``[0, n_keys)``): ``keys[order]`` ascends
    and equal keys keep their relative order."""
    return kernels.STABLE_ORDER.pick(len(keys))(keys, n_keys)  # type: ignore[no-any-return]


def grouped(
    keys: np.ndarray, n_keys: int, first: np.ndarray, second: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``keys``, ``first`` and ``second`` taken in the :func:`stable_order` of ``keys``."""
    return kernels.GROUPED.pick(len(keys))(keys, n_keys, first, second)  # type: ignore[no-any-return]


def stable_order_by_sort(keys: np.ndarray, n_keys: int) -> np.ndarray:
    """:func:`stable_order` by numpy's stable sort (the numpy form)."""
    return np.argsort(keys, kind="stable")


def grouped_by_sort(
    keys: np.ndarray, n_keys: int, first: np.ndarray, second: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`grouped` by numpy's stable sort (the numpy form)."""
    order = np.argsort(keys, kind="stable")
    return keys[order], first[order], second[order]


def order_and_gather_by_sort(
    keys: np.ndarray, n_keys: int, first: np.ndarray, second: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The stable order of ``keys`` and ``keys``, ``first``, ``second`` taken in it
    (:data:`~stream_dp.dp.kernels.ORDER_AND_GATHER`'s numpy form): sorted, the keys are each
    key repeated its number of times (no gather)."""
    order = np.argsort(keys, kind="stable")
    per_key = np.bincount(keys, minlength=n_keys)
    sorted_keys = np.repeat(np.arange(n_keys, dtype=np.int64), per_key)
    return order, sorted_keys, np.take(first, order), np.take(second, order)


def counting_sort_fits(n: int, n_keys: int) -> bool:
    """Whether a counting sort of ``n`` items over ``n_keys`` keys is linear in ``n`` (its
    count array is at most a few times the input)."""
    return n_keys <= 4 * n + 65_536


def order_by_pair(major: np.ndarray, minor: np.ndarray, n_major: int, n_minor: int) -> np.ndarray:
    """The stable order by ``(major, minor)`` (integers in ``[0, n_major)``, ``[0, n_minor)``),
    i.e. ``np.lexsort((minor, major))``: one counting sort of ``major * n_minor + minor`` when
    that key range is small, else two (minor first, then major), else ``lexsort`` itself."""
    n = len(major)
    if counting_sort_fits(n, n_major * n_minor):
        key = major.astype(np.int64) * n_minor + minor
        return stable_order(key, n_major * n_minor)
    if not (counting_sort_fits(n, n_major) and counting_sort_fits(n, n_minor)):
        return np.lexsort((minor, major))
    by_minor = stable_order(minor.astype(np.int64, copy=False), n_minor)
    major_by_minor = np.take(major, by_minor).astype(np.int64, copy=False)
    return np.take(by_minor, stable_order(major_by_minor, n_major))


# Performance (benchmarks/plan_startup.py): numpy 2's ``np.unique`` hashes integer keys,
# several times slower than one sort on keys like the pseudo-user step's (cell, cap) pairs
# (50,000 keys: 22 → 4 ms), and its first call imports ``numpy.ma`` (~10 ms of a plan).
def sorted_distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of an integer array (``np.unique(values)``)."""
    ordered = np.sort(values)
    first = np.empty(len(ordered), dtype=bool)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return ordered[first]
