"""Keep freed memory in the process between windows instead of handing it back to the OS.

A window's release allocates dozens of numpy temporaries of a few megabytes each. glibc
serves allocations above its mmap threshold with fresh pages from ``mmap`` and unmaps them
on ``free`` (the threshold adapts to what ran before), and it trims the heap top above a few
megabytes; either way the next window page-faults its working set again. Measured on the
release benchmark window (alternating processes, median of 7 releases each): ~25,000 minor
page faults and 335–479 ms per release by default, ~2,000 and 268–376 ms with the settings
below, which win every alternation.

:func:`keep_freed_memory` raises both thresholds with ``mallopt``; the worker, the offline
release and the demo call it at start (``keep_freed_memory = false`` turns it off). It is a
no-op returning False where ``mallopt`` is not available (not Linux, or not glibc).
"""

from __future__ import annotations

import ctypes
import sys

#: ``mallopt`` parameter numbers (glibc ``malloc.h``).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: Allocations below this come from the heap, which is reused (glibc's largest allowed value
#: on 64-bit systems is 32 MiB).
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
#: Free memory at the heap top kept for the next window before it is returned to the OS.
TRIM_THRESHOLD_BYTES = 512 * 1024 * 1024


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds (see the module docstring); True if both took."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    mmap_ok = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
    trim_ok = mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1
    return mmap_ok and trim_ok
