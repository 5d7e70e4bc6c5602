"""Waiting on a condition, never on the clock: a test polls what it needs to see and fails
only after a generous deadline, so a loaded machine makes it slower, not red."""

from __future__ import annotations

import time
from collections.abc import Callable

#: Seconds a test waits for a condition before failing. A passing test waits only as long as
#: its condition takes; this bounds a failing one, far above what a quiet machine needs (a
#: worker starts in seconds) so that a machine shared by many jobs only slows the test.
PATIENCE_S = 300.0


def wait_until(
    predicate: Callable[[], object], what: str, timeout: float = PATIENCE_S, every: float = 0.2
) -> float:
    """Poll ``predicate`` until it is true; the seconds it took. Fails naming ``what``."""
    began = time.monotonic()
    while not predicate():
        assert time.monotonic() - began < timeout, f"not {what} after {timeout:g} s"
        time.sleep(every)
    return time.monotonic() - began
