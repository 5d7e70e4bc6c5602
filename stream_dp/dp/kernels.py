"""Every hot step that has a numpy form and a compiled (numba) form, declared once.

Both forms of a :class:`Kernel` take the same arguments and return equal results
(``tests/unit/dp/test_kernels.py`` runs every entry of :data:`REGISTRY` both ways on the same
inputs). A caller runs ``KERNEL.pick(n_items)(...)``: :func:`use_compiled` is the one switch.

Importing numba and loading a first cached kernel costs a process about 0.7 s of CPU, more
than the numpy forms take on one window's occupancy. A process that has not loaded numba
therefore runs the numpy forms on inputs of at most :data:`SMALL_INPUT` items (``stream-dp
plan`` then never loads it, benchmarks/plan_startup.py); larger inputs, and every process
that has numba loaded already (the worker and the offline engine draw their noise with it),
run the compiled forms. Both forms are named by ``"module:function"`` and imported on first
use, so importing this registry (or a module that calls it) loads no numba.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

#: The most items (occupancy entries, keys) a process without numba handles in numpy.
SMALL_INPUT = 200_000

Form = Literal["numpy", "compiled"]

_forced: Form | None = None


# Performance (benchmarks/plan_startup.py): ``stream-dp plan`` of 33,000 rows, 1.29 → 0.55 s
# of CPU (numba's import and first cached kernel were 0.7 s of it).
def use_compiled(n_items: int) -> bool:
    """Whether a step over ``n_items`` items runs its compiled form (see the module
    docstring; :func:`forced` overrides it)."""
    if _forced is not None:
        return _forced == "compiled"
    return n_items > SMALL_INPUT or "numba" in sys.modules


@contextmanager
def forced(form: Form) -> Iterator[None]:
    """Every kernel runs its ``form`` inside the block, whatever the input's size (tests and
    benchmarks)."""
    global _forced
    before, _forced = _forced, form
    try:
        yield
    finally:
        _forced = before


@functools.cache
def _load(path: str) -> Callable[..., Any]:
    module, _, name = path.partition(":")
    function: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return function


def compiled_step(path: str) -> Callable[..., Any]:
    """A compiled step that has no numpy form, named by ``"module:function"`` and imported
    at its first call: a module declares it at its top and still loads no numba on import
    (``stream-dp plan``, the fixed-ε mode's start-up)."""

    def step(*args: Any) -> Any:
        return _load(path)(*args)

    step.__name__ = step.__qualname__ = path.partition(":")[2]
    return step


@dataclass(frozen=True)
class Kernel:
    """A hot step: its ``numpy`` and ``compiled`` forms, as ``"module:function"``."""

    name: str
    numpy_form: str
    compiled_form: str

    @property
    def numpy(self) -> Callable[..., Any]:
        """The numpy form (loads no numba)."""
        return _load(self.numpy_form)

    @property
    def compiled(self) -> Callable[..., Any]:
        """The compiled form (its first call compiles or loads the cached kernel)."""
        return _load(self.compiled_form)

    def pick(self, n_items: int) -> Callable[..., Any]:
        """The form that runs a call over ``n_items`` items (:func:`use_compiled`)."""
        return self.compiled if use_compiled(n_items) else self.numpy


_DP = "stream_dp.dp"
_BUDGET = "stream_dp.release.vehicle_budget"

#: The stable order of small integer keys (``np.argsort(kind="stable")``; a counting sort).
STABLE_ORDER = Kernel(
    "stable_order", f"{_DP}.ordering:stable_order_by_sort", f"{_DP}.array_kernels:stable_order_by"
)
#: Keys and two columns taken in the keys' stable order.
GROUPED = Kernel("grouped", f"{_DP}.ordering:grouped_by_sort", f"{_DP}.array_kernels:grouped_by")
#: The stable order, the sorted keys and two columns gathered through it (an occupancy's
#: entries grouped by cell, release/selection.py).
ORDER_AND_GATHER = Kernel(
    "order_and_gather",
    f"{_DP}.ordering:order_and_gather_by_sort",
    f"{_DP}.array_kernels:order_and_gather_by",
)
#: Eq. (13) per cell over arrays of (largest kept count, kept sum, total) (docs/math.md §3.4).
CELL_ERRORS = Kernel(
    "cell_errors", f"{_DP}.grid_error:composed_error", f"{_DP}.grid_error_kernel:compiled_error"
)
#: CLIP-USER's layout: vehicles' and cells' orders of the occupancy (docs/math.md §5.1).
SUPPRESSOR_LAYOUT = Kernel(
    "suppressor_layout",
    f"{_DP}.clip_user_run:layout_by_sorts",
    f"{_DP}.clip_user_kernel:compiled_layout",
)
#: CLIP-USER's stages (Algorithm 1, docs/math.md §5.1): batched numpy rounds or one kernel.
CLIP_USER = Kernel(
    "clip_user",
    f"{_DP}.clip_user_rounds:clip_user_by_rounds",
    f"{_DP}.clip_user_kernel:run_clip_user",
)
#: Per group, the count-weighted quantile of its entries' rooms (docs/math.md §13.1).
WEIGHTED_QUANTILE = Kernel(
    "weighted_quantile",
    f"{_DP}.adaptive_cells:weighted_quantile_by_sort",
    f"{_DP}.adaptive_kernel:weighted_quantile",
)
#: One entry per distinct (group, vehicle), counts added (the adaptive choice's units).
AGGREGATE_PAIRS = Kernel(
    "aggregate_pairs",
    f"{_DP}.adaptive_cells:aggregate_by_sort",
    f"{_DP}.adaptive_kernel:aggregate_pairs",
)
#: :data:`AGGREGATE_PAIRS` of the selected entries.
AGGREGATE_SELECTED = Kernel(
    "aggregate_selected",
    f"{_DP}.adaptive_cells:aggregate_selected_by_sort",
    f"{_DP}.adaptive_kernel:aggregate_selected_pairs",
)
#: A window's pairs split into those kept as they are and those merged into their unit.
SPLIT_MOVES = Kernel(
    "split_moves", f"{_DP}.pair_moves:split_moves_by_masks", f"{_DP}.adaptive_kernel:split_moves"
)
#: The merged pairs grouped by (unit, vehicle), their counts added.
MERGED_GROUPS = Kernel(
    "merged_groups",
    f"{_DP}.pair_moves:merged_groups_by_sort",
    f"{_DP}.adaptive_kernel:merged_groups",
)
#: The readings of the kept pairs, renumbered to the new pairs.
TAKE_READINGS = Kernel(
    "take_readings", f"{_DP}.pair_moves:take_readings_by_mask", f"{_DP}.span_kernels:take_readings"
)
#: A budget plan's kept counts per entry and cell, cells per vehicle and sit-outs (§13).
PLANNED_COUNTS = Kernel(
    "planned_counts",
    f"{_BUDGET}.plan_sums:planned_counts_by_bincount",
    f"{_BUDGET}.plan_passes:planned_counts",
)

#: A window's charge under per-cell ε: per vehicle its reads and their (own-share) ε (§13.1),
#: and (unless asked not to) the read entries' vehicles and ε.
READ_LOSS = Kernel(
    "read_loss",
    f"{_BUDGET}.plan_sums:read_loss_by_bincount",
    f"{_BUDGET}.plan_passes:read_loss",
)

#: Every kernel, for the test that runs both forms of each.
REGISTRY: tuple[Kernel, ...] = (
    STABLE_ORDER,
    GROUPED,
    ORDER_AND_GATHER,
    CELL_ERRORS,
    SUPPRESSOR_LAYOUT,
    CLIP_USER,
    WEIGHTED_QUANTILE,
    AGGREGATE_PAIRS,
    AGGREGATE_SELECTED,
    SPLIT_MOVES,
    MERGED_GROUPS,
    TAKE_READINGS,
    PLANNED_COUNTS,
    READ_LOSS,
)
