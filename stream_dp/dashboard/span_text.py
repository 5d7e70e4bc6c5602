"""A release record's span as people read it: the hours it covers (docs/output.md)."""

from __future__ import annotations

from datetime import date, timedelta

#: Between a span's first and last time (an en dash).
DASH = "–"


def span_text(start: str, end: str) -> str:
    """``[start, end)`` (RFC 3339 UTC) as ``"2024-06-01 07:00–13:00"``, the end's date
    written too when it differs (``"2024-06-01 20:00–2024-06-02 02:00"``)."""
    first_day, first_time = start[:10], start[11:16]
    last_day, last_time = end[:10], end[11:16]
    if last_day == first_day or (last_time == "00:00" and _next_day_midnight(start, end)):
        last = "24:00" if last_day != first_day else last_time
        return f"{first_day} {first_time}{DASH}{last}"
    return f"{first_day} {first_time}{DASH}{last_day} {last_time}"


def _next_day_midnight(start: str, end: str) -> bool:
    """Whether ``end`` is the midnight right after ``start``'s day (a span ending at 24:00)."""
    return date.fromisoformat(end[:10]) == date.fromisoformat(start[:10]) + timedelta(days=1)
