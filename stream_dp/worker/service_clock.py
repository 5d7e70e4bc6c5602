"""The service's public clock under secret routes (docs/math.md §14.7).

Lateness there depends on each reading and this clock alone: the wall clock, or the
operator's declared replay clock ``clock_start + (monotonic() - t0) * clock_speed``, with t0
the moment the worker's clock starts (its first tick once ready). Both are public.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from stream_dp.config import Settings


@dataclass
class ServiceClock:
    """The wall clock (``start`` None), or a replay clock standing at ``start`` until
    :meth:`begin` and running ``speed`` times real time from there (§14.7)."""

    start: float | None = None
    speed: float = 1.0
    wall: Callable[[], float] = time.time
    monotonic: Callable[[], float] = time.monotonic
    began_at: float | None = None

    @classmethod
    def for_settings(cls, settings: Settings) -> ServiceClock:
        """The clock ``clock_start`` / ``clock_speed`` declare (none: the wall clock)."""
        return cls(start=settings.clock_start, speed=settings.clock_speed)

    def begin(self) -> None:
        """Start a replay clock (t0); later calls leave it running."""
        if self.began_at is None:
            self.began_at = self.monotonic()

    def now(self) -> float:
        """Seconds since the epoch on this clock."""
        if self.start is None:
            return self.wall()
        if self.began_at is None:
            return self.start
        return self.start + (self.monotonic() - self.began_at) * self.speed
