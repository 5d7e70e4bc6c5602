"""The bad rows and blank lines a run skips, counted for its summary (the one bad-input policy
of docs/configuration.md, "Rejected readings": skip, count by reason, go on)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from stream_dp.sources import LineTally, Numbered, SourceError
from stream_dp.windows.reject_reasons import RejectReason


@dataclass
class SkippedRows:
    """Rows of an input file that were not readings: bad rows by reason code, blank lines."""

    by_reason: Counter[str] = field(default_factory=Counter)
    lines: LineTally = field(default_factory=LineTally)

    @property
    def bad(self) -> int:
        return sum(self.by_reason.values())

    def readings(self, numbered: Iterable[Numbered]) -> Iterator[dict]:
        """The readings of ``numbered``; each bad row counted by its reason and skipped."""
        for _line, item in numbered:
            if isinstance(item, SourceError):
                self.by_reason[str(item.code or RejectReason.MALFORMED_ROW)] += 1
                continue
            yield item

    def summary(self) -> str | None:
        """``skipped 3 bad rows (bad_ts 2, repeated_header 1), 1 blank line``; None if none."""
        parts = []
        if self.bad:
            reasons = ", ".join(f"{r} {n}" for r, n in sorted(self.by_reason.items()))
            parts.append(f"{_count(self.bad, 'bad row')} ({reasons})")
        if self.lines.blank:
            parts.append(_count(self.lines.blank, "blank line"))
        return "skipped " + ", ".join(parts) if parts else None


def first_bad_row(numbered: Iterable[Numbered]) -> SourceError | None:
    """The first bad row of ``numbered`` (``--strict``'s check of the whole file), or None."""
    return next((item for _line, item in numbered if isinstance(item, SourceError)), None)


def strict_line(error: SourceError) -> str:
    """``FILE:LINE: reason: detail``, the line ``--strict`` stops with."""
    code = error.code or RejectReason.MALFORMED_ROW
    return f"{error.path}:{error.line}: {code}: {error.reason}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
