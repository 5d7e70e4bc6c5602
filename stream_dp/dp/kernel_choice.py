"""Whether a step runs its compiled (numba) kernel or its numpy form; both give identical
results (the tests compare them on random inputs).

Importing numba and loading a first cached kernel costs a process about 0.7 s of CPU, more
than the numpy forms take on one window's occupancy. A process that has not loaded numba
therefore runs the numpy forms on inputs of at most :data:`SMALL_INPUT` items (``stream-dp
plan`` then never loads it, benchmarks/plan_startup.py); larger inputs, and every process
that has numba loaded already (the worker and the offline engine draw their noise with it),
run the kernels.
"""

from __future__ import annotations

import sys

#: The most items (occupancy entries, keys) a process without numba handles in numpy.
SMALL_INPUT = 200_000


# Performance (benchmarks/plan_startup.py): ``stream-dp plan`` of 33,000 rows, 1.29 → 0.55 s
# of CPU (numba's import and first cached kernel were 0.7 s of it).
def use_kernels(n_items: int) -> bool:
    """Whether a step over ``n_items`` items runs its compiled kernel."""
    return n_items > SMALL_INPUT or "numba" in sys.modules
