"""The replay producer's progress display: a bar on a terminal, plain lines otherwise."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from stream_dp.producer.stats import ProduceStats

BAR_WIDTH = 20
#: Seconds of sending before the rate is steady enough for an ETA.
ETA_AFTER = 1.0


class TerminalProgress:
    """Show the producer's counters on ``stream`` (stderr by default).

    On a TTY one carriage-return line is redrawn at most every ``interval`` seconds; with
    a known ``total`` it is a bar with the percentage and (after ``ETA_AFTER`` seconds) an
    ETA. Anywhere else (a pipe, a log file) a plain line is appended at most every
    ``plain_interval`` seconds, the first one ``plain_interval`` seconds after the start,
    so short runs print nothing; the final call adds a closing line only when earlier
    lines were printed. Nothing at all when ``enabled`` is false. :meth:`close` ends the
    terminal line.
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        enabled: bool = True,
        total: int | None = None,
        interval: float = 0.25,
        plain_interval: float = 10.0,
    ) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled
        self.tty = _is_tty(self.stream)
        self.total = total
        self.interval = interval if self.tty else plain_interval
        self._last = float("-inf") if self.tty else time.monotonic()
        self._written = False

    def __call__(self, stats: ProduceStats, *, final: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if final:
            if not (self.tty or self._written):
                return
        elif now - self._last < self.interval:
            return
        self._last = now
        if self.tty:
            self.stream.write("\r" + self._line(stats, final) + "\x1b[K")
        else:
            self.stream.write(self._line(stats, final) + "\n")
        self.stream.flush()
        self._written = True

    def _line(self, stats: ProduceStats, final: bool = False) -> str:
        counters = (
            f"{stats.messages:,} messages  {stats.seconds:6.1f} s  "
            f"{stats.readings_per_second:,.0f} readings/s"
        )
        if not self.total:
            return f"{stats.readings:,} readings  {counters}"
        share = min(stats.readings / self.total, 1.0)
        text = f"{share:4.0%}  {stats.readings:,}/{self.total:,} readings  {counters}"
        rate = stats.readings_per_second
        if not final and stats.seconds >= ETA_AFTER and stats.readings < self.total and rate > 0:
            text += f"  ETA {_clock((self.total - stats.readings) / rate)}"
        if self.tty:
            filled = int(share * BAR_WIDTH)
            text = f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] " + text
        return text

    def close(self) -> None:
        """Finish the terminal line so later output starts on a fresh line."""
        if self._written and self.tty:
            self.stream.write("\n")
            self.stream.flush()
        self._written = False


def _clock(seconds: float) -> str:
    """``m:ss``, or ``h:mm:ss`` from an hour on."""
    minutes, secs = divmod(int(seconds + 0.5), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}"


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
