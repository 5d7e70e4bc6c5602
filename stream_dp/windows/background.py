"""One background thread for the release path's GIL-free work.

Compiled kernels declared ``nogil`` and numpy sorts of numeric or string arrays release the
GIL, so on a multi-core machine they run beside the main thread (e.g. the reading-log prefix
sums during CLIP-USER, each partial's vehicle-name sort while the next partial is decoded).
One thread keeps the order of submitted work and the memory it touches predictable.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

_POOL: ThreadPoolExecutor | None = None


def _forget_pool() -> None:  # a forked child has no pool thread
    global _POOL
    _POOL = None


os.register_at_fork(after_in_child=_forget_pool)


def submit(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
    """Run ``function(*args, **kwargs)`` on the background thread."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(1, thread_name_prefix="stream-dp-background")
    return _POOL.submit(function, *args, **kwargs)
