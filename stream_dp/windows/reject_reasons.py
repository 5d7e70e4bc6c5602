"""The one vocabulary of reasons a reading is rejected, offline and in the service.

``stream-dp release`` writes these codes to its rejects file and counts them in its summary;
the worker puts them in the ``reason`` header of the dead-letter topic. The README's table
"Rejected readings" lists every code with :data:`DESCRIPTIONS` (a unit test keeps both equal).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class RejectReason(StrEnum):
    """Why one reading (or one line / message holding readings) was skipped."""

    NOT_UTF8 = "not_utf8"
    NOT_JSON = "not_json"
    EMPTY_MESSAGE = "empty_message"
    MALFORMED_ROW = "malformed_row"
    REPEATED_HEADER = "repeated_header"
    NOT_AN_OBJECT = "not_an_object"
    MISSING_FIELD = "missing_field"
    BAD_VEHICLE_ID = "bad_vehicle_id"
    BAD_TS = "bad_ts"
    TS_OUT_OF_RANGE = "ts_out_of_range"
    TS_IN_FUTURE = "ts_in_future"
    NOT_A_NUMBER = "not_a_number"
    LAT_OUT_OF_RANGE = "lat_out_of_range"
    LON_OUT_OF_RANGE = "lon_out_of_range"


#: One line per reason, as the README's table shows it.
DESCRIPTIONS: dict[RejectReason, str] = {
    RejectReason.NOT_UTF8: "a line (CSV row, JSON Lines line, `.traj` line) that is not UTF-8",
    RejectReason.NOT_JSON: "a JSON Lines line or a message value that is not JSON",
    RejectReason.EMPTY_MESSAGE: "service: an empty message value or an empty JSON array",
    RejectReason.MALFORMED_ROW: (
        "a CSV row that cannot be split into the header's fields, or a `.traj` line that is "
        "not a well-formed trajectory"
    ),
    RejectReason.REPEATED_HEADER: (
        "a CSV row that repeats the header (e.g. files joined with their headers)"
    ),
    RejectReason.NOT_AN_OBJECT: "a JSON value that is not an object",
    RejectReason.MISSING_FIELD: (
        "one of vehicle_id, ts, lat, lon, speed is absent (a JSON key, a CSV row's last fields)"
    ),
    RejectReason.BAD_VEHICLE_ID: (
        "vehicle_id not a non-empty string or integer, longer than 256 characters, or with NUL"
    ),
    RejectReason.BAD_TS: "ts neither finite epoch seconds nor an RFC 3339 / ISO 8601 time",
    RejectReason.TS_OUT_OF_RANGE: "ts before 1970-01-01T00:00:00Z or after 9000-01-01T00:00:00Z",
    RejectReason.TS_IN_FUTURE: (
        "service: ts more than `max_future_seconds` ahead of the worker's clock"
    ),
    RejectReason.NOT_A_NUMBER: "lat, lon or speed not a finite number (the detail names it)",
    RejectReason.LAT_OUT_OF_RANGE: "lat outside [-90, 90]",
    RejectReason.LON_OUT_OF_RANGE: "lon outside [-180, 180]",
}


@dataclass(frozen=True)
class Reject:
    """One skipped row of an input file: its line, the reason code and the detail."""

    line: int
    reason: RejectReason
    detail: str

    def as_json(self) -> dict[str, object]:
        """The rejects file's line: ``{"line": N, "reason": CODE, "detail": TEXT}``."""
        return {"line": self.line, "reason": str(self.reason), "detail": self.detail}
