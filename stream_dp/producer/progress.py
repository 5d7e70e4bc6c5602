"""A one-line progress display for the replay producer, written to a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from stream_dp.producer.stats import ProduceStats


class TerminalProgress:
    """Rewrite one carriage-return line on ``stream`` with the producer's counters.

    Silent when ``enabled`` is false or the stream is not a TTY. Updates are rate-limited
    to one every ``interval`` seconds; :meth:`close` ends the line.
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        enabled: bool = True,
        total: int | None = None,
        interval: float = 0.25,
    ) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled and _is_tty(self.stream)
        self.total = total
        self.interval = interval
        self._last = float("-inf")
        self._written = False

    def __call__(self, stats: ProduceStats, *, final: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not final and now - self._last < self.interval:
            return
        self._last = now
        self.stream.write("\r" + self._line(stats) + "\x1b[K")
        self.stream.flush()
        self._written = True

    def _line(self, stats: ProduceStats) -> str:
        text = (
            f"{stats.readings:,} readings  {stats.messages:,} messages  "
            f"{stats.seconds:6.1f} s  {stats.readings_per_second:,.0f} readings/s"
        )
        if self.total:
            share = min(stats.readings / self.total, 1.0)
            filled = int(share * 20)
            text = f"[{'#' * filled}{'.' * (20 - filled)}] {share:4.0%}  " + text
        return text

    def close(self) -> None:
        """Finish the progress line so later output starts on a fresh line."""
        if self._written:
            self.stream.write("\n")
            self.stream.flush()
            self._written = False


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
